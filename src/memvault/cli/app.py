"""The ``memvault`` command: inspect and repair stores from the shell.

The store comes from ``--url``, else ``$MEMVAULT_URL``, else ``sqlite:///memvault.db``.
User mistakes (bad URL, unknown session, missing snapshot) print one line on
stderr and exit 1; they never print a traceback.
"""

from __future__ import annotations

import builtins
import dataclasses
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

import memvault
from memvault.cli import demo as demo_module
from memvault.cli import transfer
from memvault.cli.options import UrlOption
from memvault.cli.terminal import columns, emit, error, json_line, plural, progress_bar, say, shown
from memvault.errors import ConfigurationError, MemvaultError
from memvault.messages import Message
from memvault.model import COMPACT_BATCH
from memvault.paging import MAX_LIMIT, ORDERS, SessionPage
from memvault.ui import views
from memvault.ui.text import timeline_lines
from memvault.urls import backend_module, redact, resolve

try:  # typer >= 0.29 carries its own copy of click, and raises its exceptions
    from typer._click import exceptions as click_errors
except ImportError:  # older typer runs on click itself
    from click import exceptions as click_errors  # type: ignore[no-redef]

CUT = 200
"""Characters of content ``show`` prints per message without ``--full``."""


class _Group(TyperGroup):
    """The command group: every user mistake is one line on stderr and exit code 1."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except MemvaultError as exc:
            error(f"{type(exc).__name__}: {exc}")
        except KeyboardInterrupt:
            error("interrupted")
        raise typer.Exit(1)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            code = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except click_errors.NoArgsIsHelpError as exc:
            if exc.ctx is not None:
                exc.ctx.get_help()  # typer prints it
            code = 0
        except click_errors.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx else "memvault"
            hint = f"see '{where} --help'"
            if (
                isinstance(exc, click_errors.NoSuchOption)
                and exc.ctx
                and any(p.param_type_name == "argument" for p in exc.ctx.command.params)
            ):
                hint = (
                    f"an id that starts with '-' goes after '--': {where} -- "
                    f"{exc.option_name}; {hint}"
                )
            error(f"{where}: {' '.join(exc.format_message().split())} ({hint})")
            code = 1
        except click_errors.ClickException as exc:
            error(exc.format_message())
            code = 1
        except typer.Abort:
            error("interrupted")
            code = 1
        code = code if isinstance(code, int) else 0
        if standalone_mode:
            sys.exit(code)
        return code


app = typer.Typer(
    cls=_Group,
    help="memvault: durable conversation memory for LLM agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

SessionArg = Annotated[str, typer.Argument(metavar="SESSION", help="The session id.")]
JsonOption = Annotated[bool, typer.Option("--json", help="JSON Lines, one record a line.")]


def _version(value: bool) -> None:
    if value:
        say(f"memvault {memvault.__version__}")
        raise typer.Exit()


_global_url: list[str | None] = [None]


@app.callback()
def root(
    url: UrlOption = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """memvault: durable conversation memory for LLM agents."""
    _global_url[0] = url


def main() -> None:
    """The ``memvault`` command (Ctrl-C before a command runs is one line too)."""
    try:
        app(prog_name="memvault")
    except KeyboardInterrupt:
        error("interrupted")
        sys.exit(1)


def store_url(url: str | None) -> str:
    """The command's --url, else the global --url, else $MEMVAULT_URL, else the default."""
    return resolve(url or _global_url[0])


@contextmanager
def opened(url: str | None, *, read_only: bool = False, **extra: Any) -> Iterator[memvault.Store]:
    """The store; ``read_only`` passes the backend's read-only options (SQLite:
    ``mode=ro``: no file is created or changed, no lock is waited for); ``extra``:
    more options of ``memvault.open``."""
    target = store_url(url)
    options = getattr(backend_module(target), "READ_ONLY", {}) if read_only else {}
    with memvault.open(target, **options, **extra) as store:
        yield store


class NoSuchSession(MemvaultError):
    """The session named on the command line does not exist."""


class NoSuchFile(MemvaultError):
    """The file named on the command line cannot be read."""


class ConfirmationNeeded(MemvaultError):
    """A command that deletes data was not confirmed."""


