"""Hostile input, property-based, on every backend in tests/support/backends.py.

The property, for message fields, session ids, snapshot names and URLs: an input is
either stored and read back exactly, or rejected with ``InvalidMessageError`` /
``ConfigurationError`` and nothing is written (same version, same log, same
sessions). Strings include NUL, lone surrogates, RTL marks, astral characters and
lengths around every limit.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

import memvault
from memvault import ConfigurationError, InvalidMessageError, Message, SnapshotNotFoundError
from memvault.model import Limits

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
_counter = itertools.count()

# Hostile but valid Unicode (NUL, RTL marks, BOM, astral, quotes, key syntax), and
# any code point at all, lone surrogates included.
AWKWARD = [
    "\x00",
    "\u202e",
    "\u200f",
    "\ufeff",
    "'",
    '"',
    "\\",
    "{",
    "}",
    "%",
    "*",
    "?",
    ":",
    "/",
    "\n",
    "🙂",
    "𝄞",
    "ß",
    "\u0301",
]
TEXT = st.text(st.characters(exclude_categories=("Cs",)) | st.sampled_from(AWKWARD), max_size=24)
CHARS = st.characters(exclude_categories=()) | st.sampled_from([*AWKWARD, "\ud800", "\udfff"])
ANY_TEXT = st.text(CHARS, max_size=24)


def around(limit: int) -> st.SearchStrategy[str]:
    """Strings of hostile characters whose length sits at or near ``limit``."""
    return st.builds(
        lambda c, n: (c * n)[:n],
        st.text(CHARS, min_size=1, max_size=3),
        st.integers(limit - 2, limit + 2),
    )


def json_values(text: st.SearchStrategy[str], nan: bool) -> st.SearchStrategy[Any]:
    return st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.integers(-(2**80), 2**80)
        | st.floats(allow_nan=nan, allow_infinity=nan)
        | text,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
        max_leaves=8,
    )


JSON = json_values(TEXT, nan=False)
PARTS = st.lists(st.dictionaries(TEXT, JSON, max_size=3), max_size=3)


@st.composite
def valid_fields(draw: st.DrawFn) -> dict[str, Any]:
    """Fields of a message that should be stored (hostile text, odd JSON, any zone)."""
    role = draw(st.sampled_from(["system", "developer", "user", "assistant", "tool"]))
    fields: dict[str, Any] = {"role": role, "content": draw(TEXT | PARTS)}
    if role == "assistant" and draw(st.booleans()):
        fields["tool_calls"] = draw(
            st.lists(
                st.fixed_dictionaries({"id": TEXT, "name": TEXT, "arguments": TEXT}),
                min_size=1,
                max_size=2,
            )
        )
        fields["content"] = draw(st.none() | TEXT)
    if role == "tool":
        fields["tool_call_id"] = draw(TEXT)
    optional = {
        "id": st.text(min_size=1, max_size=256) | TEXT.filter(bool),
        "name": TEXT,
        "metadata": st.dictionaries(TEXT, JSON, max_size=4),
        "created_at": st.datetimes(
            timezones=st.none()
            | st.just(timezone.utc)
            | st.builds(lambda m: timezone(timedelta(minutes=m)), st.integers(-720, 720))
        ),
    }
    for name, strategy in optional.items():
        if draw(st.booleans()):
            fields[name] = draw(strategy)
    return fields


NOT_JSON = st.sampled_from([{1, 2}, b"bytes", object(), {1: "int key"}, math.nan, math.inf])
DAMAGE = st.sampled_from(
    [
        ("role", ANY_TEXT),
        ("content", NOT_JSON | ANY_TEXT | st.integers()),
        ("content", st.lists(NOT_JSON | json_values(ANY_TEXT, nan=True), min_size=1, max_size=2)),
        ("metadata", st.dictionaries(TEXT, NOT_JSON | json_values(ANY_TEXT, nan=True), min_size=1)),
        ("metadata", JSON),
        ("id", around(256) | ANY_TEXT),
        ("name", ANY_TEXT | st.integers()),
        ("tool_calls", st.lists(st.fixed_dictionaries({"id": ANY_TEXT}), min_size=1)),
        ("created_at", ANY_TEXT),
        ("unknown_field", JSON),
    ]
)


@st.composite
def damaged_fields(draw: st.DrawFn) -> dict[str, Any]:
    """Valid fields with one of them replaced by something hostile."""
    fields = draw(valid_fields())
    name, strategy = draw(DAMAGE)
    return {**fields, name: draw(strategy)}


FIELDS = valid_fields() | damaged_fields()


@pytest.fixture
def store(any_store_url: str) -> Iterator[memvault.Store]:
    with memvault.open(any_store_url) as opened:
        yield opened


def fresh(store: memvault.Store, tag: str) -> memvault.Session:
    """A new session holding one message, so 'nothing written' is measurable."""
    s = store.session(f"{tag}-{next(_counter)}")
    s.append([Message.user("canary")])
    return s


def state(s: memvault.Session) -> Any:
    return s.info(), s.history(), s.snapshots(), s.log()


def wire(m: Message) -> str:
    """A message's exact JSON form (tells -0.0 from 0.0, 1 from 1.0)."""
    return json.dumps(m.model_dump(mode="json"), ensure_ascii=False, sort_keys=True)


@SETTINGS
@given(fields=FIELDS)
def test_message_fields_round_trip_or_are_refused(
    store: memvault.Store, fields: dict[str, Any]
) -> None:
    s = fresh(store, "fields")
    before = state(s)
    try:
        message: Message | None = Message.model_validate(fields)
    except (ValidationError, ValueError, TypeError):
        message = None
    try:
        s.append([fields] if message is None else [message])
    except InvalidMessageError:
        event("refused")
        assert state(s) == before
        return
    event("stored")
    assert message is not None, f"append accepted what Message refuses: {fields!r}"
    stored = s.history()[-1]
    assert stored == message and wire(stored) == wire(message)
    assert len(s.history()) == 2 and s.info().version == 2  # type: ignore[union-attr]


