"""`memvault show SESSION --timeline`: the inspector's timeline in the terminal."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import memvault
from memvault import Message
from memvault.ui import views
from memvault.ui.text import timeline_lines
from tests.support.inspector import seed


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memvault", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def seeded(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 't.db'}"
    with memvault.open(url) as store:
        seed(store)
        store.session("agent-1").append([Message.user("clear\x1b[2J screen")])
    return url


def test_timeline_lists_events_with_their_messages(tmp_path: Path) -> None:
    out = run("--url", seeded(tmp_path), "show", "agent-1", "--timeline")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "agent-1  version 8, 5 visible messages"
    ops = [re.match(r"v(\d+) +(\w+)", x).groups() for x in lines if x.startswith("v")]  # type: ignore[union-attr]
    assert ops == [
        ("1", "append"),
        ("2", "append"),
        ("2", "snapshot"),
        ("3", "append"),
        ("4", "rollback"),
        ("5", "append"),
        ("6", "pop"),
        ("7", "trim"),
        ("8", "append"),
    ]
    hidden = [x.split()[0] for x in lines if x.endswith("[hidden]")]
    assert hidden == ["system", "assistant", "user", "user"]
    assert any("→ calls get_weather(" in x and "[call_1]" in x for x in lines)
    assert any("18 C, sunny  ← result of call_1" in x for x in lines)
    assert "clear\\x1b[2J screen" in out.stdout and "\x1b" not in out.stdout
    assert "rollback to 'good', saved 'auto:pre-rollback@v3'" in re.sub(" +", " ", out.stdout)


def test_color_styles_roles_and_strikes_hidden_messages(tmp_path: Path) -> None:
    with memvault.open(seeded(tmp_path)) as store:
        page = views.timeline(store, "agent-1")
        assert page is not None
        lines = list(timeline_lines("agent-1", page, lambda m: str(m.content), color=True))
    popped = next(x for x in lines if "Thanks" in x)
    assert "\x1b[2;9m  Thanks  [hidden]" in popped  # dim, struck through
    user = next(x for x in lines if "Weather in Paris?" in x)
    assert user == "      \x1b[1;34muser     \x1b[0m  Weather in Paris?"  # role in blue


def test_pages_and_mistakes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'long.db'}"
    with memvault.open(url) as store:
        s = store.session("long")
        for i in range(30):
            s.append([Message.user(f"turn {i}-{j}") for j in range(10)])
    newest = run("--url", url, "show", "long", "--timeline").stdout
    assert "turn 29-9" in newest and "turn 0-0" not in newest
    hint = re.search(r"--timeline --before (\d+)\)", newest)
    assert hint
    older = run("--url", url, "show", "long", "--timeline", "--before", hint.group(1)).stdout
    assert "turn 29-9" not in older and f"v{int(hint.group(1)) - 1} " in older
    for args in (["--timeline", "--json"], ["--timeline", "--last", "2"]):
        bad = run("--url", url, "show", "long", *args)
        assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1
    missing = run("--url", url, "show", "nope", "--timeline")
    assert missing.returncode == 1 and "no session 'nope'" in missing.stderr


def test_a_compacted_log_shows_the_history_it_starts_from(tmp_path: Path) -> None:
    url = seeded(tmp_path)
    with memvault.open(url) as store:
        store.compact(keep_events=1)
    lines = run("--url", url, "show", "agent-1", "--timeline").stdout.splitlines()
    assert lines[1] == (
        "(events before version 8 were dropped by compact(keep_events=...); "
        "the history just before version 8:)"
    )
    assert [x.split()[0] for x in lines[2:6]] == ["user", "assistant", "tool", "assistant"]
    assert lines[6].startswith("v8 ")