def existing(store: memvault.Store, session_id: str) -> memvault.Session:
    s = store.session(session_id)
    if s.info() is None:
        raise NoSuchSession(f"no session {session_id!r} in {redact(store.options.url)}")
    return s


def _when(at: datetime | None, *, ms: bool = False) -> str:
    if at is None:
        return "-"
    return at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if ms else at.strftime("%Y-%m-%d %H:%M:%S")


def _record(obj: Any) -> dict[str, Any]:
    """A SessionInfo, Event or Snapshot as JSON values (datetimes in ISO 8601)."""
    return {
        k: v.isoformat() if isinstance(v, datetime) else v
        for k, v in dataclasses.asdict(obj).items()
    }


def render_message(m: Message, *, full: bool) -> str:
    """A message's content (and tool calls) on one line, cut at ``CUT`` characters
    unless ``full`` (which also keeps newlines)."""
    if m.tool_calls:
        calls = ", ".join(f"{c.name}({c.arguments})" for c in m.tool_calls)
        text = f"{m.content} " if m.content else ""
        text = f"{text}→ calls {calls}"
    elif isinstance(m.content, str):
        text = m.content
    else:
        text = json.dumps(m.content, ensure_ascii=False)
    if full:
        return shown(text, newlines=True)
    if len(text) > CUT:
        return f"{shown(text[:CUT])}… (+{len(text) - CUT:,} characters; --full shows all)"
    return shown(text)


def history_lines(messages: list[Message], first: int, *, full: bool) -> Iterator[str]:
    """``#  role  content`` lines; ``first`` is the position of ``messages[0]``."""
    width = max(len(str(first + len(messages) - 1)), 1)
    yield f"{'#':>{width}}  {'role':<9}  content"
    indent = " " * (width + 13)
    for i, m in enumerate(messages, first):
        text = render_message(m, full=full).replace("\n", f"\n{indent}")
        yield f"{i:>{width}}  {m.role:<9}  {text}"


def log_lines(s: memvault.Session) -> Iterator[str]:
    rows = (
        [
            str(e.version),
            _when(e.at, ms=True),
            e.writer,
            e.op,
            ", ".join(f"{k}={v}" for k, v in e.detail.items()),
        ]
        for e in s.log()
    )
    return columns(["version", "at (UTC)", "writer", "op", "detail"], rows)


def snapshot_lines(s: memvault.Session) -> Iterator[str]:
    rows = ([x.name, str(x.version), str(x.length), _when(x.created_at)] for x in s.snapshots())
    return columns(["name", "version", "messages", "created (UTC)"], rows)


@app.command()
def demo(url: UrlOption = None) -> None:
    """Run a scripted two-process agent conversation and print its timeline."""
    url = store_url(url)
    if getattr(backend_module(url), "PROCESS_LOCAL", False):
        raise ConfigurationError(
            f"the demo runs two processes on one store, and {redact(url)} is private to each "
            "process: use a file or a server (e.g. --url sqlite:///demo.db)"
        )
    with opened(url) as store:
        if store.session(demo_module.SESSION).delete():
            say(f"replaced the session {demo_module.SESSION!r} left by an earlier demo")
    say(f"memvault demo on {redact(url)}, session {demo_module.SESSION!r}")
    say("")
    say(
        "1. process agent-1 answers a weather question with a tool call, "
        "then saves snapshot 'after-weather'"
    )
    demo_module.run_in_process(demo_module.agent_one, url)
    say(
        "2. process agent-2 gets a broken tool result (502), rolls back to "
        "'after-weather' and answers again"
    )
    demo_module.run_in_process(demo_module.agent_two, url)
    say("3. this process reads the store as a third process would")
    say("")
    with opened(url) as store:
        s = store.session(demo_module.SESSION)
        say("history: the broken tool result is gone")
        emit(history_lines(s.history(), 1, full=False))
        say("")
        say("snapshots")
        emit(snapshot_lines(s))
        say("")
        say("event log")
        emit(log_lines(s))
        undo = [x.name for x in s.snapshots() if x.auto]
        say("")
        say(
            f"Nothing was deleted: the rolled-back turns are kept in {undo[0]!r}; "
            f"undo with: memvault rollback {demo_module.SESSION} '{undo[0]}'"
        )


