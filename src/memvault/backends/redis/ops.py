"""The Redis backend's logic, without I/O: key layout, scripts, arguments, replies.

Each operation is a generator that yields requests and receives their raw replies:
:class:`Eval` (a script on one session's keys), :class:`Batch` (several, pipelined),
:class:`Afterward` (an Eval whose failure is not the caller's), :class:`Scan` (the
key space), :class:`Fetch` (fields of many keys, pipelined) and :class:`Command` (one
plain command); the sync and async clients in :mod:`memvault.backends.redis.backend`
only send requests. Every operation on a session is one :class:`Eval` of a Lua
script (``redis/lua/*.lua``: ``read``, ``write``, ``index`` and, on a cluster,
``hint``): atomic, one round trip. ``fork`` reads the source in one script and
writes the new session in another, because on a cluster the two sessions may live
on different nodes; ``pop`` reads its message and decodes it before the script that
pops it; ``sessions`` and ``compact`` scan the key space. ``sessions_page`` reads an index of
sessions (sorted sets, one per order): on a single server the write script keeps it
in the same step; on a cluster a second script keeps it after each write, and pages
settle what a writer left undone (docs/redis.md, "Listing sessions").
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files
from typing import Any, TypeVar
from urllib.parse import quote, unquote

from memvault.backends.base import Stored, Write
from memvault.backends.records import decoded
from memvault.errors import (
    ConfigurationError,
    CorruptRecordError,
    broken_chain,
    damaged_snapshot,
    duplicate_ids,
    hidden_through,
    message_missing,
    not_stored,
    not_utf8,
    session_exists,
    snapshot_exists,
    snapshot_missing,
    summarized_through,
    unknown_through,
    version_conflict,
)
from memvault.messages import Record, decode_message
from memvault.model import (
    AUTO_PREFIX,
    CompactProgress,
    CompactStats,
    Event,
    Progress,
    SessionInfo,
    Snapshot,
    check_snapshot,
    to_datetime,
    utc,
)
from memvault.paging import ORDERS, Listed, PageQuery, key_of
from memvault.sansio import Callback

T = TypeVar("T")

# The keys of one session, in the order the scripts take them (KEYS[1..6]).
SUFFIXES = ("meta", "msgs", "links", "ids", "snaps", "log")
# What percent-encoding leaves of a session id: no brace, colon or glob character.
_ENCODED = re.compile(r"[A-Za-z0-9_.~%-]+")
_FETCH_BATCH = 500
# What Fetch reads of each meta key: whether it exists, and when it expires.
FETCH_FIELDS = ("head", "expires")


@dataclass(frozen=True)
class Script:
    """A Lua script, sent by SHA1 (``EVALSHA``) and by text only after ``NOSCRIPT``."""

    text: str
    sha: str

    @classmethod
    def load(cls, name: str, shebang: str) -> Script:
        folder = files("memvault.backends.redis").joinpath("lua")
        common = folder.joinpath("common.lua").read_text("utf-8")
        text = f"{shebang}\n{common}\n{folder.joinpath(name).read_text('utf-8')}"
        return cls(text, hashlib.sha1(text.encode("utf-8")).hexdigest())


# Redis 7 refuses a flagged script that may write before it starts when the server
# is out of memory, so a write script never stops half-way; reads still run.
READ = Script.load("read.lua", "#!lua flags=no-writes")
WRITE = Script.load("write.lua", "#!lua")
INDEX = Script.load("index.lua", "#!lua flags=no-writes")
HINT = Script.load("hint.lua", "#!lua")
# Sessions the first listing of a store written without the index indexes per step.
_BUILD_BATCH = 1000
# The most index entries one call of a page with a match looks at.
_MATCH_BUDGET = 10_000


@dataclass(frozen=True)
class Eval:
    """Run ``script`` on one session's keys."""

    script: Script
    keys: Sequence[str]
    args: Sequence[str | bytes]


@dataclass(frozen=True)
class Scan:
    """Every key matching ``pattern`` (on a cluster: on every primary)."""

    pattern: str


@dataclass(frozen=True)
class Fetch:
    """``HMGET key *FETCH_FIELDS`` for each key, pipelined."""

    keys: Sequence[bytes]


@dataclass(frozen=True)
class Command:
    """One plain command (the search vectors' ``GET``, ``SET``, ``HMGET``...)."""

    args: Sequence[str | bytes]


