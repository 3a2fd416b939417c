"""A Teams Workflows trigger ("When a Teams webhook request is received"): checks the request as Teams checks it
(POST, JSON content type, the trigger's ``sig`` in the query, one message with one Adaptive Card attachment of
schema 1.4 or later) and records the cards. Answers 202 like Workflows; ``legacy=True`` answers 200 ``1`` like an
Office 365 connector."""

from __future__ import annotations

from typing import Any

from tests._support.fake_http import FakeServer, Reply, Seen

PATH = "/workflows/4b1f2c/triggers/manual/paths/invoke"
SIG = "s1gn4ture-of-the-trigger"


def _version(value: Any) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in str(value).split("."))
    except ValueError:
        return (0,)


class TeamsServer(FakeServer):
    def __init__(self, *, legacy: bool = False) -> None:
        super().__init__()
        self.legacy = legacy
        self.cards: list[dict[str, Any]] = []
        self.refused: list[str] = []

    @property
    def webhook_url(self) -> str:
        return f"{self.url}{PATH}?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig={SIG}"

    def _refuse(self, why: str) -> Reply:
        self.refused.append(why)
        return Reply(400, {"error": {"code": "InvalidRequestContent", "message": why}})

    def route(self, req: Seen) -> Reply:
        if req.path != PATH or req.method != "POST":
            return Reply(404, {"error": {"code": "NotFound"}})
        if req.query.get("sig") != [SIG]:
            return Reply(401, {"error": {"code": "DirectApiAuthorizationRequired"}})
        if not req.headers.get("Content-Type", "").startswith("application/json"):
            return self._refuse("content type")
        message = req.json()
        if not isinstance(message, dict) or message.get("type") != "message":
            return self._refuse("type must be message")
        attachments = message.get("attachments")
        if not isinstance(attachments, list) or len(attachments) != 1:
            return self._refuse("exactly one attachment")
        attachment = attachments[0]
        if attachment.get("contentType") != "application/vnd.microsoft.card.adaptive":
            return self._refuse("contentType")
        card = attachment.get("content")
        if not isinstance(card, dict) or card.get("type") != "AdaptiveCard" or _version(card.get("version")) < (1, 4):
            return self._refuse("an AdaptiveCard of version 1.4 or later")
        body = card.get("body")
        if not isinstance(body, list) or not body or any(not isinstance(e, dict) or "type" not in e for e in body):
            return self._refuse("card body")
        for action in card.get("actions", []):
            if action.get("type") != "Action.OpenUrl" or not str(action.get("url", "")).startswith("http"):
                return self._refuse("actions")
        self.cards.append(card)
        return Reply(200, 1) if self.legacy else Reply(202)
