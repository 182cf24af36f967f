"""memvault as an MCP server: durable, searchable, undoable memory for any MCP client.

``memvault mcp`` (or :func:`serve`) serves a store to MCP clients (desktop
assistants, IDE agents, any agent with an MCP client) over stdio or streamable
HTTP; :func:`build_server` gives the server itself over an open
:class:`memvault.AsyncStore`, to mount in an app of your own. Needs the ``mcp``
extra: ``pip install 'memvault[mcp]'`` (the official ``mcp`` SDK).

The tools are memvault's API under the same semantics, one atomic memvault call
each (a read may take two: the session's info, then its messages):

- writes: ``append_messages`` (idempotent by message id), ``summarize``
  (idempotent by summary id), ``save_snapshot``, ``rollback`` (undoable: it saves
  what it replaces);
- reads: ``read_history``, ``search_messages`` (one session or all),
  ``list_snapshots``, ``list_sessions`` (paged, with the cursor), ``show_log``.

``read_only=True`` (``--read-only``) registers the reads alone, and ``serve``
then opens the store read-only where the backend can (SQLite: ``mode=ro``).

Each tool's parameters are typed, so its input schema comes from its signature;
its docstring is the description a model reads; its annotations say whether it
writes, whether a write may destroy (only ``rollback`` replaces the history, and
it is undoable), and whether repeating it adds nothing. Outputs are structured
(an output schema, and the same JSON as text).

Errors. Bad input is a tool error (``isError``) whose text says what is wrong and
that nothing was written: schema violations (wrong types, unknown roles, unknown
fields) are refused by the SDK's validation before the tool runs, memvault's own
checks (empty or over-long ids, limits, lone surrogates, compare-and-set) by
memvault before any write. A backend failure says whether the write may have
happened: :class:`~memvault.OutcomeUnknownError` says it may have, and how to
retry safely (append and summarize: the same ids, which the error lists, so a
retry stores nothing twice); :class:`~memvault.BackendUnavailableError` says
nothing was applied. No text the server writes, tool output or log line, holds
the store URL's password: URLs are shown through :func:`memvault.urls.redact`.

Resources: ``memvault://sessions/{session_id}/history`` reads a session's
history (the context view, as ``read_history`` gives it) as JSON. The id is
percent-encoded in the URI (:func:`history_uri`), so any id, slashes, ``..``,
NUL, quotes and all, names exactly one session and no other; the listing offers
the most recently updated sessions.

Concurrency is memvault's: any number of server processes on one SQLite file or
one Redis or PostgreSQL store serialize their writes, and none is lost.
"""

from __future__ import annotations

import logging
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal
from urllib.parse import quote

from pydantic import BaseModel, Field

import memvault
from memvault.aio import AsyncStore, open_async
from memvault.errors import (
    BackendError,
    BackendUnavailableError,
    MemvaultError,
    OutcomeUnknownError,
)
from memvault.hosts import LOOPBACK_NAMES, MCP_PORT, is_loopback
from memvault.integrations._common import missing_extra
from memvault.messages import Message, new_message_id
from memvault.model import Event, SessionInfo, Snapshot, check_count
from memvault.search import Hit
from memvault.urls import backend_module, redact

try:
    from mcp.server.mcpserver import MCPServer, ResourceSecurity
    from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
    from mcp.server.transport_security import TransportSecuritySettings
    from mcp.shared.exceptions import MCPError
    from mcp.types import INTERNAL_ERROR, Resource, ToolAnnotations
except ImportError as _exc:  # pragma: no cover - exercised by simulating the import
    raise missing_extra("mcp", "mcp", _exc) from _exc

Transport = Literal["stdio", "http"]
PATH = "/mcp"
"""The HTTP transport's endpoint."""
HISTORY_URI = "memvault://sessions/{session_id}/history"
"""The resource template of a session's history."""
LISTED = 100
"""How many sessions (the most recently updated) the resource listing offers."""

