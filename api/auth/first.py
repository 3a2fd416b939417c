"""Authentication before the body: an ASGI layer that admits the bearer token of every protected route first.

FastAPI reads and parses a request's body before it solves the route's dependencies, so with the token checked in
:func:`~api.auth.deps.current_principal` alone an anonymous caller could make the API read and parse a body as
large as the body limit before its 401. This layer finds the route a request is for and, when that route depends on
``current_principal`` (every route but the public ones: health, the token endpoint, the key set and metadata, the
OpenAPI documents, share links), admits the token (:func:`~api.auth.deps.admit`: the same checks, the same
problem+json answers, the rate limit) before the app sees the request. The route's dependency then reuses the result.

Which routes are protected is read from the routes' dependencies, so a router added later is covered without a list
here. A test that replaces ``current_principal`` (``app.dependency_overrides``) replaces this check too.
"""

from __future__ import annotations

import re

from fastapi import FastAPI, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import iter_route_contexts
from starlette.routing import compile_path

from api.auth.deps import admit, bearer_token, current_principal
from api.context import ApiContext
from metalake.http.bodies import ASGIApp, Receive, Scope, Send, send_problem
from metalake.http.problems import Problem


def _needs_principal(dependant: Dependant) -> bool:
    return any(d.call is current_principal or _needs_principal(d) for d in dependant.dependencies)


def _route_path(scope: Scope) -> str:
    # The path the router matches: under a root path (a proxy's prefix), what follows it.
    path, root = str(scope["path"]), str(scope.get("root_path", ""))
    return path[len(root) :] if root and path.startswith(root + "/") else path


def _announces_body(scope: Scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() not in (b"", b"0")):
            return True
    return False


class AuthenticateFirst:
    """Refuses a request to a protected route whose bearer token is missing or not acceptable, unread."""

    def __init__(self, app: ASGIApp, api: FastAPI) -> None:
        self.app = app
        self._api = api
        self._routes: list[tuple[re.Pattern[str], frozenset[str], bool]] | None = None

    def _table(self) -> list[tuple[re.Pattern[str], frozenset[str], bool]]:
        # Built on the first request, once every router is included. A path this table gets wrong costs only the
        # early check: the route's own current_principal dependency still admits the token.
        if self._routes is None:
            table = []
            for context in iter_route_contexts(self._api.routes):
                dependant = getattr(context, "dependant", None)
                if context.path is None:
                    continue
                protected = isinstance(dependant, Dependant) and _needs_principal(dependant)
                table.append((compile_path(context.path)[0], frozenset(context.methods or ()), protected))
            self._routes = table
        return self._routes

    def _is_protected(self, scope: Scope) -> bool:
        path, method = _route_path(scope), scope["method"]
        # The first route of path and method decides, as in the router.
        for regex, methods, protected in self._table():
            if method in methods and regex.match(path):
                return protected
        return False  # 404 or 405: the router answers without reading the body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or current_principal in self._api.dependency_overrides
            or not self._is_protected(scope)
        ):
            await self.app(scope, receive, send)
            return
        request = Request(scope)  # no receive: nothing here can read the body
        ctx: ApiContext = self._api.state.ctx
        try:
            # On the token checks' own threads: a route's work holding the shared pool never delays a token check.
            await ctx.token_checks.run("token", admit, request, bearer_token(request.headers.get("authorization")))
        except Problem as problem:
            # A refused request that announced a body closes its connection: the server stops taking in the body.
            await send_problem(send, problem, request.url.path, close=_announces_body(scope))
            return
        await self.app(scope, receive, send)
