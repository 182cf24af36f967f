"""The ``memvault torture`` command: progress while it runs, then the tables."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from memvault.checks.opener import Opener
from memvault.cli.options import UrlOption, command_url
from memvault.cli.terminal import error, say
from memvault.errors import ConfigurationError, MemvaultError
from memvault.torture.audit import audit_history
from memvault.torture.report import TortureReport
from memvault.torture.runner import Status, TortureSettings, cleanup, prepare, run_torture
from memvault.torture.servers import PrivateServer, start_server
from memvault.urls import redact

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def _options(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs; a value is JSON when it parses (30, true), else text."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigurationError(f"--option takes KEY=VALUE, not {pair!r}")
        try:
            options[key] = json.loads(value)
        except ValueError:
            options[key] = value
    return options


def _factory(spec: str) -> Any:
    module, _, name = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigurationError(f"--factory {spec!r}: {exc} (expected module:callable)") from exc


def print_report(report: TortureReport) -> None:
    """The operations table and the accounting table."""
    ops = Table(title="operations", title_justify="left")
    for column in ("operation", "calls", "ok", "failed", "unknown", "p50 ms", "p99 ms"):
        ops.add_column(column, justify="left" if column == "operation" else "right")
    for kind, s in report.operations.items():
        ops.add_row(
            kind,
            str(s.calls),
            str(s.ok),
            str(s.failed),
            str(s.unknown),
            "-" if s.p50_ms is None else f"{s.p50_ms:.2f}",
            "-" if s.p99_ms is None else f"{s.p99_ms:.2f}",
        )
    out.print(ops)
    acc = Table(title="accounting", title_justify="left")
    for column in ("", "count", "e.g."):
        acc.add_column(column, overflow="fold")
    acc.add_row("operations", str(report.operations_total), "")
    acc.add_row(
        "kills", str(report.kills), f"+{report.late_kills} at the end" if report.late_kills else ""
    )
    acc.add_row("faults injected", str(report.faults), "")
    if report.run.get("server"):
        acc.add_row("server kills", str(report.server_kills), report.run["server"])
        acc.add_row("proxy outages", str(report.outages), "")
        acc.add_row(
            "connections cut",
            str(sum(report.cuts.values())),
            ", ".join(f"{k} {v}" for k, v in sorted(report.cuts.items())),
        )
    if report.exits:
        acc.add_row("workers died on their own", str(report.exits), "see the history file")
    for name, finding in report.findings.items():
        mark = "[green]0[/green]" if not finding.count else f"[red]{finding.count}[/red]"
        acc.add_row(name.replace("_", " "), mark, "; ".join(finding.samples[:2]))
    for name, finding in report.notes.items():
        acc.add_row(f"({name})", str(finding.count), "; ".join(finding.samples[:1]))
    out.print(acc)
    say(
        "(recovered): appends whose outcome was unknown (a fault or a kill) and that landed;"
        " (unread): messages hidden by a pop whose outcome was unknown, so their content was"
        " never read back. Both are allowed."
    )


def _run(opener: Opener, settings: TortureSettings, server: PrivateServer | None) -> TortureReport:
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[stats]}"),
    )
    with Progress(*columns, console=err, transient=False) as bar:
        task = bar.add_task("running", total=settings.seconds, stats="")

        def show(status: Status) -> None:
            bar.update(
                task,
                completed=min(status.elapsed, settings.seconds),
                description=status.phase,
                stats=f"{status.calls} calls, {status.kills} kills, "
                f"{status.faults} faults, {status.server_faults} server faults",
            )

        path = run_torture(opener, settings, show, server)
        bar.update(task, description="auditing")
        report = audit_history(path)
        bar.update(task, description="done")
    return report


def torture(
    ctx: typer.Context,
    url: UrlOption = None,
    writers: Annotated[int, typer.Option(min=1, help="Writer processes.")] = 4,
    readers: Annotated[int, typer.Option(min=0, help="Reader processes.")] = 2,
    seconds: Annotated[float, typer.Option(min=0.1, help="How long to run.")] = 30.0,
    kill_rate: Annotated[
        float, typer.Option(min=0, help="SIGKILLs per second, on average (0: none).")
    ] = 1.0,
    sessions: Annotated[int, typer.Option(min=1, help="Shared sessions.")] = 3,
    fault_rate: Annotated[
        float, typer.Option(min=0, max=1, help="Share of calls given an injected fault.")
    ] = 0.02,
    seed: Annotated[int | None, typer.Option(help="Seed, to replay a run's choices.")] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Write the report as JSON to this file.")
    ] = None,
    history: Annotated[
        Path | None,
        typer.Option(help="Folder for the history file (default: a new temporary folder)."),
    ] = None,
    option: Annotated[
        list[str] | None,
        typer.Option(
            "--option", "-o", help="Backend option KEY=VALUE, repeatable (durability=normal)."
        ),
    ] = None,
    factory: Annotated[
        str | None,
        typer.Option(
            help="module:callable returning a backend (a third party's); --url is a label."
        ),
    ] = None,
    face: Annotated[str, typer.Option(help="API face the workers use: sync or async.")] = "sync",
    keep: Annotated[
        bool,
        typer.Option(help="Keep the run's sessions in the store (always kept after a violation)."),
    ] = False,
    server: Annotated[
        str | None,
        typer.Option(
            help="Start a private server and torture it instead of --url: redis (AOF, "
            "appendfsync always), postgres (initdb) or redis-cluster (3 primaries). "
            "Removed at the end."
        ),
    ] = None,
    server_faults: Annotated[
        str | None,
        typer.Option(
            help="With --server: kill (SIGKILL and restart it), proxy (workers go through a "
            "proxy that cuts connections), comma-separated, or none.  [default: kill]"
        ),
    ] = None,
    server_fault_rate: Annotated[
        float, typer.Option(min=0, help="Server kills or proxy outages per second, on average.")
    ] = 0.2,
    cut_rate: Annotated[
        float,
        typer.Option(min=0, max=1, help="With proxy faults: share of requests and replies cut."),
    ] = 0.002,
) -> None:
    """Hammer a store with killed and restarted worker processes (and, with --server,
    a crashed server and cut connections), then prove that every acknowledged change
    is accounted for. Exit code 1 on any violation."""
    private: PrivateServer | None = None
    try:
        if face not in ("sync", "async"):
            raise ConfigurationError(f"--face is sync or async, not {face!r}")
        if server_faults is not None and not server:
            raise ConfigurationError(
                "--server-faults needs --server (a server the torture "
                "starts itself, so it can crash it)"
            )
        faults = tuple(f for f in (server_faults or "kill").split(",") if f and f != "none")
        settings = TortureSettings(
            writers,
            readers,
            seconds,
            kill_rate,
            sessions,
            fault_rate,
            seed,
            None if history is None else str(history),
            server_faults=faults if server else (),
            server_fault_rate=server_fault_rate,
            cut_rate=cut_rate,
        )
        settings.check()
        if server and (url or factory):
            raise ConfigurationError("--server starts its own store: no --url or --factory")
        if server:
            say(f"torture: starting a private {server} server")
            private = start_server(server)
        # The command's --url, else the app's global --url (its root context's
        # parameter), else $MEMVAULT_URL, else the default.
        target = private.url if private else url if factory else command_url(ctx, url)
        opener = Opener(
            target or "factory",
            face,  # type: ignore[arg-type]
            _options(option or []),
            _factory(factory) if factory else None,
        )
        prepare(opener, settings)
        say(
            f"torture: {redact(opener.url)} for {seconds:g} s, {writers} writers, "
            f"{readers} readers, {sessions} sessions, ~{kill_rate:g} kills/s, "
            f"fault rate {fault_rate:g}"
            + (
                f", server faults {','.join(faults) or 'none'} ~{server_fault_rate:g}/s"
                if private
                else ""
            )
        )
        report = _run(opener, settings, private)
        if report.ok and not keep and not private:
            cleanup(opener, report.run["sessions"])
    except MemvaultError as exc:
        error(f"{type(exc).__name__}: {exc}")
        raise typer.Exit(1) from None
    finally:
        if private is not None:
            private.close()
    print_report(report)
    if json_path is not None:
        json_path.write_text(
            json.dumps(report.to_dict(), ensure_ascii=False, indent=2), encoding="utf-8"
        )
    verdict = (
        "[green]OK[/green]: every acknowledged change is accounted for"
        if report.ok
        else f"[red]FAILED[/red]: {sum(f.count for f in report.violations().values())} violations"
    )
    out.print(f"{verdict} (seed {report.run.get('seed')}; history: {report.history_file})")
    if not report.ok:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the ``torture`` command to the ``memvault`` app."""
    app.command("torture")(torture)