INSTRUCTIONS = """\
memvault is durable conversation memory. A session is one conversation, named by any \
text (its id); its history is an ordered list of messages. Nothing is lost: two clients \
writing at once are both kept, and every change is in the session's log.
- Remember: append_messages. Give every message an id of your own (any unique text): \
retrying a call with the same ids never stores a message twice.
- Recall: read_history (last=N for the newest N), search_messages (one session, or all).
- Undo: save_snapshot before a risky step; rollback restores it and saves what it \
replaced, so a rollback is undone by rolling back to the snapshot it returns \
(list_snapshots lists them).
- Long histories: summarize replaces the oldest messages in the history by a summary; \
the originals stay stored (read_history full=true shows them).
- list_sessions pages through the sessions; show_log says who changed what, and when.
A tool error says what was wrong and whether anything was written."""


# -- the tools' outputs --------------------------------------------------------------


class Appended(BaseModel):
    """What append_messages stored."""

    session_id: str
    version: int = Field(description="The session's version after the append.")
    ids: list[str] = Field(
        description="The messages' ids, in order (the ones memvault assigned included): "
        "retrying with these ids stores nothing twice."
    )


class History(BaseModel):
    """A session's history, oldest first."""

    session_id: str
    exists: bool = Field(description="False: no such session (nothing stored under this id).")
    version: int = Field(
        description="The session's version when the read began (0: no session). Pass it as "
        "expect_version to append_messages to append only if nothing changed since."
    )
    length: int = Field(description="How many messages the (context) history holds.")
    summarized: int = Field(
        description="How many earlier messages the summary at its start stands for (0: none)."
    )
    messages: list[Message]


class Hits(BaseModel):
    """The best matches first."""

    hits: list[Hit]


class Summarized(BaseModel):
    """What summarize stored."""

    session_id: str
    version: int = Field(description="The session's version after the summary.")
    summary_id: str = Field(description="The summary's id: a retry with it is a no-op.")


class Snapshots(BaseModel):
    """A session's snapshots, oldest first."""

    session_id: str
    snapshots: list[Snapshot]


class RolledBack(BaseModel):
    """What rollback did."""

    session_id: str
    restored: str = Field(description="The snapshot whose history is now the session's.")
    saved: Snapshot = Field(
        description="The history the rollback replaced, saved as this snapshot: rolling back "
        "to saved.name undoes the rollback."
    )


class SessionsPage(BaseModel):
    """One page of sessions."""

    sessions: list[SessionInfo]
    cursor: str | None = Field(
        description="Pass it as cursor (with the same order, descending and match) for the "
        "next page; null after the last page."
    )


class Log(BaseModel):
    """A session's operation log, oldest first."""

    session_id: str
    events: list[Event]


# -- the tools' parameters -----------------------------------------------------------
# Every scalar is strict: a JSON true is not the integer 1, a number is not a string.
# Optional texts default to "" (not null): the SDK reads a string argument whose
# annotation is not plain str as JSON, so a session named "null" would become None.

SessionId = Annotated[
    str,
    Field(
        strict=True,
        description="The session (one conversation): any non-empty text up to 512 "
        "characters, used exactly as given.",
    ),
]
Count = Annotated[int, Field(strict=True)]
Flag = Annotated[bool, Field(strict=True)]


def history_uri(session_id: str) -> str:
    """The resource URI of ``session_id``'s history, the id percent-encoded whole."""
    return f"memvault://sessions/{quote(session_id, safe='')}/history"


@contextmanager
def answered(*, retry: str | None) -> Iterator[None]:
    """memvault's errors as tool errors that say what happened to the store.

    Args:
        retry: for a write, how to retry it safely when its outcome is unknown;
            None for a read.
    """
    try:
        yield
    except BackendError as exc:
        if retry is None:  # a read
            raise ToolError(f"{_named(exc)} The same call can be made again.") from exc
        said = "nothing was applied" in str(exc).lower()
        if isinstance(exc, OutcomeUnknownError) or not (
            said or isinstance(exc, BackendUnavailableError)
        ):
            outcome = f"The write may or may not have been applied. {retry}"
        elif said:
            outcome = "The same call can be made again."
        else:
            outcome = "Nothing was applied: the same call can be made again."
        raise ToolError(f"{_named(exc)} {outcome}") from exc
    except MemvaultError as exc:
        tail = " Nothing was written." if retry is not None else ""
        raise ToolError(f"{_named(exc)}{tail}") from exc


