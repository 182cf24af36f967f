"""Security: no injection through ids or names, no pickle, no password in any output.

Passwords are checked on every path a user can reach without a server of their
own: errors from ``open`` (sync and async) and the first operation, ``repr`` of the
objects that carry a URL, and the ``memvault`` command's output. The network
backends' own tests cover their connection paths (wrong password, TLS).
"""

from __future__ import annotations

import ast
import asyncio
import os
import pickle
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import memvault
from memvault import CorruptRecordError, MemvaultError, Message, SnapshotNotFoundError
from memvault.checks.opener import Opener

SECRET = "pw-s3cret-Zq9"
SRC = Path(memvault.__file__).parent

# Every scheme memvault knows, with a password; network hosts point at a closed port.
SECRET_URLS = [
    f"memory://user:{SECRET}@host",
    f"sqlite://user:{SECRET}@host/x.db",
    f"nosuch://user:{SECRET}@host/db",
    f"redis://user:{SECRET}@127.0.0.1:9/0",
    f"rediss://:{SECRET}@127.0.0.1:9/0",
    f"postgresql://user:{SECRET}@127.0.0.1:9/db?connect_timeout=2",
    f"postgres://user:{SECRET}@127.0.0.1:9/db?connect_timeout=2",
]
# Passwords the userinfo pattern missed: libpq's ?password= (which the docs allow), the
# same on Redis and SQLite (refused, and echoed back in the refusal), and an unencoded
# "#" in a password, the secret on either side of it (before it, redis-py's URL parser
# took it for the port and said so: "Port could not be cast to integer value as ...").
ODD_SECRET_URLS = [
    f"postgresql://127.0.0.1:9/db?user=u&password={SECRET}&connect_timeout=2",
    f"postgresql://u:pw#{SECRET}@127.0.0.1:9/db?connect_timeout=2",
    f"postgresql://u:{SECRET}#x@127.0.0.1:9/db?connect_timeout=2",
    f"postgresql://u:pw?{SECRET}@127.0.0.1:9/db",  # the query parser quoted its "query"
    # an unencoded "/": the password was taken to end there, and shown whole
    f"postgresql://u:x/{SECRET}@127.0.0.1:9/db?connect_timeout=2",
    f"redis://:{SECRET}/x@127.0.0.1:9/0",
    f"redis://:pw#{SECRET}@127.0.0.1:9/0",
    f"redis://:{SECRET}#x@127.0.0.1:9/0",
    f"rediss://u:{SECRET}#x@127.0.0.1:9/0",
    f"redis://127.0.0.1:9/0?password={SECRET}",
    f"sqlite:///x.db?password={SECRET}",
]
SECRET_URLS += ODD_SECRET_URLS


def chain(exc: BaseException | None) -> list[BaseException]:
    """The exception and every cause or context behind it."""
    out = []
    while exc is not None and exc not in out:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def assert_hidden(exc: BaseException) -> None:
    for e in chain(exc):
        assert SECRET not in str(e) and SECRET not in repr(e), (type(e).__name__, str(e))


@pytest.mark.parametrize("url", SECRET_URLS)
def test_password_never_in_errors_or_repr(url: str) -> None:
    """open(), the first operation and repr never show the password, sync or async."""
    with pytest.raises(MemvaultError) as caught:
        with memvault.open(url) as store:
            assert SECRET not in repr(store)
            store.session("s").info()
    assert_hidden(caught.value)

    async def use_async() -> None:
        async with memvault.open_async(url) as store:
            assert SECRET not in repr(store)
            await store.session("s").info()

    with pytest.raises(MemvaultError) as caught:
        asyncio.run(use_async())
    assert_hidden(caught.value)


def test_password_never_in_opener_repr() -> None:
    """The toolkit's Opener is shown in test ids and failure messages."""
    opener = Opener(f"redis://user:{SECRET}@127.0.0.1:9/0")
    assert SECRET not in repr(opener) and "***" in repr(opener)


@pytest.mark.parametrize("url", SECRET_URLS[:4] + ODD_SECRET_URLS)
def test_password_never_in_cli_output(url: str, tmp_path: Path) -> None:
    """Every command that takes --url, and $MEMVAULT_URL, keep the password hidden."""
    for args, env in [
        (["--url", url, "sessions"], {}),
        (["show", "s", "--url", url], {}),
        (["torture", "--url", url, "--seconds", "1"], {}),
        (["sessions"], {"MEMVAULT_URL": url}),
    ]:
        done = subprocess.run(
            [sys.executable, "-m", "memvault", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env={**os.environ, **env},
            timeout=120,
        )
        assert done.returncode != 0, (args, done.stdout)
        assert SECRET not in done.stdout + done.stderr, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr


# --- no pickle -------------------------------------------------------------------

UNSAFE_MODULES = {
    "pickle",
    "cPickle",
    "_pickle",
    "marshal",
    "shelve",
    "dill",
    "cloudpickle",
    "jsonpickle",
}
LOADERS = {"load", "loads", "Unpickler", "open"}  # shelve.open unpickles too


def unsafe_uses(path: Path, root: Path = SRC) -> list[str]:
    """Where a file could load a pickle-like payload.

    The contract suite may *make* pickles (to plant them and prove they are
    refused), so ``pickle.dumps`` under ``testing/`` is allowed; anything that loads
    one, and any other import of these modules, is flagged.
    """
    where = path.relative_to(root)
    may_dump = where.parts[0] == "testing"
    found, aliases = [], set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in UNSAFE_MODULES:
                    aliases.add(a.asname or a.name)
                    if not (may_dump and a.name == "pickle"):
                        found.append(f"{where}:{line}: import {a.name}")
        elif (
            isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in UNSAFE_MODULES
        ):
            found.append(f"{where}:{line}: from {node.module} import ...")
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr in LOADERS
        ):
            found.append(f"{where}:{line}: {node.value.id}.{node.attr}")
        elif isinstance(node, ast.Constant) and node.value in UNSAFE_MODULES:
            found.append(f"{where}:{line}: {node.value!r}")  # import_module("pickle")
    return found