@dataclass(frozen=True)
class Batch:
    """Several :class:`Eval` requests, pipelined (each one atomic on its own); the
    reply is the list of their replies."""

    evals: Sequence[Eval]


@dataclass(frozen=True)
class Afterward:
    """The cluster index's update after a write: sent as ``eval``, but a failure is
    not the caller's (the write is done; its generation stays pending, and the next
    page settles it): the reply is then None."""

    eval: Eval


Request = Eval | Scan | Fetch | Command | Batch | Afterward
Op = Generator[Request | Callback, Any, T]
"""An operation: run by :func:`memvault.sansio.drive` (or ``drive_async``)."""


class Layout:
    """Key names. A session's keys are ``{prefix}:{<id>}:<suffix>``, where ``<id>``
    is the percent-encoded session id: it never holds a brace, so it is the hash tag
    (one cluster slot per session), and the encoding is one-to-one, so two ids
    never share a key.

    Args:
        prefix: the first part of every key, so several apps can share a database.
    """

    def __init__(self, prefix: str) -> None:
        if not isinstance(prefix, str) or not prefix or "{" in prefix or "}" in prefix:
            raise ConfigurationError(
                f"prefix must be a non-empty string without braces, not {prefix!r}"
            )
        self.prefix = prefix
        # The search vectors (memvault.vectors): store-wide, beside the sessions' keys.
        self.vectors, self.vector_space = f"{prefix}:vectors", f"{prefix}:vector-space"
        glob = re.sub(r"([\\*?\[\]])", r"\\\1", prefix)
        self.pattern = f"{glob}:{{*}}:{SUFFIXES[0]}"
        # The session index on a single server (see write.lua): one sorted set per
        # order (paging.ORDERS); the marker that it holds every session, and where
        # its build's scan got to.
        self.index = tuple(f"{prefix}:sessions:{order}" for order in ORDERS)
        self.indexed, self.indexing = f"{prefix}:sessions:ready", f"{prefix}:sessions:scan"
        # On a cluster (see hint.lua): the same sorted sets, then the writes pending,
        # the stamps indexed and the last generation, all in one slot; the marker.
        tagged = f"{prefix}:{{sessions}}"
        self.hint = tuple(
            f"{tagged}:{name}" for name in (*ORDERS, "pending", "stamps", "generation")
        )
        self.hinted = f"{tagged}:ready"
        # Percent-encoding an id costs as much as sending a few more arguments, on
        # every operation; a process talks to the same few sessions again and again.
        self._keys = lru_cache(maxsize=1024)(self._make_keys)

    def keys(self, session_id: str) -> tuple[str, ...]:
        return self._keys(session_id)[: len(SUFFIXES)]

    def fenced(self, session_id: str) -> tuple[str, ...]:
        """The session's keys and its fence (write.lua on a cluster)."""
        return self._keys(session_id)

    def _make_keys(self, session_id: str) -> tuple[str, ...]:
        tag = quote(session_id, safe="")
        return tuple(f"{self.prefix}:{{{tag}}}:{suffix}" for suffix in (*SUFFIXES, "fence"))

    def session_id(self, meta_key: bytes) -> str | None:
        """The session a scanned meta key belongs to (None: not one of ours)."""
        try:
            key = meta_key.decode("utf-8")
        except UnicodeDecodeError:
            return None
        head, tail = f"{self.prefix}:{{", f"}}:{SUFFIXES[0]}"
        tag = key[len(head) : -len(tail)]
        if not (key.startswith(head) and key.endswith(tail) and _ENCODED.fullmatch(tag)):
            return None
        try:
            session_id = unquote(tag, errors="strict")
        except UnicodeDecodeError:
            return None
        return session_id if quote(session_id, safe="") == tag else None


def _text(value: bytes) -> str:
    return value.decode("utf-8")


def _number(value: float) -> str:
    return repr(float(value))  # round-trips exactly; Lua only compares it


def _none(value: object) -> str:
    return "" if value is None else str(value)


def _context(w: Write) -> list[str]:
    expires = w.expires_at
    if expires is None:
        return [_number(w.now), w.writer, "", ""]
    return [_number(w.now), w.writer, _number(expires), str(math.ceil(expires * 1000))]