def _named(exc: MemvaultError) -> str:
    text = str(exc).rstrip(".")
    return f"{type(exc).__name__}: {text}."


class Tools:
    """The tools, over one store; each method is one tool (its docstring, the
    description a model reads)."""

    def __init__(self, store: AsyncStore) -> None:
        self.store = store

    async def append_messages(
        self,
        session_id: SessionId,
        messages: Annotated[
            list[Message],
            Field(
                description="1 to 1,000 messages, stored in this order after the newest. Each "
                "needs a role (system, developer, user, assistant, tool) and usually "
                "content (text, or a list of JSON content parts); give each an id of "
                "your own (unique text, up to 256 characters) so that a retry cannot "
                "store it twice. tool_calls (id, name, arguments as JSON text), "
                "tool_call_id (a tool result's call), name and metadata (JSON) are "
                "optional."
            ),
        ],
        expect_version: Annotated[
            int | None,
            Field(
                strict=True,
                description="Append only if the session is at this version (0: it does "
                "not exist yet), as read_history reported it; else a ConflictError and "
                "nothing is written.",
            ),
        ] = None,
    ) -> Appended:
        """Store messages in a session's history, all of them or none, after its newest
        message. Creates the session if it does not exist. Idempotent by message id: a
        call whose messages are all stored already (a retry) stores nothing and
        succeeds; a call mixing stored and new ids is refused. Concurrent writers never
        overwrite each other."""
        ids = [m.id for m in messages]
        retry = (
            f"Retrying with the same message ids is safe: a message already stored is not "
            f"stored again. The ids: {ids!r}."
        )
        with answered(retry=retry):
            version = await self.store.session(session_id).append(
                messages, expect_version=expect_version
            )
        return Appended(session_id=session_id, version=version, ids=ids)

    async def read_history(
        self,
        session_id: SessionId,
        last: Annotated[
            int | None,
            Field(strict=True, description="Only the newest N messages (default: all)."),
        ] = None,
        full: Annotated[
            bool,
            Field(
                strict=True,
                description="Also the messages a summary stands for, each summary after "
                "the last message it summarizes (default: the context view, the summary "
                "first).",
            ),
        ] = False,
    ) -> History:
        """Read a session's history, oldest first: the context view an agent sends its
        model (a summary, if there is one, first, then the messages after the range it
        stands for). Hidden messages (rolled back, summarized) are not shown; they
        stay stored. A session that does not exist reads as empty, exists=false."""
        with answered(retry=None):
            s = self.store.session(session_id)
            info = await s.info()
            messages = await s.history(last, full=full)
        return History(
            session_id=session_id,
            exists=info is not None,
            version=info.version if info else 0,
            length=info.length if info else 0,
            summarized=info.summarized if info else 0,
            messages=messages,
        )

    async def search_messages(
        self,
        query: Annotated[
            str,
            Field(
                strict=True,
                description="Words to look for; anything else in it (quotes, operators) "
                "only separates words.",
            ),
        ],
        session_id: Annotated[
            str,
            Field(strict=True, description='Only this session (default "": every session).'),
        ] = "",
        k: Annotated[int, Field(strict=True, description="At most this many hits.")] = 10,
        include_hidden: Annotated[
            bool,
            Field(
                strict=True,
                description="Also find hidden messages (rolled back, popped, cleared); "
                "their hits have no position. Not every store can.",
            ),
        ] = False,
    ) -> Hits:
        """Find the messages that best match some words, best first (BM25 relevance), in
        one session or across all of them, summaries included. Each hit has the
        session, the message, its position in the session's full history (from 1) and
        its score."""
        with answered(retry=None):
            sessions = [self.store.session(session_id).id] if session_id else None
            found = await self.store.search(query, k, sessions, include_hidden=include_hidden)
        return Hits(hits=found)

    async def summarize(
        self,
        session_id: SessionId,
        summary: Annotated[
            str, Field(strict=True, description="The summary's text (stored as a system message).")
        ],
        through: Annotated[
            str,
            Field(
                strict=True,
                description="The id of the last message the summary stands for: a visible "
                "message after the current summary's range.",
            ),
        ],
        summary_id: Annotated[
            str,
            Field(
                strict=True,
                description='The summary message\'s id (default "": memvault assigns one); a '
                "retry with the same id is a no-op.",
            ),
        ] = "",
        expect_version: Annotated[
            int | None,
            Field(
                strict=True,
                description="Summarize only if the session is still at this version (the "
                "one the summarized history was read at); else a ConflictError.",
            ),
        ] = None,
    ) -> Summarized:
        """Let a summary stand for the oldest messages of a session's history (from the
        previous summary, or the start, through the message `through`), in one atomic
        step. The history then starts with the summary; the originals stay stored
        (read_history full=true), messages appended after `through` stay after it,
        and rolling back to a snapshot saved before undoes it."""
        summary_id = summary_id or new_message_id()
        retry = (
            f"Retrying with summary_id {summary_id!r} is safe: a summary already stored is "
            "not stored again."
        )
        with answered(retry=retry):
            version = await self.store.session(session_id).summarize(
                Message.system(summary, id=summary_id),
                through=through,
                expect_version=expect_version,
            )
        return Summarized(session_id=session_id, version=version, summary_id=summary_id)

    async def save_snapshot(
        self,
        session_id: SessionId,
        name: Annotated[
            str,
            Field(
                strict=True,
                description="The snapshot's name: up to 256 characters, not starting with "
                "'auto:', and not taken in this session (snapshots are never overwritten).",
            ),
        ],
    ) -> Snapshot:
        """Save a session's current history under a name, to roll back to later (before a
        risky tool call, say). Costs nothing: no message is copied."""
        retry = (
            "Retrying is safe: if the first call saved the snapshot, the retry answers "
            "SnapshotExistsError and list_snapshots shows it."
        )
        with answered(retry=retry):
            return await self.store.session(session_id).snapshot(name)

    async def list_snapshots(self, session_id: SessionId) -> Snapshots:
        """List a session's snapshots, oldest first: name, version, length and when
        saved; auto=true marks those a rollback saved (named auto:pre-rollback@v...)."""
        with answered(retry=None):
            found = await self.store.session(session_id).snapshots()
        return Snapshots(session_id=session_id, snapshots=found)

    async def rollback(
        self,
        session_id: SessionId,
        name: Annotated[
            str,
            Field(
                strict=True,
                description="The snapshot to restore (list_snapshots lists them; auto: ones too).",
            ),
        ],
    ) -> RolledBack:
        """Replace a session's history by the one a snapshot saved. Undoable: the history
        it replaces is first saved as a snapshot (returned as `saved`), and no snapshot
        is ever deleted, so rolling back to saved.name undoes this."""
        retry = (
            "Before retrying, check show_log: a rollback that was applied is logged (op "
            "'rollback'); a second one would roll back again (undoable too)."
        )
        with answered(retry=retry):
            saved = await self.store.session(session_id).rollback(name)
        return RolledBack(session_id=session_id, restored=name, saved=saved)

    async def list_sessions(
        self,
        limit: Annotated[
            int, Field(strict=True, description="At most this many sessions (1 to 10,000).")
        ] = 100,
        cursor: Annotated[
            str,
            Field(
                strict=True,
                description='The previous page\'s cursor (default "": the first page).',
            ),
        ] = "",
        order: Annotated[
            Literal["id", "version", "length", "updated", "expires"],
            Field(description="Order by this, then by id."),
        ] = "id",
        descending: Annotated[
            bool,
            Field(
                strict=True,
                description="Reverse the order (order=updated, descending=true: the most "
                "recent first).",
            ),
        ] = False,
        match: Annotated[
            str,
            Field(
                strict=True,
                description="Only sessions whose id contains this text, case-sensitive "
                '(default "": all).',
            ),
        ] = "",
    ) -> SessionsPage:
        """List the live sessions a page at a time, each with its version, length and
        dates, and the cursor to the next page. A session that exists throughout a walk
        is listed exactly once (order=id never moves one)."""
        with answered(retry=None):
            page = await self.store.sessions_page(
                limit,
                cursor=cursor or None,
                order=order,
                descending=descending,
                match=match or None,
            )
        return SessionsPage(sessions=page.sessions, cursor=page.cursor)

    async def show_log(
        self,
        session_id: SessionId,
        last: Annotated[
            int | None,
            Field(strict=True, description="Only the newest N events (default: all)."),
        ] = None,
    ) -> Log:
        """Show a session's operation log, oldest first: every change (append, summarize,
        snapshot, rollback, pop, trim, clear...) with the version it made, the writer
        that made it, when, and its details. It answers "who removed my messages?"."""
        with answered(retry=None):
            events = await self.store.session(session_id).log()
            if last is not None:
                events = events[len(events) - min(check_count("last", last), len(events)) :]
        return Log(session_id=session_id, events=events)

    async def history_resource(self, session_id: str) -> str:
        """A session's history as JSON (the context view, as read_history gives it)."""
        try:
            history = await self.read_history(session_id)
        except ToolError as exc:
            raise ResourceError(str(exc)) from exc
        if not history.exists:
            raise ResourceNotFoundError(f"no session {session_id!r}")
        return history.model_dump_json()


