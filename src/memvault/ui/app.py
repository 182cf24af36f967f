"""The inspector's web app: Starlette routes over :mod:`memvault.ui.views`.

Safety, in layers:

- reads only, unless started with ``allow_writes``; then each write is a POST
  carrying the per-run token (a secret in the pages' forms: a page of another
  site cannot read it) from a same-origin page (``Origin`` / ``Sec-Fetch-Site``
  checked when the browser sends them): any other request gets 403 and changes
  nothing;
- only the ``Host`` names given are served (DNS rebinding);
- Jinja2 autoescapes every value, and the Content-Security-Policy allows no inline
  script and no other origin, so stored content shows as text, never as markup;
- the store URL is shown with its password redacted.

Handlers are plain functions: Starlette runs them on its thread pool, over the
synchronous :class:`memvault.Store`, which is safe across threads.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any
from urllib.parse import quote, urlsplit

import jinja2
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

import memvault
from memvault.errors import MemvaultError
from memvault.ui import threads, views
from memvault.urls import redact

_HERE = resources.files("memvault.ui")
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_HERE.joinpath("templates"))),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["q"] = lambda value: quote(str(value), safe="")
    env.filters["when"] = lambda dt: "never" if dt is None else dt.strftime("%Y-%m-%d %H:%M:%S")
    env.filters["anchor"] = lambda value: "call-" + str(value).encode("utf-8").hex()
    return env


def create_app(
    store: memvault.Store,
    *,
    allow_writes: bool = False,
    token: str | None = None,
    allowed_hosts: Sequence[str] | None = None,
) -> Starlette:
    """The inspector over an open store (which the caller closes).

    Args:
        store: the store to show.
        allow_writes: offer snapshot, rollback and fork (each undoable).
        token: the secret every write must carry (default: a fresh random one).
        allowed_hosts: ``Host`` names served (default: any).
    """
    env = _env()
    secret = token or secrets.token_urlsafe(32)
    label = redact(store.options.url)

    def sign(done: str, undo: str) -> str:
        message = f"{done}\0{undo}".encode()
        return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()

    def page(request: Request, name: str, status: int = 200, **context: Any) -> Response:
        html = env.get_template(name).render(
            url=label, writes=allow_writes, token=secret if allow_writes else "", **context
        )
        return HTMLResponse(
            html,
            status,
            headers={
                "Content-Security-Policy": _CSP,
                "X-Content-Type-Options": "nosniff",
                "Referrer-Policy": "same-origin",
                "Cache-Control": "no-store",
            },
        )

    def fail(request: Request, status: int, message: str) -> Response:
        return page(request, "error.html", status, message=message)

    def sessions(request: Request) -> Response:
        p = request.query_params
        listing = views.sessions_page(
            store,
            p.get("q", ""),
            p.get("sort", "id"),
            p.get("order") == "desc",
            p.get("cursor", ""),
            _int(p.get("page"), 1),
        )
        return page(request, "sessions.html", listing=listing, sorts=views.SORTS)

    def session(request: Request) -> Response:
        session_id = request.query_params.get("id", "")
        before = _int(request.query_params.get("before"), 0) or None
        try:
            view = views.timeline(store, session_id, before)
        except MemvaultError as exc:
            return fail(request, 400, f"{type(exc).__name__}: {exc}")
        if view is None:
            return fail(request, 404, f"no live session {session_id!r}")
        p = request.query_params
        done, undo = p.get("done", ""), p.get("undo", "")
        if not hmac.compare_digest(p.get("sig", ""), sign(done, undo)):
            done = undo = ""  # only a write of this run reports itself (no forged undo)
        return page(request, "timeline.html", sid=session_id, t=view, done=done, undo=undo)

    def compare(request: Request) -> Response:
        p = request.query_params
        session_id = p.get("id", "")
        try:
            result = views.diff(store, session_id, p.get("a", ""), p.get("b", ""))
        except MemvaultError as exc:
            return fail(request, 400, f"{type(exc).__name__}: {exc}")
        return page(request, "diff.html", sid=session_id, d=result)

    def checkpoints(request: Request) -> Response:
        session_id = request.query_params.get("id", "")
        if not threads.is_thread(session_id):
            return fail(request, 404, f"{session_id!r} is not a LangGraph thread")
        try:
            roots = threads.checkpoint_tree(store, session_id)
        except MemvaultError as exc:
            return fail(request, 400, f"{type(exc).__name__}: {exc}")
        return page(request, "checkpoints.html", sid=session_id, roots=roots)

    async def write(request: Request) -> Response:
        if not allow_writes:
            return fail(request, 403, "read-only: start `memvault ui --allow-writes` to repair")
        form = await request.form()
        sent = str(form.get("token", ""))
        if not _same_origin(request) or not hmac.compare_digest(sent.encode(), secret.encode()):
            return fail(request, 403, "refused: not a request from this inspector's own pages")
        action = _ACTIONS.get(request.path_params["action"])
        if action is None:
            return fail(request, 404, "unknown action")
        session_id = str(form.get("id", ""))
        try:
            target, done, undo = action(
                store.session(session_id), {k: str(v) for k, v in form.items()}
            )
        except MemvaultError as exc:
            return fail(request, 400, f"{type(exc).__name__}: {exc}")
        return RedirectResponse(
            f"/session?id={quote(target, safe='')}&done={quote(done, safe='')}"
            f"&undo={quote(undo, safe='')}&sig={sign(done, undo)}",
            303,
        )

    routes = [
        Route("/", sessions),
        # Session ids travel as query or form values: any string, slashes included.
        Route("/session", session),
        Route("/diff", compare),
        Route("/checkpoints", checkpoints),
        Route("/do/{action}", write, methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(_HERE.joinpath("static"))), name="static"),
    ]
    middleware = (
        [Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))]
        if allowed_hosts
        else []
    )
    return Starlette(routes=routes, middleware=middleware)


def _int(value: str | None, default: int) -> int:
    return int(value) if value is not None and value.isdigit() and len(value) < 10 else default


def _same_origin(request: Request) -> bool:
    """False when the browser says the request comes from another site."""
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    # "null" (an opaque origin) never matches. Pages set Referrer-Policy: same-origin:
    # with no-referrer, chromium would send "null" for our own forms too.
    origin = request.headers.get("origin")
    return origin is None or urlsplit(origin).netloc == request.headers.get("host")


Action = Callable[[memvault.Session, dict[str, str]], tuple[str, str, str]]
"""A repair: (session, form) -> (session to show, what was done, its undo hint)."""


def _snapshot(s: memvault.Session, form: dict[str, str]) -> tuple[str, str, str]:
    snap = s.snapshot(form.get("name", ""))
    return s.id, f"saved snapshot {snap.name!r} at version {snap.version}", ""


def _rollback(s: memvault.Session, form: dict[str, str]) -> tuple[str, str, str]:
    saved = s.rollback(form.get("name", ""))
    return (
        s.id,
        f"rolled back to {form.get('name')!r}; the replaced state is saved as {saved.name!r}",
        f"rollback:{saved.name}",
    )


def _fork(s: memvault.Session, form: dict[str, str]) -> tuple[str, str, str]:
    at = form.get("at") or None
    new = s.fork(form.get("new_id", ""), at=at)
    return new.id, f"forked from {s.id!r}" + (f" at {at!r}" if at else ""), f"delete:{new.id}"


def _delete_fork(s: memvault.Session, form: dict[str, str]) -> tuple[str, str, str]:
    """Undo of a fork: delete the new session, only while it is as the fork made it."""
    info, log = s.info(), s.log()
    if info is None or info.version != 1 or [e.op for e in log] != ["fork"]:
        raise memvault.ConflictError(f"session {s.id!r} changed since the fork: not deleted")
    source = str(log[0].detail.get("from", ""))
    s.delete()
    return source, f"deleted the fork {s.id!r}", ""


_ACTIONS: dict[str, Action] = {
    "snapshot": _snapshot,
    "rollback": _rollback,
    "fork": _fork,
    "delete-fork": _delete_fork,
}