def _numbered_snapshot(session_id: str, name: str, value: bytes) -> tuple[int, Snapshot]:
    """A stored snapshot and its sequence number (the order snapshots were taken); the
    summary pointer is absent from snapshots stored before summaries existed."""

    def parse() -> tuple[int, Snapshot]:
        seq, head, base, version, length, created, auto, *summary = json.loads(value)
        return int(seq), Snapshot(
            name, head, base, version, length, utc(float(created)), bool(auto), *summary
        )

    return decoded(session_id, f"snapshot {name!r}", parse)


def _snapshot(session_id: str, name: str, value: bytes) -> Snapshot:
    return _numbered_snapshot(session_id, name, value)[1]


def _event(session_id: str, index: int, value: bytes) -> Event:
    def parse() -> Event:
        version, op, writer, at, head0, base0, head1, base1, detail = json.loads(value)
        if not isinstance(detail, dict):
            raise ValueError(f"detail is not a JSON object: {detail!r}")
        return Event(version, op, writer, utc(float(at)), head0, base0, head1, base1, detail)

    return decoded(session_id, f"event {index + 1} of the log", parse)


# What a script's {'corrupt', depth, what} reply found.
_DAMAGE = {b"chain": broken_chain, b"missing": message_missing}


def _corrupt(session_id: str, reply: Any) -> CorruptRecordError | None:
    """The error a script reported as ``{'corrupt', depth, what}``, if it did."""
    if isinstance(reply, list) and reply and reply[0] == b"corrupt":
        return _DAMAGE[reply[2]](session_id, int(reply[1]))
    return None


def _stored(session_id: str, depth: int, body: bytes | None) -> Stored:
    if body is None:
        raise message_missing(session_id, depth)
    try:
        return depth, body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise not_utf8(session_id, depth) from exc


def _undamaged(session_id: str, reply: list[Any]) -> list[Any]:
    """A script's reply of messages, unless it reports damage: then that error."""
    damage = _corrupt(session_id, reply)
    if damage:
        raise damage
    return reply


def _stored_pairs(session_id: str, depths: Sequence[int], bodies: list[Any]) -> list[Stored]:
    try:
        return [(depth, body.decode("utf-8")) for depth, body in zip(depths, bodies, strict=True)]
    except (AttributeError, UnicodeDecodeError):  # a message missing or not UTF-8
        return [
            _stored(session_id, depth, body) for depth, body in zip(depths, bodies, strict=True)
        ]


def _stored_list(session_id: str, reply: list[Any]) -> list[Stored]:
    """The reply of history and chain: the first message's depth, then the messages,
    oldest first, each one level above the one before (their depths are not sent: a
    value a message fewer to build in Lua and to parse), [] for none; or the damage
    the script found."""
    if not _undamaged(session_id, reply):
        return []
    first, *bodies = reply
    return _stored_pairs(session_id, range(first, first + len(bodies)), bodies)


def _full_list(session_id: str, reply: list[Any]) -> list[Stored]:
    """The reply of history(full=True): depth, message, depth, message, ... (a summary
    has the depth of the message it was taken through); or the damage found."""
    reply = _undamaged(session_id, reply)
    return _stored_pairs(session_id, reply[::2], reply[1::2])


def _info(session_id: str, reply: list[Any]) -> tuple[SessionInfo, tuple[float, float | None]]:
    """The info script's reply: the session's info, and its times as stored."""
    version, length, created, updated, expires, summarized = reply
    times = float(updated), float(expires) if expires else None
    return SessionInfo(
        session_id,
        version,
        length,
        utc(float(created)),
        utc(times[0]),
        to_datetime(times[1]),
        summarized,
    ), times


def _pairs(records: Sequence[Record]) -> list[str]:
    return [part for r in records for part in (r.id, r.body)]