READ = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
ADD = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
REPLACE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)
TOOLS: dict[str, tuple[str, ToolAnnotations]] = {
    "append_messages": ("Append messages", ADD),
    "read_history": ("Read a history", READ),
    "search_messages": ("Search messages", READ),
    "summarize": ("Summarize the oldest messages", ADD),
    "save_snapshot": ("Save a snapshot", ADD),
    "list_snapshots": ("List snapshots", READ),
    "rollback": ("Roll back to a snapshot", REPLACE),
    "list_sessions": ("List sessions", READ),
    "show_log": ("Show the operation log", READ),
}
"""Each tool: its title and annotations (append, summarize and save_snapshot only
add, and repeating them adds nothing; rollback replaces the history, undoably)."""


class Server(MCPServer[Any]):
    """The MCP server over one store (see :func:`build_server`)."""

    def __init__(self, store: AsyncStore, **options: Any) -> None:
        super().__init__(**options)
        self.store = store

    async def list_resources(self) -> list[Resource]:
        """The static resources, then the histories of the most recently updated sessions."""
        try:
            page = await self.store.sessions_page(LISTED, order="updated", descending=True)
        except MemvaultError as exc:  # an error answer, not a crash (and its traceback)
            raise MCPError(code=INTERNAL_ERROR, message=_named(exc)) from exc
        return [
            *await super().list_resources(),
            *(
                Resource(
                    uri=history_uri(info.session_id),
                    name=info.session_id,
                    description=f"the history of session {info.session_id!r} "
                    f"({info.length} messages, version {info.version})",
                    mime_type="application/json",
                )
                for info in page.sessions
            ),
        ]