@app.command()
def sessions(
    url: UrlOption = None,
    as_json: JsonOption = False,
    limit: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=MAX_LIMIT,
            help="One page of at most N sessions, then the cursor to the "
            "next page (default: every session).",
        ),
    ] = None,
    cursor: Annotated[
        str | None,
        typer.Option(
            help="Continue after the page that printed this cursor (same --order, --desc and "
            "--match)."
        ),
    ] = None,
    order: Annotated[str, typer.Option(help=f"Order by {', '.join(ORDERS)} (then by id).")] = "id",
    desc: Annotated[bool, typer.Option("--desc", help="Descending order.")] = False,
    match: Annotated[
        str | None, typer.Option(help="Only ids containing this text (case-sensitive).")
    ] = None,
) -> None:
    """List the live sessions, all or a page at a time (--limit, --cursor).

    With --json, one session a line; with --limit, a last line {"cursor": ...} holds
    the next page's cursor (null after the last page)."""
    with opened(url, read_only=True) as store:
        pages = _pages(store, limit or _ALL_PAGE, cursor, order, desc, match, limit is None)
        infos = (info for page in pages for info in page.sessions)
        if as_json:
            emit(json_line(_record(i)) for i in infos)
        else:
            emit(
                columns(
                    ["session", "version", "messages", "updated (UTC)", "expires (UTC)"],
                    (
                        [
                            i.session_id,
                            str(i.version),
                            str(i.length),
                            _when(i.updated_at),
                            _when(i.expires_at),
                        ]
                        for i in infos
                    ),
                )
            )
        if limit is not None:
            after = pages[-1].cursor
            emit(
                [
                    json_line({"cursor": after})
                    if as_json
                    else f"next page: --cursor {after}"
                    if after
                    else "(last page)"
                ]
            )


_ALL_PAGE = 1000
"""Sessions per page when the command lists them all."""


def _pages(
    store: memvault.Store,
    limit: int,
    cursor: str | None,
    order: str,
    descending: bool,
    match: str | None,
    every: bool,
) -> list[SessionPage]:
    """The page asked for, or (``every``) every page from ``cursor`` on."""
    pages = [
        store.sessions_page(limit, cursor=cursor, order=order, descending=descending, match=match)
    ]
    while every and pages[-1].cursor:
        pages.append(
            store.sessions_page(
                limit, cursor=pages[-1].cursor, order=order, descending=descending, match=match
            )
        )
    return pages


@app.command()
def show(
    session: SessionArg,
    last: Annotated[int | None, typer.Option(min=0, help="Only the newest N messages.")] = None,
    full: Annotated[
        bool,
        typer.Option("--full", help=f"Show long content whole (default: cut at {CUT} characters)."),
    ] = False,
    as_json: JsonOption = False,
    timeline: Annotated[
        bool,
        typer.Option(
            "--timeline",
            help="The event log in version order, each change's messages under "
            "it, hidden ones marked (the newest page; the inspector's timeline).",
        ),
    ] = False,
    before: Annotated[
        int | None,
        typer.Option(min=1, help="With --timeline: the page of events before this version."),
    ] = None,
    everything: Annotated[
        bool,
        typer.Option(
            "--all",
            help="The full view: summarized messages too, each summary after the "
            "message it was taken through.",
        ),
    ] = False,
    url: UrlOption = None,
) -> None:
    """Print a session's history, oldest first, with each message's position.

    The history is the context view: a summary (``summarize``) stands first for the
    messages it summarizes, and a note says so; ``--all`` shows them."""
    if timeline and (as_json or last is not None):
        raise typer.BadParameter("--timeline does not combine with --json or --last")
    with opened(url, read_only=True) as store:
        if timeline:  # the inspector's timeline page (memvault.ui.text)
            page = views.timeline(store, existing(store, session).id, before)
            emit(
                timeline_lines(
                    session, page, lambda m: render_message(m, full=full), color=sys.stdout.isatty()
                )
                if page
                else []
            )
            return
        s = store.session(session)
        if everything:
            whole = s.history(full=True)
            messages = whole[len(whole) - min(len(whole), last) :] if last is not None else whole
            length = len(whole)
        else:
            messages = s.history(last=last)
        info = s.info()
        if info is None:
            existing(store, session)
        elif not everything:
            length = info.length
        first = length - len(messages) + 1
        if as_json:
            emit(
                json_line({"position": i, "message": m.model_dump(mode="json")})
                for i, m in enumerate(messages, first)
            )
        else:
            emit(history_lines(messages, first, full=full))
            if not everything and info and info.summarized and first == 1 and messages:
                emit(
                    [
                        f"(#1 is a summary standing for {info.summarized} earlier messages; "
                        "--all shows them)"
                    ]
                )


