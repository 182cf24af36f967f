"""The memvault command, run as users run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import memvault
from memvault import Message


def run(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memvault", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        timeout=120,
    )


def test_demo_on_the_default_file_runs_across_processes(tmp_path: Path) -> None:
    """`memvault demo` with no options uses ./memvault.db; twice in a row works."""
    for _ in range(2):
        done = run("demo", cwd=tmp_path, env={"MEMVAULT_URL": ""})
        assert done.returncode == 0, done.stderr
    assert (tmp_path / "memvault.db").exists()
    assert "It is 24 °C and cloudy in Tokyo." in done.stdout
    assert "502 Bad Gateway" not in done.stdout.split("snapshots of")[0]
    lines = done.stdout.splitlines()  # section breaks are blank lines, not escaped "\\n"
    assert "\\n" not in done.stdout and {"snapshots", "event log"} <= set(lines)
    with memvault.open(f"sqlite:///{tmp_path}/memvault.db") as store:
        s = store.session("memvault-demo")
        writers = {e.writer.split(" ")[0] for e in s.log()}
        assert writers == {"agent-1", "agent-2"}
        assert [x.name for x in s.snapshots()] == ["after-weather", "auto:pre-rollback@v3"]
        assert len(s.history()) == 9


def test_inspection_commands(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/x.db"
    with memvault.open(url) as store:
        s = store.session("user 42")
        s.append([Message.user("hello"), Message.assistant("hi there")])
        s.snapshot("cp")
        s.append([Message.user("oops")])
    listed = run("--url", url, "sessions", cwd=tmp_path)
    assert listed.returncode == 0 and "user 42" in listed.stdout
    shown = run("show", "user 42", "--last", "1", "--url", url, cwd=tmp_path)
    assert "oops" in shown.stdout and "hello" not in shown.stdout
    assert "snapshot" in run("log", "user 42", "--url", url, cwd=tmp_path).stdout
    assert "cp" in run("snapshots", "user 42", "--url", url, cwd=tmp_path).stdout
    rolled = run("rollback", "user 42", "cp", "--url", url, cwd=tmp_path)
    assert rolled.returncode == 0 and "auto:pre-rollback@v2" in rolled.stdout
    with memvault.open(url) as store:
        assert [m.content for m in store.session("user 42").history()] == ["hello", "hi there"]


def test_user_mistakes_print_one_line_and_exit_1(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/x.db"
    cases = [
        ("show", "nobody", "--url", url),
        ("--url", "nosuch://x", "sessions"),
        ("--url", "sqlite:////nonexistent/dir/x.db", "sessions"),
        ("rollback", "nobody", "cp", "--url", url),
    ]
    for args in cases:
        done = run(*args, cwd=tmp_path)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
        assert "Traceback" not in done.stderr


def test_passwords_never_printed(tmp_path: Path) -> None:
    done = run("--url", "nosuch://user:s3cret@host/db", "sessions", cwd=tmp_path)
    assert done.returncode == 1 and "s3cret" not in done.stderr + done.stdout


def test_export_then_import_round_trips(tmp_path: Path) -> None:
    """`memvault export` writes JSONL; `memvault import` loads it into another store,
    history and user snapshots identical; importing twice is refused, nothing written."""
    src, dst = f"sqlite:///{tmp_path}/a.db", f"sqlite:///{tmp_path}/b.db"
    with memvault.open(src) as store:
        s = store.session("conv é")
        s.append([Message.user("hello \x00 👋"), Message.assistant("hi")])
        s.snapshot("cp")
        s.append([Message.user("more")])
        store.session("other").append([Message.user("x")])
    exported = run("export", "--url", src, cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    (tmp_path / "dump.jsonl").write_text(exported.stdout, encoding="utf-8")
    one = run("export", "conv é", "--url", src, cwd=tmp_path)
    assert one.stdout.count('"type":"session"') == 1
    done = run("import", "dump.jsonl", "--url", dst, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with memvault.open(src) as a, memvault.open(dst) as b:
        assert b.sessions() == ["conv é", "other"]
        assert b.session("conv é").history() == a.session("conv é").history()
        b.session("conv é").rollback("cp")
        assert [m.content for m in b.session("conv é").history()] == ["hello \x00 👋", "hi"]
    again = run("import", "dump.jsonl", "--url", dst, cwd=tmp_path)
    assert again.returncode == 1 and again.stderr.startswith("error: ConflictError")
    missing = run("import", "nope.jsonl", "--url", dst, cwd=tmp_path)
    assert missing.returncode == 1 and "cannot read 'nope.jsonl'" in missing.stderr
    unknown = run("export", "nobody", "--url", src, cwd=tmp_path)
    assert unknown.returncode == 1 and unknown.stdout == ""
