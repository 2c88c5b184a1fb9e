"""The token a server beyond the loopback requires (docs/serving.md, "Token"): generated unless `--token`, printed
as a link; every request carries it as a Bearer header, `?token=` or the cookie the link sets."""

from __future__ import annotations

import re
import secrets
from http.cookies import SimpleCookie
from urllib.parse import parse_qs

from put.errors import InputError

LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")  # names only this machine reaches: no token needed
COOKIE = "put_token"
TOKEN_BYTES = 24


def resolve_token(host: str, token: str | None) -> str | None:
    """The token the server requires: the one given (never empty), else a new one unless it listens on the
    loopback only."""
    if token is not None:
        if not token.strip():
            raise InputError("--token: empty; give a token, or leave --token out (a token is then generated unless "
                             "the server listens on 127.0.0.1 only)")
        if not re.fullmatch(r"[\w.~-]+", token):  # it goes into a link and a cookie as it is
            raise InputError("--token: use letters, digits and . _ ~ - only")
        return token
    return None if host in LOOPBACK else secrets.token_urlsafe(TOKEN_BYTES)


def presented(scope: dict) -> tuple[str, bool]:
    """The token a request carries (header, query or cookie), and whether it came in the query (the link)."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
    kind, _, value = headers.get("authorization", "").partition(" ")
    if kind.lower() == "bearer" and value:
        return value.strip(), False
    query = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
    if query:
        return query[0], True
    cookie = SimpleCookie()
    try:
        cookie.load(headers.get("cookie", ""))
    except Exception:  # a malformed cookie header is no token
        return "", False
    return (cookie[COOKIE].value if COOKIE in cookie else ""), False


class RequireToken:
    """ASGI middleware: 401 for any HTTP request without the token; a valid token in the query sets the cookie."""

    def __init__(self, app, token: str) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: dict, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        given, in_query = presented(scope)
        if not secrets.compare_digest(given.encode(), self.token.encode()):
            body = (b'{"detail": "this server requires its token: open the link put serve printed (.../?token=...), '
                    b'or send the header Authorization: Bearer <token>"}')
            await send({"type": "http.response.start", "status": 401, "headers": [
                (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b"Bearer")]})
            return await send({"type": "http.response.body", "body": body})
        if not in_query:
            return await self.app(scope, receive, send)

        async def with_cookie(message: dict) -> None:
            if message["type"] == "http.response.start":
                cookie = f"{COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"
                message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", cookie.encode())]}
            await send(message)

        await self.app(scope, receive, with_cookie)