@app.command()
def search(
    session: SessionArg,
    query: Annotated[str, typer.Argument(help="The words to look for.")],
    k: Annotated[int, typer.Option("--k", min=0, help="At most this many hits.")] = 10,
    embedder: Annotated[
        str | None,
        typer.Option(
            help="Hybrid search with this embedder: wordllama (built in) or module:attr "
            "(the one the store's vectors were made by)."
        ),
    ] = None,
    hidden: Annotated[
        bool,
        typer.Option("--hidden", help="Also find hidden messages (popped, trimmed, rolled back)."),
    ] = False,
    as_json: JsonOption = False,
    url: UrlOption = None,
) -> None:
    """Search a session's full view (summaries too): best first, by relevance to its words,
    fused with the embedder's ranking if one is given."""
    from memvault.cli.reindex import load_embedder

    extra = {} if embedder is None else {"embedder": load_embedder(embedder)}
    with opened(url, read_only=True, **extra) as store:
        hits = existing(store, session).search(query, k=k, include_hidden=hidden)
        if as_json:
            emit(
                json_line(
                    {
                        "position": h.position,
                        "score": round(h.score, 4),
                        "hidden": h.hidden,
                        "message": h.message.model_dump(mode="json"),
                    }
                )
                for h in hits
            )
        else:
            shape = ".2f" if embedder is None else ".4f"  # fused scores are about 1/60
            emit(
                columns(
                    ["#", "score", "role", "content"],
                    (
                        [
                            "hidden" if h.position is None else str(h.position),
                            format(h.score, shape),
                            h.message.role,
                            render_message(h.message, full=False),
                        ]
                        for h in hits
                    ),
                )
            )


@app.command()
def log(session: SessionArg, as_json: JsonOption = False, url: UrlOption = None) -> None:
    """Print a session's operation log: who changed what, and when."""
    with opened(url, read_only=True) as store:
        s = existing(store, session)
        emit(json_line(_record(e)) for e in s.log()) if as_json else emit(log_lines(s))


@app.command()
def snapshots(session: SessionArg, as_json: JsonOption = False, url: UrlOption = None) -> None:
    """List a session's snapshots."""
    with opened(url, read_only=True) as store:
        s = existing(store, session)
        emit(json_line(_record(x)) for x in s.snapshots()) if as_json else emit(snapshot_lines(s))


@app.command()
def rollback(
    session: SessionArg,
    name: Annotated[str, typer.Argument(metavar="NAME", help="The snapshot to restore.")],
    url: UrlOption = None,
) -> None:
    """Restore snapshot NAME; the replaced state is saved as an auto snapshot."""
    with opened(url) as store:
        saved = existing(store, session).rollback(name)
        say(f"rolled back {session!r} to {name!r}; the replaced state is saved as {saved.name!r}")


