"""How the user's consent is obtained in the authorization code flow (L6).

The flow builds the authorization URL; a :class:`Consent` takes the user there and hands back the URL the
authorization server redirected to (``redirect_uri?code=…&state=…``). Two ship here:

* :class:`LoopbackConsent`, for interactive use: a one-shot HTTP listener on ``127.0.0.1`` receives the redirect
  (RFC 8252 §7.3), the browser is opened on the authorization URL and the URL is also written to stderr;
* :class:`HeadlessConsent`, for tests and programs: a function of yours gets the authorization URL and returns
  the redirect URL (drive a browser, ask a human, call a test server). Without one it fetches the URL itself and
  takes the redirect back, which works only with an authorization server that approves without a person.

The flow checks ``state`` (and ``iss``) itself; the listener also ignores callbacks that do not carry the
``state`` of the request in progress, so a stray request cannot end the wait.
"""

from __future__ import annotations

import html
import http.server
import logging
import socket
import sys
import webbrowser
from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol, runtime_checkable
from urllib.parse import parse_qs, urljoin, urlsplit

import anyio
import anyio.from_thread
import anyio.to_thread

from ..addresses import is_loopback_host
from ..errors import AuthorizationError
from ..transports.http_log_redaction import redact_http_logs
from .oauth_wire import is_secure_endpoint

__all__ = ("Consent", "LoopbackConsent", "HeadlessConsent", "check_redirect_uri", "redact_http_logs")

logger = logging.getLogger(__name__)

_MAX_HOPS: Final = 5
_PAGE: Final = (
    "<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
    "<body style='font-family:sans-serif;margin:3em'><h1>{title}</h1><p>{text}</p></body></html>"
)


@runtime_checkable
class Consent(Protocol):
    """Takes the user to the authorization URL and returns the URL the authorization server redirected back to."""

    @property
    def redirect_uri(self) -> str: ...

    async def authorize(self, authorization_url: str) -> str: ...


def check_redirect_uri(uri: str) -> str:
    """``uri`` if it may be a redirect URI (HTTPS, or HTTP on the loopback interface; no fragment), else ValueError."""
    parts = urlsplit(uri)
    if parts.fragment or not parts.hostname:
        raise ValueError(f"a redirect URI must be an absolute URL without a fragment, not {uri!r}")
    if not (parts.scheme == "https" or (parts.scheme == "http" and is_loopback_host(parts.hostname))):
        raise ValueError(f"a redirect URI must use https, or http on the loopback interface only: {uri!r}")
    return uri


def _state_of(url: str) -> str | None:
    values = parse_qs(urlsplit(url).query).get("state")
    return values[0] if values else None


def _same_endpoint(url: str, redirect_uri: str) -> bool:
    a, b = urlsplit(url), urlsplit(redirect_uri)
    return (a.scheme.lower(), (a.hostname or "").lower(), a.port, a.path or "/") == (
        b.scheme.lower(),
        (b.hostname or "").lower(),
        b.port,
        b.path or "/",
    )


class HeadlessConsent:
    """Consent without a local browser.

    :param respond: ``async respond(authorization_url) -> redirect_url``: whatever gets the user's (or a test
        server's) answer. Without it, the authorization URL is fetched and its redirects followed (HTTPS, or HTTP on
        loopback, at most five) until one points at ``redirect_uri``: for authorization servers that approve without
        a person (test servers, trusted automation).
    :param redirect_uri: registered with the authorization server; nothing listens on it.
    """

    def __init__(
        self,
        respond: Callable[[str], Awaitable[str]] | None = None,
        *,
        redirect_uri: str = "http://127.0.0.1/callback",
        verify: Any = True,
    ) -> None:
        self._respond = respond
        self._redirect_uri = check_redirect_uri(redirect_uri)
        self._verify = verify
        redact_http_logs()

    @property
    def redirect_uri(self) -> str:
        return self._redirect_uri

    async def authorize(self, authorization_url: str) -> str:
        if self._respond is not None:
            return await self._respond(authorization_url)
        return await self._follow(authorization_url)

    async def _follow(self, url: str) -> str:
        import httpx

        async with httpx.AsyncClient(follow_redirects=False, timeout=30.0, verify=self._verify) as http:
            for _ in range(_MAX_HOPS):
                if not is_secure_endpoint(url):
                    shown = urlsplit(url)._replace(query="", fragment="").geturl()  # (the query may hold the code)
                    raise AuthorizationError("authorization", f"refusing to follow a redirect to {shown} (not HTTPS)")
                try:
                    response = await http.get(url)
                except httpx.HTTPError as exc:
                    raise AuthorizationError("authorization", f"{url} could not be reached ({type(exc).__name__})")
                location = response.headers.get("location")
                if response.status_code not in (301, 302, 303, 307, 308) or not location:
                    raise AuthorizationError(
                        "authorization",
                        f"the authorization server answered HTTP {response.status_code} instead of redirecting back: "
                        "it needs a person; use LoopbackConsent or a HeadlessConsent(respond=...)",
                    )
                url = urljoin(url, location)
                if _same_endpoint(url, self._redirect_uri):
                    return url
        raise AuthorizationError("authorization", f"more than {_MAX_HOPS} redirects without reaching the redirect URI")


