"""The slice of the Jira Cloud REST API v3 the ``jira`` package calls for outbound: serverInfo and field (at
construction and for search), search/jql, issue create/get, comments, transitions. Checks basic auth."""

from __future__ import annotations

import base64
import re
from typing import Any

from tests._support.fake_http import FakeServer, Reply, Seen

_ISSUE = re.compile(r"^/rest/api/3/issue/([A-Z][A-Z0-9_]*-\d+)(/comment|/transitions)?$")
_LABEL = re.compile(r'labels = "([^"]+)"')
DONE = {"key": "done", "name": "Done"}
TODO = {"key": "new", "name": "To Do"}


class JiraServer(FakeServer):
    def __init__(self, email: str, token: str) -> None:
        super().__init__()
        self.auth = "Basic " + base64.b64encode(f"{email}:{token}".encode()).decode()
        self.issues: dict[str, dict[str, Any]] = {}
        self.comments: dict[str, list[dict[str, Any]]] = {}
        self._next = 1

    def calls(self) -> list[tuple[str, str]]:
        """(method, path) of every request after the client's construction calls."""
        return [(r.method, r.path) for r in self.requests]

    def route(self, req: Seen) -> Reply:
        if req.headers.get("Authorization") != self.auth:
            return Reply(401, {"errorMessages": ["unauthorized"]})
        path = req.path
        if path == "/rest/api/3/serverInfo":
            return Reply(
                200,
                {
                    "baseUrl": self.url,
                    "version": "1001.0.0",
                    "versionNumbers": [1001, 0, 0],
                    "deploymentType": "Cloud",
                    "buildNumber": 100,
                    "serverTitle": "fake jira",
                },
            )
        if path == "/rest/api/3/field":
            return Reply(
                200,
                [
                    {"id": "labels", "name": "Labels", "clauseNames": ["labels"]},
                    {"id": "status", "name": "Status", "clauseNames": ["status"]},
                ],
            )
        if path == "/rest/api/3/search/jql":
            return self._search(req.query.get("jql", [""])[0])
        if path == "/rest/api/3/issue" and req.method == "POST":
            return self._create(req.json() or {})
        match = _ISSUE.match(path)
        if match is None or match.group(1) not in self.issues:
            return Reply(404, {"errorMessages": ["Issue does not exist"]})
        key, sub = match.group(1), match.group(2)
        if sub is None:
            return Reply(200, self.issues[key])
        if sub == "/comment" and req.method == "POST":
            comment = {"id": str(10000 + sum(len(c) for c in self.comments.values())), "body": req.json()["body"]}
            self.comments[key].append(comment)
            return Reply(201, comment)
        if sub == "/comment":
            listed = self.comments[key]
            return Reply(200, {"comments": listed, "startAt": 0, "maxResults": 1048576, "total": len(listed)})
        if sub == "/transitions" and req.method == "POST":
            if str((req.json() or {}).get("transition", {}).get("id")) == "31":
                self.issues[key]["fields"]["status"] = {"name": "Done", "statusCategory": DONE}
            return Reply(204)
        return Reply(
            200,
            {
                "transitions": [
                    {"id": "21", "name": "In Progress", "to": {"statusCategory": {"key": "indeterminate"}}},
                    {"id": "31", "name": "Done", "to": {"statusCategory": DONE}},
                ]
            },
        )

    def _create(self, body: dict[str, Any]) -> Reply:
        fields = body.get("fields") or {}
        for required in ("project", "issuetype", "summary", "description"):
            if required not in fields:
                return Reply(400, {"errors": {required: "required"}})
        if not isinstance(fields["description"], dict) or fields["description"].get("type") != "doc":
            return Reply(400, {"errors": {"description": "Operation value must be an Atlassian Document"}})
        key = f"{fields['project']['key']}-{self._next}"
        self._next += 1
        self.issues[key] = {
            "id": str(10000 + self._next),
            "key": key,
            "self": f"{self.url}/rest/api/3/issue/{key}",
            "fields": {**fields, "status": {"name": "To Do", "statusCategory": TODO}},
        }
        self.comments[key] = []
        return Reply(201, {"id": self.issues[key]["id"], "key": key, "self": self.issues[key]["self"]})

    def _search(self, jql: str) -> Reply:
        label = _LABEL.search(jql)
        open_only = "statusCategory != Done" in jql
        found = [
            {"id": i["id"], "key": k, "fields": {"status": i["fields"]["status"]}}
            for k, i in self.issues.items()
            if label is not None
            and label.group(1) in i["fields"].get("labels", [])
            and not (open_only and i["fields"]["status"]["statusCategory"]["key"] == "done")
        ]
        return Reply(200, {"issues": found, "isLast": True})