class Operations:
    """The backend protocol's operations as request generators.

    Args:
        layout: the key names.
        cluster: a Redis Cluster, where a script reaches its session's slot alone: the
            session index is kept by a second script after each write (hint.lua).
    """

    def __init__(self, layout: Layout, cluster: bool) -> None:
        self.layout, self._cluster = layout, cluster
        self._index = layout.hint[: len(ORDERS)] if cluster else layout.index
        self._ready = layout.hinted if cluster else layout.indexed

    def _read(self, session_id: str, op: str, now: float, *args: str) -> Eval:
        return Eval(READ, self.layout.keys(session_id), [op, _number(now), *args])

    def _write_keys(self, session_id: str) -> tuple[str, ...]:
        if self._cluster:
            return self.layout.fenced(session_id)
        return (*self.layout.keys(session_id), *self._index)

    def _write(self, session_id: str, op: str, w: Write, *args: str | bytes) -> Op[Any]:
        return (yield from self._written(session_id, [op, *_context(w), *args]))

    def _written(self, session_id: str, args: list[str | bytes]) -> Op[Any]:
        """The write script's reply (``args``: its operation, then now, then the rest).
        On a cluster the index is told first that the session is about to change
        (a generation, pending until the index is updated), then the script writes,
        then the index takes the session as the script left it. A writer that stops
        in between leaves its generation pending: the next page settles it. A write
        the page fenced meanwhile is refused unwritten, and begins again above the
        fence (the counter may have lost its value with the index's node)."""
        keys = self._write_keys(session_id)
        if not self._cluster:
            return (yield Eval(WRITE, keys, args))
        above: str | bytes = ""
        while True:
            generation = str((yield Eval(HINT, self.layout.hint, ["begin", session_id, above])))
            reply = yield Eval(WRITE, keys, [generation, *args])
            if reply[0] != b"fenced":
                break
            above = reply[1]
        yield Afterward(self._apply([generation], [(session_id, reply[1])], args[1]))
        return reply[0]

    def _apply(
        self,
        generations: Sequence[str | bytes],
        entries: Sequence[tuple[str, Any]],
        now: str | bytes,
    ) -> Eval:
        """hint.lua's update of the cluster's index: ``entries`` are the write script's
        (session id, entry()) pairs; ``generations`` the writes they settle."""
        flat: list[str | bytes] = []
        for session_id, entry in entries:
            values = [v if isinstance(v, bytes) else str(v) for v in entry]
            flat += [session_id, *values, *[""] * (6 - len(values))]
        return Eval(
            HINT, self.layout.hint, ["apply", now, str(len(generations)), *generations, *flat]
        )

    def vector_space(self) -> Op[str | None]:
        reply = yield Command(("GET", self.layout.vector_space))
        return None if reply is None else _text(reply)

    def set_vector_space(self, space: str, reset: bool) -> Op[None]:
        if reset:
            yield Command(("DEL", self.layout.vectors))
        yield Command(("SET", self.layout.vector_space, space))

    def get_vectors(self, keys: Sequence[str]) -> Op[dict[str, bytes]]:
        found: dict[str, bytes] = {}
        for start in range(0, len(keys), _FETCH_BATCH):
            batch = keys[start : start + _FETCH_BATCH]
            reply = yield Command(("HMGET", self.layout.vectors, *batch))
            found.update((k, v) for k, v in zip(batch, reply, strict=True) if v is not None)
        return found

    def put_vectors(self, items: Sequence[tuple[str, bytes]]) -> Op[None]:
        """Store vectors (same key, same text, same vector: overwriting is harmless)."""
        for start in range(0, len(items), _FETCH_BATCH):
            batch = items[start : start + _FETCH_BATCH]
            yield Command(("HSET", self.layout.vectors, *(x for item in batch for x in item)))

    def vector_keys(self) -> Op[list[str]]:
        reply = yield Command(("HKEYS", self.layout.vectors))
        return [_text(key) for key in reply]

    def drop_vectors(self, keys: Sequence[str]) -> Op[None]:
        for start in range(0, len(keys), _FETCH_BATCH):
            yield Command(("HDEL", self.layout.vectors, *keys[start : start + _FETCH_BATCH]))

    def node_bodies(self, session_id: str, now: float) -> Op[list[str]]:
        """Every stored body (the msgs hash); a session that expired meanwhile may
        still answer with its bodies: their vectors stay until the next compact."""
        reply = yield Command(("HVALS", self.layout.keys(session_id)[1]))
        return [body.decode("utf-8", "replace") for body in reply]  # damage: no key

    def _vectors_first(self, records: Sequence[Record]) -> Op[None]:
        """A write's vectors, stored just before its script: on a cluster they live
        on another node than the session, so one script cannot write both. A vector
        is a function of its text, so one whose write was then refused is an unused
        entry, never a wrong one."""
        items = [r.vector for r in records if r.vector is not None]
        if items:
            yield from self.put_vectors(items)

    def append(
        self,
        session_id: str,
        records: Sequence[Record],
        expect_version: int | None,
        expect_message: str | None,
        w: Write,
    ) -> Op[int]:
        yield from self._vectors_first(records)
        reply = yield from self._write(
            session_id, "append", w, _none(expect_version), expect_message or "", *_pairs(records)
        )
        status = reply[0]
        if status == b"duplicate":
            stored = sorted(_text(i) for i in reply[1:])
            raise duplicate_ids(session_id, len(stored), len(records), stored[0])
        if status == b"conflict":
            raise version_conflict(session_id, int(reply[1]), int(expect_version or 0))
        if status == b"not_stored":
            raise not_stored(session_id, str(expect_message))
        return int(reply[1])

    def history(
        self, session_id: str, last: int | None, now: float, full: bool = False
    ) -> Op[list[Stored]]:
        if not full:
            return _stored_list(
                session_id, (yield self._read(session_id, "history", now, _none(last)))
            )
        out = _full_list(session_id, (yield self._read(session_id, "full", now, _none(last))))
        return out if last is None else out[len(out) - min(last, len(out)) :]

    def chain(
        self, session_id: str, head: int, base: int, last: int | None, now: float
    ) -> Op[list[Stored] | None]:
        reply = yield self._read(session_id, "chain", now, str(head), str(base), _none(last))
        return None if reply is None else _stored_list(session_id, reply)

    def info(self, session_id: str, now: float) -> Op[SessionInfo | None]:
        reply = yield self._read(session_id, "info", now)
        return None if reply is None else _info(session_id, reply)[0]

    def pop(self, session_id: str, w: Write) -> Op[Stored | None]:
        """Read the message pop would hide (the context view's newest) and decode it,
        then pop it if it is still the one (its SHA-1): a message that cannot be
        returned raises with nothing popped. Two round trips."""
        while True:
            shown = _stored_list(session_id, (yield self._read(session_id, "history", w.now, "1")))
            if not shown:
                return None
            depth, body = shown[0]
            decode_message(session_id, depth, body)
            checked = hashlib.sha1(body.encode("utf-8")).hexdigest()
            reply = yield from self._write(session_id, "pop", w, checked)
            damage = _corrupt(session_id, reply)
            if damage:
                raise damage
            if reply is None:
                return None
            if reply[0] != b"moved":
                return _stored(session_id, reply[0], reply[1])

    def summarize(
        self, session_id: str, record: Record, through: str, expect_version: int | None, w: Write
    ) -> Op[int]:
        yield from self._vectors_first([record])
        reply = yield from self._write(
            session_id, "summarize", w, _none(expect_version), through, record.id, record.body
        )
        damage = _corrupt(session_id, reply)
        if damage:
            raise damage
        status = reply[0]
        if status == b"ok":
            return int(reply[1])
        if status == b"conflict":
            raise version_conflict(session_id, int(reply[1]), int(expect_version or 0))
        if status == b"duplicate":
            raise duplicate_ids(session_id, 1, 1, record.id)
        error = {
            b"unknown": unknown_through,
            b"hidden": hidden_through,
            b"summarized": summarized_through,
        }[status]
        raise error(session_id, through)

    def trim(self, session_id: str, keep_last: int, op: str, w: Write) -> Op[int]:
        reply = yield from self._write(session_id, "trim", w, str(keep_last), op)
        return int(reply)

    def snapshot(self, session_id: str, name: str, w: Write) -> Op[Snapshot]:
        reply = yield from self._write(session_id, "snapshot", w, name)
        if reply[0] == b"exists":
            raise snapshot_exists(session_id, name)
        return _snapshot(session_id, name, reply[1])

    def snapshots(self, session_id: str, now: float) -> Op[list[Snapshot]]:
        reply = yield self._read(session_id, "snapshots", now)
        numbered = [
            _numbered_snapshot(session_id, _text(reply[i]), reply[i + 1])
            for i in range(1, len(reply), 2)
        ]
        return [
            check_snapshot(session_id, snap, reply[0])
            for _, snap in sorted(numbered, key=lambda pair: pair[0])
        ]

    def rollback(self, session_id: str, name: str, w: Write) -> Op[Snapshot]:
        reply = yield from self._write(
            session_id, "rollback", w, name, f"{AUTO_PREFIX}pre-rollback@v"
        )
        if reply[0] == b"missing":
            raise snapshot_missing(session_id, name)
        if reply[0] == b"damaged":
            raise damaged_snapshot(session_id, name)
        return _snapshot(session_id, _text(reply[1]), reply[2])

    def fork(self, session_id: str, new_id: str, at: str | None, w: Write) -> Op[None]:
        source = yield self._read(session_id, "fork_read", w.now, _none(at))
        damage = _corrupt(session_id, source)
        if damage:
            raise damage
        if source[0] == b"damaged":
            raise damaged_snapshot(session_id, str(at))
        missing = source[0] == b"missing"
        summary: list[str | bytes] = (
            [b"", b"", "0"] if missing else [source[1], source[2], str(source[3])]
        )
        reply = yield from self._write(
            new_id, "fork", w, session_id, _none(at), "1" if missing else "", *summary, *source[4:]
        )
        if reply[0] == b"conflict":
            raise session_exists(new_id)
        if reply[0] == b"missing":
            raise snapshot_missing(session_id, str(at))

    def log(self, session_id: str, now: float) -> Op[list[Event]]:
        reply = yield self._read(session_id, "log", now)
        return [_event(session_id, i, value) for i, value in enumerate(reply)]

    def delete(self, session_id: str, now: float) -> Op[bool]:
        reply = yield from self._written(session_id, ["delete", _number(now)])
        return bool(reply)

    def _scan(self) -> Op[dict[str, bytes]]:
        """Every session in the database: id -> meta key."""
        keys = yield Scan(self.layout.pattern)
        found = {}
        for key in keys:
            session_id = self.layout.session_id(key)
            if session_id is not None:
                found[session_id] = key
        return found

    def sessions(self, now: float) -> Op[list[str]]:
        found = list((yield from self._scan()).items())
        live = []
        for start in range(0, len(found), _FETCH_BATCH):
            batch = found[start : start + _FETCH_BATCH]
            replies = yield Fetch([key for _, key in batch])
            for (session_id, _), (head, expires) in zip(batch, replies, strict=True):
                if head is not None and (expires is None or float(expires) > now):
                    live.append(session_id)
        return sorted(live)

    def sessions_page(self, query: PageQuery, now: float) -> Op[list[Listed]]:
        """From the session index, O(log sessions + page) (a ``match`` filters the
        index in the server: O(sessions) then); on a cluster, after settling the
        writes whose index update never came (docs/redis.md, "Listing sessions")."""
        if self._cluster:
            yield from self._settle(now)
        keys = [self._ready, self._index[ORDERS.index(query.order)]]
        position: list[str | bytes] = []
        if query.after is not None:
            key, after = query.after
            position = ["" if key is None else _number(key), after]
        listed: list[Listed] = []
        while len(listed) < query.limit:
            reply = yield Eval(
                INDEX,
                keys,
                [
                    "desc" if query.descending else "",
                    str(query.limit - len(listed)),
                    query.match,
                    str(_MATCH_BUDGET),
                    *position,
                ],
            )
            if not reply[0]:
                yield from self._build_index(now)
                continue
            last, score, found = reply[1:]
            listed += yield from self._verified(query.order, found, now)
            if not last:
                break
            position = ["" if query.order == "id" else score, last]
        return listed

    def _verified(self, order: str, found: list[bytes], now: float) -> Op[list[Listed]]:
        """The sessions of ``found`` (the index's ids, each followed by its score) that
        are live and scored as their entry says. The others' entries are stale
        (expired by TTL, written by a client that kept no index, or on a cluster being
        written right now): they are set right, from the session as it is, and left
        out."""
        ids = [_text(sid) for sid in found[::2]]
        replies = yield Batch([self._read(sid, "info", now) for sid in ids])
        listed: list[Listed] = []
        stale = []
        for sid, score, reply in zip(ids, found[1::2], replies, strict=True):
            if reply is not None:
                info, times = _info(sid, reply)
                key = key_of(info, order, times)
                if key is None or key == float(score):
                    listed.append((info, key))
                    continue
            stale.append(sid)
        if stale:
            yield from self._reindex(stale, now)
        return listed

    def _reindex(
        self,
        ids: Sequence[str],
        now: float,
        fences: dict[str, int] | None = None,
        generations: Sequence[bytes] = (),
    ) -> Op[None]:
        """Index the sessions ``ids`` as they are (unindex those gone or expired). On a
        cluster each script first raises the session's fence to ``fences[id]``, then
        the index takes the entries and clears ``generations``."""
        if not self._cluster:
            yield Batch(
                [Eval(WRITE, self._write_keys(sid), ["reindex", _number(now)]) for sid in ids]
            )
            return
        fences = fences or {}
        replies = yield Batch(
            [
                Eval(WRITE, self._write_keys(sid), [str(fences.get(sid, 0)), "fence", _number(now)])
                for sid in ids
            ]
        )
        yield self._apply(
            generations,
            [(sid, reply[1]) for sid, reply in zip(ids, replies, strict=True)],
            _number(now),
        )

    def _settle(self, now: float) -> Op[None]:
        """Settle the cluster's pending writes: writes begun whose index update has
        not come, because their writer stopped (or is still at it). Each session's
        fence is raised to its last generation begun, so none of them can land
        later; then the session is indexed as it is and those generations cleared."""
        pending = yield Command(("HGETALL", self.layout.hint[len(ORDERS)]))
        if not pending:
            return
        fences: dict[str, int] = {}
        for generation, sid in pending.items():
            session_id = _text(sid)
            fences[session_id] = max(fences.get(session_id, 0), int(generation))
        yield from self._reindex(list(fences), now, fences, list(pending))

    def _build_index(self, now: float) -> Op[None]:
        """Index every session of a store written without the index. On a single
        server in steps of one ``SCAN`` call: each step is saved, so a build that
        stops goes on where it stopped the next time; on a cluster from one scan of
        every primary, in batches. Writes meanwhile index what they write."""
        if self._cluster:
            ids = list((yield from self._scan()))
            for start in range(0, len(ids), _BUILD_BATCH):
                yield from self._reindex(ids[start : start + _BUILD_BATCH], now)
            yield Command(("SET", self._ready, "1"))
            return
        saved = yield Command(("GET", self.layout.indexing))
        cursor = b"0" if saved is None else saved
        while True:
            cursor, keys = yield Command(
                ("SCAN", cursor, "MATCH", self.layout.pattern, "COUNT", str(_BUILD_BATCH))
            )
            ids = [sid for sid in map(self.layout.session_id, keys) if sid is not None]
            if ids:
                yield from self._reindex(ids, now)
            if int(cursor) == 0:
                break
            yield Command(("SET", self.layout.indexing, cursor))
        yield Command(("DEL", self.layout.indexing))
        yield Command(("SET", self._ready, "1"))

    def _prune(self, now: float) -> Op[None]:
        """Unindex every session that expired before ``now``."""
        while True:
            ids = yield Command(
                (
                    "ZRANGEBYSCORE",
                    self._index[-1],
                    "-inf",
                    f"({_number(now)}",
                    "LIMIT",
                    "0",
                    str(_BUILD_BATCH),
                )
            )
            if ids:
                yield from self._reindex([_text(sid) for sid in ids], now)
            if len(ids) < _BUILD_BATCH:
                return

    def compact(
        self, keep_events: int | None, now: float, batch: int, progress: Progress | None
    ) -> Op[CompactStats]:
        """One script per session, each atomic on its own: a writer waits for one
        session's step at most. ``progress`` is called every ``batch`` sessions."""
        found = sorted((yield from self._scan()))
        stats = CompactStats()
        for done, session_id in enumerate(found, 1):
            reply = yield from self._written(
                session_id, ["compact", _number(now), _none(keep_events)]
            )
            damage = _corrupt(session_id, reply)
            if damage:
                raise damage
            if reply[0] == b"damaged":
                raise (
                    damaged_snapshot(session_id, _text(reply[2]))
                    if reply[1] == b"snapshot"
                    else CorruptRecordError(
                        session_id, None, f"event {int(reply[2])} of the log cannot be decoded"
                    )
                )
            stats += CompactStats(*(int(r) for r in reply))
            if progress is not None and (done % batch == 0 or done == len(found)):
                yield Callback(progress, CompactProgress(done, len(found), stats))
        yield from self._prune(now)
        return stats