def build_server(store: AsyncStore, *, read_only: bool = False) -> Server:
    """The MCP server over ``store`` (left open: yours to close).

    Args:
        store: an open :class:`memvault.AsyncStore`.
        read_only: register the read tools alone (the store is not reopened: open it
            read-only too, as :func:`serve` does).
    """
    server = Server(
        store,
        name="memvault",
        version=memvault.__version__,
        instructions=INSTRUCTIONS,
    )
    tools = Tools(store)
    for name, (title, hints) in TOOLS.items():
        if read_only and not hints.read_only_hint:
            continue
        method = getattr(tools, name)
        server.add_tool(
            method,
            title=title,
            description=" ".join(method.__doc__.split()),
            annotations=hints,
        )
    server.resource(
        HISTORY_URI,
        name="session-history",
        title="A session's history",
        mime_type="application/json",
        # Session ids are not paths: "..", "/" and NUL are ids like any other, and the
        # URI carries them percent-encoded.
        security=ResourceSecurity(exempt_params={"session_id"}),
    )(tools.history_resource)
    return server


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def serve(
    url: str,
    *,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = MCP_PORT,
    read_only: bool = False,
    announce: Callable[[str], None] = _stderr,
) -> None:
    """Serve the store at ``url`` to MCP clients until the client leaves (stdio) or
    until interrupted (HTTP).

    Args:
        url: the store URL.
        transport: ``stdio`` (the client starts this process and talks on its stdin
            and stdout) or ``http`` (streamable HTTP on ``http://host:port/mcp``).
        host: the address the HTTP transport binds; loopback unless told otherwise.
            Behind a loopback bind, requests must name a loopback host (the SDK's
            DNS-rebinding protection).
        port: the HTTP transport's TCP port (0: any free one; the announced line
            says which).
        read_only: the read tools alone, the store opened read-only where the
            backend can (SQLite: ``mode=ro``).
        announce: called with the line that says what is served, and where (by
            default written to stderr: stdout is the stdio transport's).
    """
    import anyio  # the SDK's dependencies, as uvicorn

    options = getattr(backend_module(url), "READ_ONLY", {}) if read_only else {}
    # One line per record on stderr (the SDK's own setup, which this makes a no-op,
    # wraps records over several lines).
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if getattr(backend_module(url), "PROCESS_LOCAL", False):
        announce(f"warning: {redact(url)} is private to this process: it is gone when it exits")
    anyio.run(_serve, url, options, transport, host, port, read_only, announce)


