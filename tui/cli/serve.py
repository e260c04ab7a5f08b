"""``sessionscope serve``: the app in a web browser (textual-serve), on this machine only, read-only unless asked.

    sessionscope serve [--dir PATH | --demo] [--read-only | --snapshot | --read-write] [--port N]

* It listens on ``127.0.0.1`` only (never another interface: there is no ``--host``), port 8000 by default.
* Each browser tab that opens the page starts its own app process: ``python -m tui.cli --dir DIR --read-only``
  (or ``--snapshot``). The directory is resolved once, before serving (``--demo`` builds the demo first), so a
  bad ``--dir`` is reported at once (exit 2) and every tab opens the same one.
* **Read-only by default.** A browser tab is easy to leave open and to share a screen with, so repairs are off
  unless ``--read-write`` is given explicitly; the app then opens as it would in the terminal (config.toml's
  ``open_mode``, read-write by default). ``--read-write`` with ``--read-only`` or ``--snapshot`` is refused.
* **Only the person who started it.** The URL printed holds a random token (``/?token=…``); opening it sets an
  HttpOnly, SameSite=Strict cookie, and the app's websocket and downloads need that cookie. Every request
  must name ``127.0.0.1:PORT`` as its Host (no DNS rebinding; open the URL as printed, not ``localhost``), and the websocket must
  come from a page of that origin (no other web site can open it and drive or read the app). The page gets a
  Content-Security-Policy: its own files and its own websocket only (textual-serve's page asks for a web font
  from another site; that request is refused and a local monospace font is used).

Stop it with Ctrl+C (or SIGTERM); the app processes of open tabs end with it.
"""

from __future__ import annotations

import argparse
import hmac
import logging
import secrets
import shlex
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from store.safetext import one_line
from tui.cli.output import err, out

HOST = "127.0.0.1"
DEFAULT_PORT = 8000
COOKIE = "sessionscope_token"
PUBLIC_PREFIXES = ("/static/",)  # the page's own script, styles and fonts: files of the textual-serve package


def register(sub: argparse._SubParsersAction, add_location: Callable[..., None]) -> None:
    serve = sub.add_parser(
        "serve", help="serve the app in a web browser on 127.0.0.1 (read-only unless --read-write)",
        description="Serve the app in a web browser with textual-serve, on 127.0.0.1 only. Each tab runs its own "
                    "app, read-only unless --read-write is given. Open the printed URL (it holds a token).")
    add_location(serve, nested=True)
    serve.add_argument("--read-write", action="store_true",
                       help="let the app write (repairs), as it does in the terminal; default read-only")
    serve.add_argument("--port", metavar="N", type=_port, default=DEFAULT_PORT,
                       help=f"the port on 127.0.0.1 (default {DEFAULT_PORT})")
    serve.set_defaults(handler=cmd_serve)


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a port number") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"'{text}' is not a port number (1-65535)")
    return value


def app_command(root: Path | None, args: argparse.Namespace) -> list[str]:
    """The command each browser tab runs: this Python, the CLI, the resolved directory and the mode."""
    argv = [sys.executable, "-m", "tui.cli"]
    if root is not None:
        argv += ["--dir", str(root)]
    if getattr(args, "snapshot", False):
        argv.append("--snapshot")
    elif not getattr(args, "read_write", False):
        argv.append("--read-only")
    return argv


def mode_label(args: argparse.Namespace) -> str:
    if getattr(args, "snapshot", False):
        return "snapshot (read-only, no locks)"
    if getattr(args, "read_write", False):
        return "read-write (repairs enabled)"
    return "read-only"


def cmd_serve(args: argparse.Namespace) -> int:
    from tui.cli import core as cli

    if args.read_write and (getattr(args, "read_only", False) or getattr(args, "snapshot", False)):
        raise cli.UsageError("choose one of --read-write, --read-only and --snapshot")
    root = cli._session_dir(args)  # --demo builds the demo; a bad --dir is exit 2 before anything listens
    token = secrets.token_urlsafe(24)
    server = make_server(app_command(root, args), args.port, token)
    out(f"Serving {one_line(root) if root is not None else 'the default directory'} ({mode_label(args)}) on")
    out(f"  http://{HOST}:{args.port}/?token={token}")
    out("Open that URL in a browser on this machine; Ctrl+C stops the server.")
    sys.stdout.flush()
    server.serve()
    return 0


class _SafeLogHandler(logging.Handler):
    """A log record as ``sessionscope serve: LEVEL message`` on one safe line (a request line or an app's error
    output may hold anything: it is never written raw to the terminal)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                text += f" ({type(record.exc_info[1]).__name__}: {record.exc_info[1]})"
            err(f"serve: {record.levelname.lower()}: {text}")
        except Exception:  # noqa: BLE001 - logging must never raise
            self.handleError(record)


def make_server(argv: list[str], port: int, token: str) -> Any:
    """A textual-serve :class:`Server` for ``argv`` on 127.0.0.1:``port`` that checks Host, Origin and token."""
    from aiohttp import web
    from textual_serve.server import Server

    # One origin: the page's script and websocket URLs name 127.0.0.1, and the cookie belongs to that host.
    allowed_hosts = {f"{HOST}:{port}"}
    allowed_origins = {f"http://{HOST}:{port}"}

    # The page may load only its own files and talk only to its own websocket: textual-serve's page asks for a
    # web font from another site, which this refuses (the terminal falls back to a local monospace font).
    csp = ("default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
           f"img-src 'self' data:; font-src 'self' data:; connect-src 'self' ws://{HOST}:{port}; "
           "frame-ancestors 'none'; base-uri 'none'; form-action 'none'")

    def has_token(request: web.Request) -> bool:
        given = request.cookies.get(COOKIE, "") or request.query.get("token", "")
        return hmac.compare_digest(given.encode(), token.encode())

    @web.middleware
    async def guard(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                    ) -> web.StreamResponse:
        if request.headers.get("Host", "") not in allowed_hosts:
            raise web.HTTPForbidden(text=f"sessionscope serve answers only at http://{HOST}:{port}/ (the URL it "
                                         "printed).\n")
        if request.path.startswith(PUBLIC_PREFIXES):
            return await handler(request)
        if request.path == "/ws" and request.headers.get("Origin", "") not in allowed_origins:
            raise web.HTTPForbidden(text="The app's websocket opens only from its own page.\n")
        if not has_token(request):
            raise web.HTTPForbidden(text="Open the URL sessionscope serve printed (it holds the token).\n")
        response = await handler(request)
        if request.path == "/" and request.query.get("token"):
            response.set_cookie(COOKIE, token, httponly=True, samesite="Strict", path="/")
        if request.path == "/":
            response.headers["Content-Security-Policy"] = csp
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["X-Frame-Options"] = "DENY"
        return response

    class GuardedServer(Server):
        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            app.middlewares.append(guard)
            return app

        async def on_startup(self, app: web.Application) -> None:
            """Quiet: the command prints its own URL (with the token)."""

        def initialize_logging(self) -> None:
            """Warnings and errors only (no access log), each as one safe line on standard error."""
            handler = _SafeLogHandler()
            logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
            logging.getLogger("aiohttp.access").setLevel(logging.ERROR)

    return GuardedServer(shlex.join(argv), host=HOST, port=port, title="Sessionscope",
                         public_url=f"http://{HOST}:{port}")


__all__ = ["DEFAULT_PORT", "HOST", "app_command", "cmd_serve", "make_server", "register"]