@app.command()
def compact(
    keep_events: Annotated[int | None, typer.Option(min=0, help="Events kept per session.")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    batch: Annotated[
        int, typer.Option(min=1, help="Sessions per step (one short transaction each).")
    ] = COMPACT_BATCH,
    as_json: JsonOption = False,
    url: UrlOption = None,
) -> None:
    """Delete expired sessions, messages nothing reaches and unused vectors, for good.

    Asks first on a terminal; elsewhere (scripts, cron) it needs --yes. It works in
    short steps that never hold writers up for long, with a progress bar on a
    terminal; stopped at any point, it leaves every session whole, and running it
    again finishes the job.
    """
    target = store_url(url)
    if not yes:
        if not sys.stdin.isatty():
            raise ConfirmationNeeded("compact deletes data for good: pass --yes to confirm")
        if not typer.confirm(
            f"Delete expired sessions and unreachable messages in {shown(redact(target))} for good?"
        ):
            raise ConfirmationNeeded("nothing deleted")
    with opened(target) as store, progress_bar("compacting", enabled=not as_json) as update:
        stats = store.compact(
            keep_events=keep_events, batch=batch, progress=lambda p: update(p.done, p.total)
        )
    if as_json:
        emit([json_line(dataclasses.asdict(stats))])
    else:
        vectors = f", {plural(stats.vectors, 'search vector')}" if stats.vectors else ""
        say(
            f"removed {plural(stats.nodes, 'message')}, {plural(stats.events, 'event')}, "
            f"{plural(stats.sessions, 'expired session')}{vectors}"
        )


@app.command()
def reindex(
    embedder: Annotated[
        str, typer.Option(help="wordllama (built in), or module:attr naming an embedder.")
    ] = "wordllama",
    replace: Annotated[
        bool,
        typer.Option(
            "--replace", help="Delete every stored vector first, and record this embedder."
        ),
    ] = False,
    batch: Annotated[int, typer.Option(min=1, help="Texts embedded per batch.")] = 256,
    url: UrlOption = None,
) -> None:
    """Store the search vectors the store is missing (resumable: run it again)."""
    from memvault.cli import reindex as recall

    chosen = recall.load_embedder(embedder)
    with (
        recall.open_for_reindex(store_url(url), chosen, replace=replace) as store,
        progress_bar("reindexing sessions") as update,
    ):
        stats = recall.reindex(store, batch=batch, progress=update)
    say(
        f"reindexed {plural(stats.sessions, 'session')}: {plural(stats.embedded, 'text')} "
        f"embedded, {stats.texts - stats.embedded} already stored"
    )


@app.command()
def migrate(
    url: UrlOption = None,
    schema: Annotated[
        str | None,
        typer.Option("--schema", help="PostgreSQL schema (default: the URL's, else 'memvault')."),
    ] = None,
) -> None:
    """Create or upgrade a store's schema (PostgreSQL: apply missing migrations).

    Safe to repeat and to run from several processes at once. Other backends bring
    their schema up to date whenever a store is opened, so for them this opens and
    closes the store.
    """
    target = store_url(url)
    module = backend_module(target)
    if hasattr(module, "migrate"):
        result = module.migrate(target, schema=schema)
        if result.before == result.after:
            say(
                f"{redact(target)}: schema {result.schema!r} is up to date (version {result.after})"
            )
        else:
            say(
                f"{redact(target)}: schema {result.schema!r} migrated from version "
                f"{result.before} to {result.after}"
            )
        return
    if schema is not None:
        raise ConfigurationError(f"--schema applies to PostgreSQL only, not {redact(target)!r}")
    memvault.open(target).close()
    say(f"{redact(target)}: schema is up to date (applied when a store is opened)")


@app.command("export")
def export_(
    session: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[SESSION]...", help="Sessions to export (default: every live session)."
        ),
    ] = None,
    url: UrlOption = None,
) -> None:
    """Write sessions as JSONL to stdout: messages, user snapshots, visible history."""
    with opened(url, read_only=True) as store:
        for sid in session or []:
            existing(store, sid)
        for line in transfer.export_sessions(store, session or None):
            sys.stdout.write(line + "\n")


@app.command("import")
def import_(
    file: Annotated[str, typer.Argument(metavar="FILE", help="A JSONL export; '-' reads stdin.")],
    url: UrlOption = None,
) -> None:
    """Load an export into the store, all or nothing: nothing is written if the file is
    damaged or any session exists already, and a failed import leaves nothing behind."""
    try:
        with sys.stdin.buffer if file == "-" else builtins.open(file, "rb") as raw:
            with opened(url) as store:  # decoded line by line: errors name their line
                imported = transfer.import_sessions(store, (b.decode("utf-8") for b in raw))
    except OSError as exc:
        raise NoSuchFile(f"cannot read {file!r}: {exc.strerror}") from exc
    say(f"imported {plural(len(imported), 'session')}: {', '.join(map(repr, imported))}")


from memvault import torture  # noqa: E402 - registers its command on the app above

torture.register(app)

from memvault.ui import command as ui_command  # noqa: E402 - registers `memvault ui`

ui_command.register(app)

from memvault.integrations import mcp_command  # noqa: E402 - registers `memvault mcp`

mcp_command.register(app)
