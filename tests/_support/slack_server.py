"""The slice of the Slack Web API slack-sdk's WebClient calls for outbound: chat.postMessage, conversations.history
and conversations.replies (with message metadata). Checks the bearer token; keeps channels' messages in order."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from tests._support.fake_http import FakeServer, Reply, Seen


class SlackServer(FakeServer):
    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token
        self.messages: list[dict[str, Any]] = []
        self._ts = 1_700_000_000

    @property
    def base_url(self) -> str:
        return f"{self.url}/api/"

    def posts(self) -> list[dict[str, Any]]:
        return [r.json() for r in self.seen("/api/chat.postMessage")]

    def route(self, req: Seen) -> Reply:
        if req.headers.get("Authorization") != f"Bearer {self.token}":
            return Reply(200, {"ok": False, "error": "invalid_auth"})
        if req.path == "/api/chat.postMessage":
            return self._post(req.json() or {})
        if req.path in ("/api/conversations.history", "/api/conversations.replies"):
            return self._history(req)
        return Reply(404, {"ok": False, "error": "unknown_method"})

    def _post(self, body: dict[str, Any]) -> Reply:
        for required in ("channel", "text"):
            if not body.get(required):
                return Reply(200, {"ok": False, "error": f"no_{required}"})
        self._ts += 1
        message = {
            "type": "message",
            "ts": f"{self._ts}.000100",
            "text": body["text"],
            "blocks": body.get("blocks"),
            "metadata": body.get("metadata"),
            "thread_ts": body.get("thread_ts"),
            "channel": body["channel"],
        }
        self.messages.append(message)
        return Reply(200, {"ok": True, "channel": body["channel"], "ts": message["ts"], "message": message})

    def _history(self, req: Seen) -> Reply:
        # WebClient sends conversations.history as GET (query) and conversations.replies as a form POST.
        form = parse_qs(req.body.decode()) if req.method == "POST" else {}
        q = {k: v[0] for k, v in {**req.query, **form}.items()}
        channel, thread = q.get("channel"), q.get("ts")
        with_meta = q.get("include_all_metadata") in ("1", "true", "True")
        found = [
            m
            for m in self.messages
            if m["channel"] == channel
            and (thread is None or m["ts"] == thread or m["thread_ts"] == thread)
            and (thread is not None or m["thread_ts"] is None)
        ]
        out = [{k: v for k, v in m.items() if with_meta or k != "metadata"} for m in reversed(found)]
        return Reply(200, {"ok": True, "messages": out, "has_more": False})