def _write_stderr(url: str) -> None:
    sys.stderr.write(f"To authorize, open this URL in a browser:\n\n    {url}\n\n")
    sys.stderr.flush()


class LoopbackConsent:
    """Interactive consent: opens the browser on the authorization URL and receives the redirect on a loopback
    listener (``http://127.0.0.1:PORT/callback``).

    :param port: 0 (the default) picks a free port when the redirect URI is first needed; the listening socket is
        kept, so the URI stays the same for this object's lifetime. Give a fixed port when the redirect URI must be
        known in advance (a client ID metadata document lists it).
    :param open_browser: open the system browser (``webbrowser``); the URL is shown either way.
    :param show: shows the URL to the user; by default it is written to stderr (never stdout, which may be a wire).
    :param timeout: how long to wait for the user, in seconds.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        path: str = "/callback",
        open_browser: bool = True,
        show: Callable[[str], None] | None = None,
        timeout: float = 300.0,
    ) -> None:
        if not is_loopback_host(host):
            raise ValueError(f"the redirect listener must be on the loopback interface, not {host!r}")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be a TCP port number (0: any free one), not {port!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self.host = host
        self.port = port
        self.path = path if path.startswith("/") else "/" + path
        self.open_browser = open_browser
        self.show = show or _write_stderr
        self.timeout = timeout
        self._socket: socket.socket | None = None

    @property
    def redirect_uri(self) -> str:
        sock = self._listen()
        port = sock.getsockname()[1]
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{port}{self.path}"

    def _listen(self) -> socket.socket:
        if self._socket is None:
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.bind((self.host, self.port))
                sock.listen(8)
            except OSError:
                sock.close()
                raise
            self._socket = sock
        return self._socket

    def close(self) -> None:
        """Stop listening (the redirect URI is no longer served)."""
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    async def authorize(self, authorization_url: str) -> str:
        sock = self._listen()
        expected_state = _state_of(authorization_url)
        received: list[str] = []
        done = anyio.Event()
        server = _CallbackServer(sock, self.path, expected_state, self.redirect_uri, received, done)
        self.show(authorization_url)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_run_in_thread, server.serve_until_answered)
            if self.open_browser:
                tg.start_soon(_open_browser, authorization_url)
            try:
                with anyio.move_on_after(self.timeout):
                    await done.wait()
            finally:
                server.stopped = True  # the listening thread returns within its poll interval
                tg.cancel_scope.cancel()  # a browser that is still opening is left to itself
        if not received:
            raise AuthorizationError("authorization", f"no answer from the browser within {self.timeout:g} s")
        return received[0]


async def _run_in_thread(function: Callable[[], object]) -> None:
    await anyio.to_thread.run_sync(function)


async def _open_browser(url: str) -> None:
    try:
        opened = await anyio.to_thread.run_sync(webbrowser.open, url, abandon_on_cancel=True)
    except webbrowser.Error:
        opened = False
    if not opened:
        logger.info("no browser could be opened; open the URL shown by hand")


class _CallbackServer(http.server.HTTPServer):
    """The standard library's HTTP server on an already-listening socket, answering the one redirect."""

    def __init__(
        self,
        sock: socket.socket,
        path: str,
        state: str | None,
        redirect_uri: str,
        received: list[str],
        done: anyio.Event,
    ) -> None:
        super().__init__(sock.getsockname()[:2], _CallbackHandler, bind_and_activate=False)
        self.socket.close()  # the one made by the constructor: ours is already listening
        self.socket = sock
        self.timeout = 0.25  # how often handle_request() looks at ``stopped``
        self.stopped = False
        self.callback_path = path
        self.expected_state = state
        self.redirect_base = redirect_uri
        self.received = received
        self.done = done

    def serve_until_answered(self) -> None:
        while not self.stopped and not self.received:
            self.handle_request()

    def server_close(self) -> None:  # the socket belongs to LoopbackConsent
        pass


class _CallbackHandler(http.server.BaseHTTPRequestHandler):
    server: _CallbackServer

    def do_GET(self) -> None:
        server = self.server
        parts = urlsplit(self.path)
        if parts.path != server.callback_path or server.received:
            self._page(404, "Not found", "Nothing is served here.")
            return
        query = parse_qs(parts.query)
        state = query.get("state", [None])[0]
        if server.expected_state is not None and state != server.expected_state:
            self._page(400, "Unexpected response", "This response does not belong to the authorization in progress.")
            return
        if "error" in query:
            reason = html.escape(query["error"][0][:200])
            self._page(
                200, "Authorization refused", f"The authorization server answered {reason}. You can close this window."
            )
        else:
            self._page(200, "Authorization complete", "You can close this window and return to the application.")
        server.received.append(server.redirect_base + ("?" + parts.query if parts.query else ""))
        anyio.from_thread.run_sync(server.done.set)

    def _page(self, status: int, title: str, text: str) -> None:
        body = _PAGE.format(title=html.escape(title), text=text).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # the query holds the code: never logged
        logger.debug("redirect listener: %s", urlsplit(self.path).path)
