"""What the memvault command prints: stored data exactly (never as markup, control
characters escaped), big sessions streamed, JSON Lines for scripts, and one line on
stderr with exit code 1 for every user mistake."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

import memvault
from memvault import Message
from memvault.cli.app import app
from tests.support.backends import BACKENDS

SHARED = ["postgres", "redis", "sqlite"]  # the backends two processes can share


def cli(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(app, list(args), input=stdin)


@pytest.fixture(params=SHARED)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return BACKENDS[request.param](request, tmp_path)


def assert_one_line_error(result: Result, *words: str) -> None:
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr and "╭" not in result.stderr
    for word in words:
        assert word in result.stderr, (word, result.stderr)


def assert_no_raw_controls(text: str) -> None:
    for c in ("\x1b", "\x00", "\x07", "\x9b", "\r"):
        assert c not in text, (c, text[:400])


HOSTILE_ID = "[/x] \x1b]0;pwned\x07 \x1b[2J nul\x00 two\nlines"


def test_stored_text_is_printed_literally(url: str) -> None:
    """Markup-like text is shown as is; control characters come out escaped."""
    with memvault.open(url) as store:
        s = store.session(HOSTILE_ID)
        s.append(
            [
                Message.user("Use arr[i] and [bold]x[/bold]"),
                Message.assistant("[/x]"),
                Message.user("bell\x07 clear\x1b[2J csi\x9b end"),
            ]
        )
        s.snapshot("[v1]")
        store.session("plain").append([Message.user("hi")])
    listed = cli("--url", url, "sessions")
    assert listed.exit_code == 0, listed.output
    assert_no_raw_controls(listed.stdout)
    lines = listed.stdout.splitlines()
    assert len(lines) == 3, lines  # header + one line per session, however hostile the id
    assert "[/x] \\x1b]0;pwned\\x07 \\x1b[2J nul\\x00 two\\nlines" in listed.stdout
    assert any(line.startswith("plain") for line in lines)
    for command in ("show", "log", "snapshots"):
        done = cli("--url", url, command, HOSTILE_ID)
        assert done.exit_code == 0, (command, done.output)
        assert_no_raw_controls(done.stdout)
    shown = cli("--url", url, "show", HOSTILE_ID).stdout
    assert "Use arr[i] and [bold]x[/bold]" in shown and "[/x]" in shown
    assert "bell\\x07 clear\\x1b[2J csi\\x9b end" in shown
    assert "[v1]" in cli("--url", url, "snapshots", HOSTILE_ID).stdout


def test_errors_print_urls_and_ids_literally(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/[draft]notes.db"
    memvault.open(url).close()
    assert_one_line_error(
        cli("--url", url, "show", "[/x]\x1b[2J"), "[draft]notes.db", "'[/x]\\x1b[2J'"
    )


def test_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "memvault.backends.redis.backend", raising=False)
    monkeypatch.setitem(sys.modules, "redis", None)
    assert_one_line_error(
        cli("--url", "redis://127.0.0.1:6379/10", "sessions"), "pip install 'memvault[redis]'"
    )


def test_json_lines_on_every_read_command(url: str) -> None:
    with memvault.open(url) as store:
        s = store.session("a")
        s.append([Message.user("one"), Message.assistant("two")])
        s.snapshot("cp")
    sessions = [json.loads(x) for x in cli("--url", url, "sessions", "--json").stdout.splitlines()]
    assert [(x["session_id"], x["version"], x["length"]) for x in sessions] == [("a", 1, 2)]
    shown = [json.loads(x) for x in cli("--url", url, "show", "a", "--json").stdout.splitlines()]
    assert [x["position"] for x in shown] == [1, 2]
    assert [Message.model_validate(x["message"]).content for x in shown] == ["one", "two"]
    log = [json.loads(x) for x in cli("--url", url, "log", "a", "--json").stdout.splitlines()]
    assert [e["op"] for e in log] == ["append", "snapshot"] and "T" in log[0]["at"]
    snaps = [
        json.loads(x) for x in cli("--url", url, "snapshots", "a", "--json").stdout.splitlines()
    ]
    assert [(x["name"], x["length"], x["auto"]) for x in snaps] == [("cp", 2, False)]


def test_last_shows_real_positions_and_log_shows_dates(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/x.db"
    with memvault.open(url) as store:
        store.session("s").append([Message.user(f"m{i}") for i in range(1, 6)])
        day = store.session("s").log()[0].at.strftime("%Y-%m-%d")
    rows = cli("--url", url, "show", "s", "--last", "2").stdout.splitlines()[1:]
    assert [r.split()[0] for r in rows] == ["4", "5"] and rows[0].split()[-1] == "m4"
    assert day in cli("--url", url, "log", "s").stdout


def test_show_marks_the_summary_and_all_shows_the_originals(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/x.db"
    with memvault.open(url) as store:
        s = store.session("s")
        msgs = [Message.user(f"m{i}") for i in range(1, 5)]
        s.append(msgs)
        s.summarize(Message.system("S"), through=msgs[2].id)
    out = cli("--url", url, "show", "s").stdout.splitlines()
    assert [r.split()[-1] for r in out[1:3]] == ["S", "m4"]
    assert "summary" in out[3] and "3" in out[3] and "--all" in out[3]
    rows = cli("--url", url, "show", "s", "--all").stdout.splitlines()[1:]
    assert [r.split()[-1] for r in rows] == ["m1", "m2", "m3", "S", "m4"]
    rows = cli("--url", url, "show", "s", "--all", "--last", "2").stdout.splitlines()[1:]
    assert [r.split()[0] for r in rows] == ["4", "5"]


def test_search_prints_ranked_hits_with_positions(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/x.db"
    with memvault.open(url) as store:
        store.session("s").append(
            [Message.user("red apple"), Message.user("green pear"), Message.user("apple apple pie")]
        )
    rows = cli("--url", url, "search", "s", "apple").stdout.splitlines()[1:]
    assert [r.split()[0] for r in rows] == ["3", "1"]
    lines = cli("--url", url, "search", "s", "pear", "--json").stdout.splitlines()
    assert [json.loads(x)["position"] for x in lines] == [2]
    bad = cli("--url", url, "search", "s", "?!")
    assert bad.exit_code == 1 and "no word" in bad.stderr


def test_search_hidden_shows_popped_messages_marked(tmp_path: Path) -> None:
    """--hidden also lists what pop hid, marked hidden in place of a position."""
    url = f"sqlite:///{tmp_path}/x.db"
    with memvault.open(url) as store:
        s = store.session("s")
        s.append([Message.user("red apple"), Message.user("apple popped")])
        s.pop()
    rows = cli("--url", url, "search", "s", "apple").stdout.splitlines()[1:]
    assert [r.split()[0] for r in rows] == ["1"]
    rows = cli("--url", url, "search", "s", "apple", "--hidden").stdout.splitlines()[1:]
    assert sorted(r.split()[0] for r in rows) == ["1", "hidden"]
    lines = cli("--url", url, "search", "s", "popped", "--hidden", "--json").stdout.splitlines()
    assert [(json.loads(x)["position"], json.loads(x)["hidden"]) for x in lines] == [(None, True)]


def test_long_content_is_cut_unless_full(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/x.db"
    big = "x" * (4 * 1024 * 1024 - 200)
    with memvault.open(url) as store:
        store.session("s").append([Message.user(big), Message.user("line one\nline two")])
    cut = cli("--url", url, "show", "s").stdout
    assert len(cut) < 2000 and "--full" in cut and "line one\\nline two" in cut
    whole = cli("--url", url, "show", "s", "--full").stdout
    assert big in whole and "line one\n" in whole


def test_many_messages_stream_one_line_each(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/x.db"
    with memvault.open(url) as store:
        s = store.session("s")
        for start in range(0, 20_000, 1000):
            s.append([Message.user(f"message {i}") for i in range(start, start + 1000)])
    lines = cli("--url", url, "show", "s").stdout.splitlines()
    assert len(lines) == 20_001 and lines[-1].split()[0] == "20000"


def on_a_terminal(*args: str, **env: str) -> tuple[int, bytes]:
    """Run ``memvault ARGS`` (with ``env`` added) with stdout and stderr on a
    pseudo-terminal; its exit code and everything it wrote there."""
    pid, fd = pty.fork()
    if pid == 0:
        os.environ.update(LINES="24", COLUMNS="80", **env)
        os.execv(sys.executable, [sys.executable, "-m", "memvault", *args])
    output = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        output += chunk
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), output


def test_a_terminal_gets_a_pager(tmp_path: Path) -> None:
    """On a terminal, output longer than the screen goes through $PAGER."""
    url = f"sqlite:///{tmp_path}/x.db"
    with memvault.open(url) as store:
        store.session("s").append([Message.user(f"message {i}") for i in range(200)])
    pager = (
        f'{sys.executable} -c "import sys; '
        f"sys.stdout.write('PAGED ' + str(len(sys.stdin.readlines())))\""
    )
    code, output = on_a_terminal("--url", url, "show", "s", PAGER=pager)
    assert code == 0, output
    assert b"PAGED 201" in output, output[-300:]


@pytest.mark.parametrize(
    "args",
    [
        ["show"],
        ["show", "a", "--lats", "3"],
        ["show", "a", "--last", "abc"],
        ["nosuchcommand"],
        ["show", "a", "--last", "-1"],
    ],
)
def test_usage_errors_are_one_line(args: list[str], tmp_path: Path) -> None:
    assert_one_line_error(cli("--url", f"sqlite:///{tmp_path}/x.db", *args))


def test_out_of_range_last_is_refused_alike(url: str) -> None:
    with memvault.open(url) as store:
        store.session("a").append([Message.user("x")])
    for n in ("99999999999999999999", str(2**63)):
        assert_one_line_error(
            cli("--url", url, "show", "a", "--last", n), "InvalidArgumentError", "last"
        )
        assert_one_line_error(
            cli("--url", url, "compact", "--yes", "--keep-events", n),
            "InvalidArgumentError",
            "keep_events",
        )


def test_demo_on_memory_says_why() -> None:
    assert_one_line_error(cli("--url", "memory://", "demo"), "memory://", "process")


CTRL_C = """
import sys
import memvault.cli.app


