"""The ``memvault`` command: inspect and repair stores from the shell.

The store comes from ``--url``, else ``$MEMVAULT_URL``, else ``sqlite:///memvault.db``.
User mistakes (bad URL, unknown session, missing snapshot) print one line on
stderr and exit 1; they never print a traceback.
"""

from __future__ import annotations

import builtins
import functools
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

import memvault
from memvault import demo as demo_module
from memvault import transfer
from memvault.errors import ConfigurationError, MemvaultError
from memvault.messages import Message
from memvault.urls import backend_module, redact, resolve

app = typer.Typer(
    help="memvault: durable conversation memory for LLM agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

UrlOption = Annotated[
    str | None,
    typer.Option("--url", help="Store URL (default: $MEMVAULT_URL, else sqlite:///memvault.db)."),
]
F = TypeVar("F", bound=Callable[..., Any])


def user_errors(fn: F) -> F:
    """Turn memvault errors into one line on stderr and exit code 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except MemvaultError as exc:
            err.print(f"[red]error:[/red] {type(exc).__name__}: {exc}", markup=True)
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


_global_url: list[str | None] = [None]


@app.callback()
def main(url: UrlOption = None) -> None:
    """memvault: durable conversation memory for LLM agents."""
    _global_url[0] = url


def store_url(url: str | None) -> str:
    """The command's --url, else the global --url, else $MEMVAULT_URL, else the default."""
    return resolve(url or _global_url[0])


@contextmanager
def opened(url: str | None) -> Iterator[memvault.Store]:
    with memvault.open(store_url(url)) as store:
        yield store


class NoSuchSession(MemvaultError):
    """The session named on the command line does not exist."""


class NoSuchFile(MemvaultError):
    """The file named on the command line cannot be read."""


def existing(store: memvault.Store, session_id: str) -> memvault.Session:
    s = store.session(session_id)
    if s.info() is None:
        raise NoSuchSession(f"no session {session_id!r} in {redact(store.options.url)}")
    return s


def render_message(m: Message) -> str:
    if m.tool_calls:
        calls = ", ".join(f"{c.name}({c.arguments})" for c in m.tool_calls)
        text = f"{m.content} " if m.content else ""
        return f"{text}→ calls {calls}"
    if isinstance(m.content, str):
        return m.content
    return json.dumps(m.content, ensure_ascii=False)


def print_history(messages: list[Message], title: str) -> None:
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("#", justify="right", style="dim")
    table.add_column("role", style="bold")
    table.add_column("content", overflow="fold")
    for i, m in enumerate(messages, 1):
        table.add_row(str(i), m.role, render_message(m))
    out.print(table)


def print_log(s: memvault.Session) -> None:
    table = Table(title=f"event log of {s.id!r}", title_justify="left")
    for column in ("version", "at (UTC)", "writer", "op", "detail"):
        table.add_column(column)
    for e in s.log():
        detail = ", ".join(f"{k}={v}" for k, v in e.detail.items())
        table.add_row(str(e.version), e.at.strftime("%H:%M:%S.%f")[:-3], e.writer, e.op, detail)
    out.print(table)


def print_snapshots(s: memvault.Session) -> None:
    table = Table(title=f"snapshots of {s.id!r}", title_justify="left")
    for column in ("name", "version", "messages", "created (UTC)"):
        table.add_column(column)
    for snap in s.snapshots():
        table.add_row(snap.name, str(snap.version), str(snap.length),
                      snap.created_at.strftime("%Y-%m-%d %H:%M:%S"))
    out.print(table)


@app.command()
@user_errors
def demo(url: UrlOption = None) -> None:
    """Run a scripted two-process agent conversation and print its timeline."""
    url = store_url(url)
    with opened(url) as store:
        store.session(demo_module.SESSION).delete()
    out.print(f"[bold]memvault demo[/bold] on {redact(url)}, session {demo_module.SESSION!r}\n")
    out.print("1. process agent-1 answers a weather question with a tool call, "
              "then saves snapshot 'after-weather'")
    demo_module.run_in_process(demo_module.agent_one, url)
    out.print("2. process agent-2 gets a broken tool result (502), rolls back to "
              "'after-weather' and answers again")
    demo_module.run_in_process(demo_module.agent_two, url)
    out.print("3. this process reads the store as a third process would\n")
    with opened(url) as store:
        s = store.session(demo_module.SESSION)
        print_history(s.history(), "history: the broken tool result is gone")
        print_snapshots(s)
        print_log(s)
        undo = [x.name for x in s.snapshots() if x.auto]
        out.print(f"\nNothing was deleted: the rolled-back turns are kept in {undo[0]!r}; "
                  f"undo with: memvault rollback {demo_module.SESSION} '{undo[0]}'")


@app.command()
@user_errors
def sessions(url: UrlOption = None) -> None:
    """List the live sessions."""
    with opened(url) as store:
        table = Table()
        for column in ("session", "version", "messages", "updated (UTC)", "expires (UTC)"):
            table.add_column(column)
        for sid in store.sessions():
            info = store.session(sid).info()
            if info is not None:
                expires = info.expires_at.strftime("%Y-%m-%d %H:%M:%S") if info.expires_at else "-"
                table.add_row(sid, str(info.version), str(info.length),
                              info.updated_at.strftime("%Y-%m-%d %H:%M:%S"), expires)
        out.print(table)


@app.command()
@user_errors
def show(
    session: str,
    last: Annotated[int | None, typer.Option(min=0, help="Only the newest N messages.")] = None,
    url: UrlOption = None,
) -> None:
    """Print a session's history, oldest first."""
    with opened(url) as store:
        s = existing(store, session)
        print_history(s.history(last=last), f"history of {session!r}")


@app.command()
@user_errors
def log(session: str, url: UrlOption = None) -> None:
    """Print a session's operation log: who changed what, and when."""
    with opened(url) as store:
        print_log(existing(store, session))


@app.command()
@user_errors
def snapshots(session: str, url: UrlOption = None) -> None:
    """List a session's snapshots."""
    with opened(url) as store:
        print_snapshots(existing(store, session))


@app.command()
@user_errors
def rollback(session: str, name: str, url: UrlOption = None) -> None:
    """Restore snapshot NAME; the replaced state is saved as an auto snapshot."""
    with opened(url) as store:
        saved = existing(store, session).rollback(name)
        out.print(f"rolled back {session!r} to {name!r}; the replaced state is saved as "
                  f"{saved.name!r}")


@app.command()
@user_errors
def compact(
    keep_events: Annotated[int | None, typer.Option(min=0, help="Events kept per session.")] = None,
    url: UrlOption = None,
) -> None:
    """Delete expired sessions and messages nothing reaches any more."""
    with opened(url) as store:
        stats = store.compact(keep_events=keep_events)
        out.print(f"removed {stats.nodes} messages, {stats.events} events, "
                  f"{stats.sessions} expired sessions")


@app.command()
@user_errors
def migrate(
    url: UrlOption = None,
    schema: Annotated[str | None, typer.Option(
        "--schema", help="PostgreSQL schema (default: the URL's, else 'memvault').")] = None,
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
            out.print(f"{redact(target)}: schema {result.schema!r} is up to date "
                      f"(version {result.after})")
        else:
            out.print(f"{redact(target)}: schema {result.schema!r} migrated from version "
                      f"{result.before} to {result.after}")
        return
    if schema is not None:
        raise ConfigurationError(f"--schema applies to PostgreSQL only, not {redact(target)!r}")
    memvault.open(target).close()
    out.print(f"{redact(target)}: schema is up to date (applied when a store is opened)")



@app.command("export")
@user_errors
def export_(
    session: Annotated[list[str] | None, typer.Argument(
        help="Sessions to export (default: every live session).")] = None,
    url: UrlOption = None,
) -> None:
    """Write sessions as JSONL to stdout: messages, user snapshots, visible history."""
    with opened(url) as store:
        for sid in session or []:
            existing(store, sid)
        for line in transfer.export_sessions(store, session or None):
            sys.stdout.write(line + "\n")


@app.command("import")
@user_errors
def import_(
    file: Annotated[str, typer.Argument(help="A JSONL export; '-' reads stdin.")],
    url: UrlOption = None,
) -> None:
    """Load an export into the store; nothing is written if any session exists already."""
    try:
        with sys.stdin if file == "-" else builtins.open(file, encoding="utf-8") as lines:
            with opened(url) as store:
                imported = transfer.import_sessions(store, lines)
    except OSError as exc:
        raise NoSuchFile(f"cannot read {file!r}: {exc.strerror}") from exc
    out.print(f"imported {len(imported)} sessions: {', '.join(map(repr, imported))}")


from memvault import torture  # noqa: E402 - registers its command on the app above

torture.register(app)
