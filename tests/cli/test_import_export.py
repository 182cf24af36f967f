"""Export and import at any size, all or nothing, and for any history the API can
build; damaged files refused with their line number. Through the real CLI."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import memvault
from memvault import BackendUnavailableError, Message, SnapshotExistsError
from memvault.cli.app import app
from memvault.cli.transfer import export_sessions, import_sessions
from tests.cli.test_transfer import contents
from tests.support.backends import BACKENDS


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


@pytest.fixture(params=["postgres", "redis", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return BACKENDS[request.param](request, tmp_path)


def one_line_error(result: Result, *words: str) -> None:
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    for word in words:
        assert word in result.stderr, (word, result.stderr)


def dump(tmp_path: Path, url: str, name: str = "dump.jsonl") -> Path:
    done = cli("--url", url, "export")
    assert done.exit_code == 0, done.stderr
    path = tmp_path / name
    path.write_text(done.stdout, encoding="utf-8")
    return path


def test_big_sessions_round_trip(url: str, tmp_path: Path) -> None:
    """1,200 messages (more than a batch) in the history and in a snapshot."""
    src = f"sqlite:///{tmp_path}/src.db"
    with memvault.open(src) as store:
        s = store.session("big")
        for start in range(0, 1200, 400):
            s.append([Message.user(f"m{i}") for i in range(start, start + 400)])
        s.snapshot("all")
        s.trim(keep_last=1100)
    path = dump(tmp_path, src)
    done = cli("--url", url, "import", str(path))
    assert done.exit_code == 0, done.stderr
    with memvault.open(src) as a, memvault.open(url) as b:
        assert contents(b) == contents(a)


def test_snapshot_pop_snapshot_rollback_imports_back(url: str, tmp_path: Path) -> None:
    src = f"sqlite:///{tmp_path}/src.db"
    with memvault.open(src) as store:
        s = store.session("s")
        s.append([Message.user("a"), Message.assistant("b")])
        s.snapshot("one")
        s.pop()
        s.snapshot("two")
        s.rollback("one")
    path = dump(tmp_path, src)
    done = cli("--url", url, "import", str(path))
    assert done.exit_code == 0, done.stderr
    with memvault.open(src) as a, memvault.open(url) as b:
        assert contents(b) == contents(a)


def make_two(tmp_path: Path) -> list[str]:
    src = f"sqlite:///{tmp_path}/src.db"
    with memvault.open(src) as store:
        store.session("first").append([Message.user("1")])
        store.session("second").append([Message.user("2"), Message.user("3")])
    return dump(tmp_path, src).read_text("utf-8").splitlines()


def test_truncated_file_is_refused_and_nothing_written(tmp_path: Path) -> None:
    lines = make_two(tmp_path)
    dst = f"sqlite:///{tmp_path}/dst.db"
    path = tmp_path / "cut.jsonl"
    path.write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")
    one_line_error(
        cli("--url", dst, "import", str(path)), f"line {len(lines) - 1}", "'second'", "truncated"
    )
    with memvault.open(dst) as store:
        assert store.sessions() == []


def test_invalid_second_session_writes_nothing_and_retry_works(tmp_path: Path) -> None:
    lines = make_two(tmp_path)
    dst = f"sqlite:///{tmp_path}/dst.db"
    at = next(i for i, x in enumerate(lines) if '"content":"3"' in x)
    bad = lines.copy()
    bad[at] = bad[at].replace('"role":"user"', '"role":"robot"')
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(bad) + "\n", encoding="utf-8")
    one_line_error(cli("--url", dst, "import", str(path)), f"line {at + 1}", "role")
    with memvault.open(dst) as store:
        assert store.sessions() == []
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = cli("--url", dst, "import", str(path))
    assert done.exit_code == 0 and "imported 2 sessions: 'first', 'second'" in done.stdout


def test_failure_while_writing_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = make_two(tmp_path)
    with memvault.open(f"sqlite:///{tmp_path}/dst.db") as store:
        real = memvault.Session.append
        calls = []

        def failing(self: memvault.Session, *args: Any, **kwargs: Any) -> int:
            calls.append(self.id)
            if self.id == "second":
                raise BackendUnavailableError("the server went away")
            return real(self, *args, **kwargs)

        monkeypatch.setattr(memvault.Session, "append", failing)
        with pytest.raises(BackendUnavailableError):
            import_sessions(store, lines)
        monkeypatch.undo()
        assert calls == ["first", "second"] and store.sessions() == []
        assert import_sessions(store, lines) == ["first", "second"]


def test_non_utf8_file_is_one_line(tmp_path: Path) -> None:
    lines = make_two(tmp_path)
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode() + b'{"type": "caf\xe9"}\n')
    one_line_error(
        cli("--url", f"sqlite:///{tmp_path}/dst.db", "import", str(path)),
        f"line {len(lines) + 1}",
        "UTF-8",
    )


def test_same_session_twice_is_refused(tmp_path: Path) -> None:
    lines = make_two(tmp_path)
    first = lines[: next(i for i, x in enumerate(lines) if '"id":"second"' in x)]
    path = tmp_path / "twice.jsonl"
    path.write_text("\n".join(first + first) + "\n", encoding="utf-8")
    one_line_error(
        cli("--url", f"sqlite:///{tmp_path}/dst.db", "import", str(path)),
        f"line {len(first) + 1}",
        "'first'",
        "twice",
    )


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 3)),
        st.tuples(st.just("pop"), st.none()),
        st.tuples(st.just("trim"), st.integers(0, 4)),
        st.tuples(st.just("clear"), st.none()),
        st.tuples(st.just("snapshot"), st.none()),
        st.tuples(st.just("rollback"), st.integers(0, 10)),
    ),
    max_size=25,
)


def build(store: memvault.Store, ops: list[tuple[str, Any]]) -> None:
    s = store.session("s")
    s.append([Message.user("first")])
    made = 0
    for op, arg in ops:
        if op == "append":
            s.append([Message.user(f"m{made + i}") for i in range(arg)])
            made += arg
        elif op == "pop":
            s.pop()
        elif op == "trim":
            s.trim(keep_last=arg)
        elif op == "clear":
            s.clear()
        elif op == "snapshot":
            try:
                s.snapshot(f"snap{made}")
            except SnapshotExistsError:
                pass
        else:
            names = [x.name for x in s.snapshots()]
            if names:
                s.rollback(names[arg % len(names)])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_any_history_imports_back(ops: list[tuple[str, Any]]) -> None:
    """Any session the API can build (auto snapshots included as rollback targets)
    exports and imports back with the same history and user snapshots (one that holds
    nothing, no message and no snapshot, is not exported)."""
    with memvault.open("memory://") as source, memvault.open("memory://") as target:
        build(source, ops)
        lines = list(export_sessions(source))
        held = {sid: c for sid, c in contents(source).items() if c != ([], {})}
        assert import_sessions(target, lines) == list(held)
        assert contents(target) == held
        assert list(export_sessions(target)) == lines


IDS = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=20)
TEXTS = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(sid=IDS, text=TEXTS)
def test_any_text_and_id_round_trip_through_the_cli(
    url: str, tmp_path: Path, sid: str, text: str
) -> None:
    """On every backend two processes share: `show --json` gives every message back
    exactly, and so do export then import (into a fresh SQLite file)."""
    folder = Path(tempfile.mkdtemp(dir=tmp_path))  # one per example, never reused
    dst = f"sqlite:///{folder}/b.db"
    original = Message.user(text, metadata={"k": text})
    with memvault.open(url) as store:
        store.session(sid).delete()
        store.session(sid).append([original])
    try:
        shown = cli("--url", url, "show", "--json", "--", sid)  # ids may start with "-"
        assert shown.exit_code == 0, shown.stderr
        records = [json.loads(line) for line in shown.stdout.splitlines()]
        assert [Message.model_validate(r["message"]) for r in records] == [original]
        exported = cli("--url", url, "export", "--", sid)
        assert exported.exit_code == 0, exported.stderr
        (folder / "dump.jsonl").write_text(exported.stdout, encoding="utf-8")
        assert cli("--url", dst, "import", str(folder / "dump.jsonl")).exit_code == 0
        with memvault.open(dst) as store:
            assert store.sessions() == [sid] and store.session(sid).history() == [original]
    finally:
        with memvault.open(url) as store:
            store.session(sid).delete()


@pytest.mark.parametrize("sid", ["-0", "-x", "--json"])
def test_an_id_that_looks_like_an_option_goes_after_double_dash(tmp_path: Path, sid: str) -> None:
    """Shown without "--", an id that starts with "-" is an unknown option: the one-line
    error says how to pass it. After "--" it is an id (hypothesis found "-0")."""
    url = f"sqlite:///{tmp_path}/x.db"
    with memvault.open(url) as store:
        store.session(sid).append([Message.user("hi")])
    shown = cli("--url", url, "show", "--", sid)
    assert shown.exit_code == 0 and "hi" in shown.stdout, shown.stderr
    if sid != "--json":  # a known option of show's: not an id, and no error either
        one_line_error(cli("--url", url, "show", sid), f"No such option: {sid}", f"show -- {sid}")


def test_import_reads_stdin(tmp_path: Path) -> None:
    text = "\n".join(make_two(tmp_path)) + "\n"
    done = CliRunner().invoke(
        app, ["--url", f"sqlite:///{tmp_path}/dst.db", "import", "-"], input=text
    )
    assert done.exit_code == 0 and "imported 2 sessions: 'first', 'second'" in done.stdout


def test_export_reads_snapshots_on_every_backend(url: str, tmp_path: Path) -> None:
    with memvault.open(url) as store:
        s = store.session("s")
        s.append([Message.user("a"), Message.assistant("b"), Message.user("c")])
        s.trim(keep_last=2)
        s.snapshot("trimmed")
        s.pop()
        s.snapshot("popped")
    dst = f"sqlite:///{tmp_path}/dst.db"
    assert cli("--url", dst, "import", str(dump(tmp_path, url))).exit_code == 0
    with memvault.open(url) as a, memvault.open(dst) as b:
        assert contents(b) == contents(a)
        assert [m.content for m in b.session("s").fork("t", at="trimmed").history()] == ["b", "c"]