def test_no_pickle_marshal_or_shelve_in_the_library() -> None:
    """Stored data is JSON only: nothing in src/ can load a pickle."""
    files = sorted(SRC.rglob("*.py"))
    assert len(files) > 20
    uses = [use for f in files for use in unsafe_uses(f)]
    assert uses == []


def test_the_pickle_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    """The scan above is not vacuous."""
    (tmp_path / "testing").mkdir()
    lib, kit = tmp_path / "lib.py", tmp_path / "testing" / "kit.py"
    lib.write_text("import pickle\nfrom marshal import loads\nimportlib.import_module('shelve')\n")
    kit.write_text("import pickle as p\npayload = p.dumps([])\np.loads(payload)\n")
    assert [u.split(": ")[1] for u in unsafe_uses(lib, tmp_path)] == [
        "import pickle",
        "from marshal import ...",
        "'shelve'",
    ]
    assert [u.split(": ")[1] for u in unsafe_uses(kit, tmp_path)] == ["p.loads"]


class _Evil:
    """Unpickling this creates a file: proof that a pickle was executed."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.marker), "w"))


@pytest.mark.parametrize("protocol", [0, pickle.HIGHEST_PROTOCOL])
def test_planted_pickle_is_refused_as_corrupt(
    tmp_path: Path, protocol: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pickled payload written into a SQLite row (as text or as a blob) is refused as
    CorruptRecordError naming session and depth, and is never executed."""
    path, marker = tmp_path / "x.db", tmp_path / "executed"
    with memvault.open(f"sqlite:///{path}") as store:
        store.session("victim").append([Message.user("a"), Message.user("b")])
    payload = pickle.dumps([_Evil(marker), {"v": 1, "m": {"role": "user"}}], protocol=protocol)
    value: str | bytes = payload.decode("latin-1") if protocol == 0 else payload
    with sqlite3.connect(path) as db:
        db.execute("UPDATE nodes SET body = ? WHERE depth = 2", (value,))

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("memvault called a pickle loader")

    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse)
    with memvault.open(f"sqlite:///{path}") as store:
        with pytest.raises(CorruptRecordError) as caught:
            store.session("victim").history()
        assert (caught.value.session_id, caught.value.depth) == ("victim", 2)
    assert not marker.exists()


# --- injection through session ids and snapshot names -------------------------------

PAYLOADS = [
    "'; DROP TABLE nodes; --",
    '"; DROP TABLE sessions; --',
    "x' OR '1'='1",
    "1; SELECT 1",
    "a%",
    "a_",
    "ab",
    "%",
    "_",
    "*",
    "?",
    "[a-z]",
    "a*",
    "\\",
    "\\'",
    "$.m",
    "{a}",
    "{a}b",
    "}{",
    "memvault:*",
    "mv:{s}:nodes",
    "%a%d%s",
    "KEYS *",
    "redis.call('FLUSHALL')",
    "]]--",
    "nul\x00after",
    "\u202etxt.exe",
    "😀",
    "a" * 256,
]


@pytest.fixture
def store(any_store_url: str) -> Iterator[memvault.Store]:
    with memvault.open(any_store_url) as opened:
        yield opened


def test_hostile_session_ids_and_snapshot_names_stay_apart(store: memvault.Store) -> None:
    """SQL, LIKE/glob wildcards, Redis key syntax and hash tags, Lua and JSON-path text,
    used as session ids and snapshot names, only ever address themselves. Failing:
    string-built queries or keys, LIKE/GLOB/KEYS matching, a shared hash tag."""
    for i, payload in enumerate(PAYLOADS):
        s = store.session(payload)
        s.append([Message.user(f"msg {i}")])
        for name in PAYLOADS:
            if name not in ("a_", "_", "?"):  # kept absent, to catch wildcard matching
                s.snapshot(name)
    assert store.sessions() == sorted(PAYLOADS)
    names = [n for n in PAYLOADS if n not in ("a_", "_", "?")]
    for i, payload in enumerate(PAYLOADS):
        s = store.session(payload)
        assert [m.content for m in s.history()] == [f"msg {i}"]
        assert [x.name for x in s.snapshots()] == names
        for absent in ("a_", "_", "?"):
            with pytest.raises(SnapshotNotFoundError):
                s.rollback(absent)
    assert store.session("a%").delete() and store.session("%").delete()
    assert store.session("*").delete()
    assert store.sessions() == sorted(set(PAYLOADS) - {"a%", "%", "*"})
    for i, payload in enumerate(PAYLOADS):
        if payload not in ("a%", "%", "*"):
            assert [m.content for m in store.session(payload).history()] == [f"msg {i}"]
            store.session(payload).rollback("'; DROP TABLE nodes; --")
            assert len(store.session(payload).snapshots()) == len(names) + 1