@SETTINGS
@given(session_id=st.one_of(ANY_TEXT, around(512)))
def test_session_ids_round_trip_or_are_refused(store: memvault.Store, session_id: str) -> None:
    canary = fresh(store, "canary")
    before, sessions = state(canary), set(store.sessions())
    try:
        s = store.session(session_id)
    except InvalidMessageError:
        event("refused")
        assert set(store.sessions()) == sessions and state(canary) == before
        assert not session_id or len(session_id) > 512 or not _encodable(session_id)
        return
    assert len(session_id) <= 512 and _encodable(session_id)
    text = f"for {session_id!r} #{next(_counter)}"
    s.append([Message.user(text)])
    assert s.history()[-1].content == text
    assert set(store.sessions()) == sessions | {session_id}
    assert state(canary) == before


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@SETTINGS
@given(name=st.one_of(ANY_TEXT, around(256), TEXT.map(lambda t: "auto:" + t)))
def test_snapshot_names_round_trip_or_are_refused(store: memvault.Store, name: str) -> None:
    s = fresh(store, "snap")
    s.append([Message.assistant("second")])
    before = state(s)
    try:
        snap = s.snapshot(name)
    except InvalidMessageError:
        event("refused")
        assert state(s) == before
        assert not name or len(name) > 256 or name.startswith("auto:") or not _encodable(name)
        with pytest.raises((InvalidMessageError, SnapshotNotFoundError)):
            s.rollback(name)
        assert state(s)[:3] == before[:3]
        return
    assert [x.name for x in s.snapshots()] == [name] == [snap.name]
    s.append([Message.user("third")])
    s.rollback(name)
    assert [m.content for m in s.history()] == ["canary", "second"]
    assert s.fork(f"fork-{next(_counter)}", at=name).history() == s.history()


# --- URLs ------------------------------------------------------------------------

SECRET = "Pw-9xQ"
LOCAL_SCHEMES = st.sampled_from(["memory", "MEMORY", "sqlite", "SQLite", "nosuch", "mem", ""])
RELATIVE_PATH = st.text(CHARS, max_size=30).filter(
    lambda p: not p.startswith("/") and ".." not in p
)


@st.composite
def urls(draw: st.DrawFn) -> str:
    scheme = draw(LOCAL_SCHEMES | ANY_TEXT)
    userinfo = draw(st.sampled_from(["", "user@", f"user:{SECRET}@", f":{SECRET}@"]))
    extra = draw(ANY_TEXT) if ":" in userinfo else ""
    password_extra = quote(extra, safe="", errors="surrogatepass")
    host = draw(st.sampled_from(["", "host", "127.0.0.1:1", "[::1]", "[bad"]))
    netloc = userinfo.replace(SECRET, SECRET + password_extra) + host
    return f"{scheme}://{netloc}/{draw(RELATIVE_PATH)}{draw(st.sampled_from(['', '?a=b', '#f']))}"


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(url=urls() | ANY_TEXT | RELATIVE_PATH.map(lambda p: f"sqlite:///{p}"))
def test_urls_open_a_working_store_or_raise_configuration_error(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any string: a working store, or ConfigurationError without the password.
    (SQLite paths stay relative: the working directory is a temporary folder.)"""
    monkeypatch.chdir(tmp_path)
    assume(not url.lower().startswith("sqlite:////"))
    assume(not url.lower().startswith(("redis", "postgres")))  # tested with a closed port
    try:
        store = memvault.open(url)
    except ConfigurationError as exc:
        event("refused")
        assert SECRET not in str(exc) and SECRET not in repr(exc)
        return
    event("opened")
    try:
        assert SECRET not in repr(store)
        s = store.session(f"s{next(_counter)}")
        s.append([Message.user("works")])
        assert [m.content for m in s.history()] == ["works"]
    finally:
        store.close()


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///nul\x00.db",
        "sqlite:///",
        "sqlite:///.",
        "sqlite:///:memory:",
        "sqlite:///missing-dir/x.db",
        "memory://host",
        f"memory://u:{SECRET}@h",
        f"sqlite://u:{SECRET}@h/x.db",
        "sqlite:///" + "x" * 5000,
        "",
        " memory://",
    ],
)
def test_known_bad_urls(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Examples the property above found or must keep finding."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError) as caught:
        memvault.open(url)
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize("writer", ["lone \ud800", "\udfff", "", 5])
def test_bad_writer_labels_are_refused_at_open(writer: Any) -> None:
    """A writer label every write would fail to store is refused when the store opens.
    Failing: writer="\ud800" was accepted, then every write raised UnicodeEncodeError."""
    with pytest.raises(ConfigurationError, match="writer"):
        memvault.open("memory://", writer=writer)


def test_limits_are_the_documented_defaults() -> None:
    """The limits the docs state, the same object for every backend."""
    assert Limits() == Limits(
        max_message_bytes=4 * 1024 * 1024,
        max_batch=1000,
        max_batch_bytes=64 * 1024 * 1024,
        max_session_id=512,
        max_snapshot_name=256,
    )


def test_created_at_keeps_its_instant(store: memvault.Store) -> None:
    """A created_at in any zone reads back as the same instant, in UTC."""
    at = datetime(2024, 2, 29, 23, 30, tzinfo=timezone(timedelta(hours=-5)))
    s = fresh(store, "tz")
    s.append([Message.user("x", created_at=at)])
    stored = s.history()[-1].created_at
    assert stored == at and stored.utcoffset() == timedelta(0)