class Ready:  # says "ready" once the command reads its input, i.e. runs
    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def __iter__(self):
        print("ready", flush=True)
        return iter(self.stream)


class Stdin:
    buffer = Ready(sys.stdin.buffer)


sys.stdin = Stdin()
sys.argv = ["memvault", "import", "-"]
memvault.cli.app.main()
"""


def test_ctrl_c_is_one_line(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CTRL_C],
        cwd=tmp_path,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "MEMVAULT_URL": f"sqlite:///{tmp_path}/x.db"},
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1, stderr
    assert stderr == "error: interrupted\n"


def test_version_and_help_names() -> None:
    done = cli("--version")
    assert done.exit_code == 0 and done.stdout.strip() == f"memvault {memvault.__version__}"
    helped = cli("show", "--help").stdout
    assert "SESSION" in helped and "{session}" not in helped


def test_counts_are_singular_when_one(tmp_path: Path) -> None:
    src, dst = f"sqlite:///{tmp_path}/a.db", f"sqlite:///{tmp_path}/b.db"
    with memvault.open(src) as store:
        store.session("a").append([Message.user("x")])
    dump = tmp_path / "dump.jsonl"
    dump.write_text(cli("--url", src, "export").stdout, encoding="utf-8")
    done = cli("--url", dst, "import", str(dump))
    assert done.exit_code == 0 and "imported 1 session: 'a'" in done.stdout


def test_compact_asks_first(tmp_path: Path) -> None:
    """compact deletes for good: it asks on a terminal, and needs --yes otherwise."""
    url = f"sqlite:///{tmp_path}/x.db"
    with memvault.open(url) as store:
        s = store.session("a")
        s.append([Message.user("x")])
        s.pop()
    assert_one_line_error(cli("--url", url, "compact"), "--yes")
    with memvault.open(url) as store:
        assert len(store.session("a").log()) == 2
    done = cli("--url", url, "compact", "--yes", "--keep-events", "0")
    assert done.exit_code == 0 and "removed 1 message, 2 events" in done.stdout


def test_compact_shows_progress_on_a_terminal_only(tmp_path: Path) -> None:
    """compact draws a progress bar on a terminal's stderr (cleared at the end);
    piped or with --json, stderr stays empty and --json prints one JSON line."""
    url = f"sqlite:///{tmp_path}/x.db"
    with memvault.open(url) as store:
        for i in range(30):
            s = store.session(f"s{i}")
            s.append([Message.user("x"), Message.user("y")])
            s.pop()
    code, output = on_a_terminal("--url", url, "compact", "--yes", "--batch", "2")
    assert code == 0, output
    assert b"compacting" in output and b"30/30" in output, output[-500:]
    assert b"removed 0 messages" in output
    code, output = on_a_terminal("--url", url, "compact", "--yes", "--json")
    assert code == 0 and output.strip() == (b'{"nodes":0,"events":0,"sessions":0,"vectors":0}'), (
        output
    )
    piped = cli("--url", url, "compact", "--yes", "--keep-events", "0", "--batch", "2")
    assert piped.exit_code == 0 and piped.stderr == ""
    assert piped.stdout == "removed 30 messages, 60 events, 0 expired sessions\n"
    as_json = cli("--url", url, "compact", "--yes", "--json")
    assert as_json.exit_code == 0 and as_json.stderr == ""
    assert json.loads(as_json.stdout) == {"nodes": 0, "events": 0, "sessions": 0, "vectors": 0}


def test_demo_says_it_replaces_an_earlier_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/demo.db"
    first = subprocess.run(
        [sys.executable, "-m", "memvault", "--url", url, "demo"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "50"},
        timeout=120,
    )
    assert first.returncode == 0, first.stderr
    assert "replaced the session" not in first.stdout
    assert "memvault rollback memvault-demo 'auto:pre-rollback@v3'" in first.stdout
    again = subprocess.run(
        [sys.executable, "-m", "memvault", "--url", url, "demo"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0 and "replaced the session 'memvault-demo'" in again.stdout