async def _serve(
    url: str,
    options: dict[str, Any],
    transport: Transport,
    host: str,
    port: int,
    read_only: bool,
    announce: Callable[[str], None],
) -> None:
    mode = "read-only" if read_only else "read-write"
    async with open_async(url, **options) as store:
        server = build_server(store, read_only=read_only)
        if transport == "stdio":
            announce(f"memvault MCP server on stdio ({mode}) over {redact(url)}")
            await server.run_stdio_async()
            return
        await _serve_http(server, host, port, f"({mode}) over {redact(url)}", announce)


async def _serve_http(
    server: Server, host: str, port: int, what: str, announce: Callable[[str], None]
) -> None:
    import uvicorn

    shown = f"[{host.strip('[]')}]" if ":" in host else host
    if is_loopback(host):
        names = dict.fromkeys([shown, *LOOPBACK_NAMES, "[::1]"])
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[f"{name}:*" for name in names],
            allowed_origins=[f"http://{name}:*" for name in names],
        )
    else:
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        announce(
            f"warning: binding {host}: anyone who can reach this address can use the store "
            "(the MCP server has no authentication of its own)"
        )
    app = server.streamable_http_app(
        streamable_http_path=PATH,
        # Answers as JSON bodies, not server-sent events: the SDK's client refuses an
        # event over 1 MiB, and a history can be larger (no tool streams anything).
        json_response=True,
        transport_security=security,
        host=host,
        # A batch as large as the store accepts, with room for JSON's escapes.
        max_request_body_size=2 * server.store.options.limits.max_batch_bytes,
    )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host.strip("[]"), port), family=family)
    bound = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    announce(f"memvault MCP server on http://{shown}:{bound}{PATH} {what}; Ctrl-C to stop")
    await uvicorn.Server(config).serve(sockets=[sock])


__all__ = [
    "HISTORY_URI",
    "INSTRUCTIONS",
    "Server",
    "Tools",
    "build_server",
    "history_uri",
    "serve",
]
