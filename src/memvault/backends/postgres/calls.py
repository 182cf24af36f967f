"""The PostgreSQL backend's operations, without I/O: shared by the sync and async faces.

Each operation is a generator, as Redis's are (:mod:`memvault.backends.redis.ops`,
run by :mod:`memvault.sansio`): it yields :class:`Call` requests, each one statement
(``SELECT * FROM <schema>.<function>(...)``, one round trip) with its arguments,
how its rows become the reply, and how its domain errors (custom SQLSTATEs raised
by the server-side functions) become memvault's, with the engine's exact messages;
it is sent each call's parsed reply and returns the protocol's result. Every
operation but ``search`` and ``compact`` is one call. :func:`failure` classifies
every other driver error. The backend (:mod:`memvault.backends.postgres.backend`)
only sends calls.

Strings that may hold NUL (session ids, snapshot names, message ids, writer
labels) travel and are stored as their UTF-8 bytes (``bytea``), so any string
is kept exactly and never compared as anything but itself.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

import psycopg

from memvault import errors
from memvault.backends import records
from memvault.backends.base import Match, Stored, Write
from memvault.backends.postgres.migrations import quote
from memvault.errors import (
    BackendError,
    BackendUnavailableError,
    MemvaultError,
    OutcomeUnknownError,
)
from memvault.messages import Record, decode_message
from memvault.model import (
    COMPACT_STEP_NODES,
    CompactProgress,
    CompactStats,
    Event,
    Progress,
    SessionInfo,
    Snapshot,
    to_datetime,
    utc,
)
from memvault.paging import Listed, PageQuery
from memvault.sansio import Callback, Operation
from memvault.words import body_words

T = TypeVar("T")
Rows = list[tuple[Any, ...]]
Op = Operation["Call[Any] | Callback", T]
"""An operation: run by :func:`memvault.sansio.drive` (or ``drive_async``)."""
Refuse = Callable[[str, str], MemvaultError | None]

# Each function's argument types, in order (the casts pin the overload and NULL types).
_SIGNATURES: dict[str, tuple[str, ...]] = {
    "append": ("bytea", "bytea[]", "text[]", "bigint", "bytea", "float8", "float8"),
    "append_after": ("bytea", "bytea[]", "text[]", "bigint", "bytea", "bytea", "float8", "float8"),
    "history": ("bytea", "bigint", "float8"),
    "full_history": ("bytea", "bigint", "float8"),
    "summarize": ("bytea", "bytea", "bytea", "text", "bigint", "bytea", "float8", "float8"),
    "chain": ("bytea", "bigint", "bigint", "bigint", "float8"),
    "info": ("bytea", "float8"),
    "pop": ("bytea", "bytea", "float8", "float8"),
    "trim": ("bytea", "bigint", "text", "bytea", "float8", "float8"),
    "snapshot": ("bytea", "bytea", "bytea", "float8", "float8"),
    "snapshots": ("bytea", "float8"),
    "rollback": ("bytea", "bytea", "bytea", "float8", "float8"),
    "fork": ("bytea", "bytea", "bytea", "bytea", "float8", "float8"),
    "log": ("bytea", "float8"),
    "delete": ("bytea", "float8"),
    "sessions": ("float8",),
    "sessions_page": ("text", "bool", "bytea", "float8", "bytea", "int8", "float8"),
    "compact_plan": (),
    "compact_step": ("bigint", "bigint", "bigint", "bigint", "bigint", "float8"),
    "vector_space": (),
    "set_vector_space": ("text", "bool"),
    "get_vectors": ("text[]",),
    "put_vectors": ("text[]", "bytea[]"),
    "vector_keys": (),
    "drop_vectors": ("text[]",),
    "node_bodies": ("bytea", "float8"),
    "search_pending": ("int8",),
    "search_index": (
        "int8[]",
        "int8[]",
        "bool[]",
        "float8[]",
        "int4[]",
        "int4[]",
        "text[]",
        "int4[]",
    ),
    "search": ("bytea[]", "text[]", "int4", "bool", "float8"),
}

SEARCH_BATCH = 2000
"""How many pending nodes one search_index call indexes."""

# The SQLSTATEs of the server-side functions' domain errors.
VERSION_CONFLICT = "MV001"
DUPLICATE_IDS = "MV002"
SNAPSHOT_EXISTS = "MV003"
SNAPSHOT_MISSING = "MV004"
SESSION_EXISTS = "MV005"
THROUGH_UNKNOWN = "MV006"
THROUGH_HIDDEN = "MV007"
THROUGH_SUMMARIZED = "MV008"
BROKEN_CHAIN = "MV010"
NOT_STORED = "MV012"
DAMAGED_SNAPSHOT = "MV013"

# Server errors that roll the transaction back and may pass if retried: deadlock and
# serialization failures, lack of resources, lock and statement timeouts, shutdowns.
_TRANSIENT = ("08", "40", "53", "55P03", "57")

# A prepared statement missing, or taken by another statement, on the server connection:
# the symptom of a pooler in transaction mode (PgBouncer before 1.21) that hands each
# transaction another server connection. "bind message supplies 7 parameters, but
# prepared statement ... requires 5" (08P01) is the same, met by another client's.
_PREPARED_ELSEWHERE = ("26000", "42P05")


def _no_refusals(state: str, detail: str) -> MemvaultError | None:
    return None


def _damage(session_id: str, refuse: Refuse = _no_refusals) -> Refuse:
    """``refuse``, and the damage the functions report (DETAIL: the depth, or a
    damaged snapshot's name in hex) as CorruptRecordError naming ``session_id``."""

    def check(state: str, detail: str) -> MemvaultError | None:
        if state == BROKEN_CHAIN:
            return errors.broken_chain(session_id, int(detail))
        if state == DAMAGED_SNAPSHOT:
            return errors.damaged_snapshot(
                session_id, bytes.fromhex(detail.split(" ")[0]).decode("utf-8", "replace")
            )
        return refuse(state, detail)

    return check


@dataclass(frozen=True)
class Call(Generic[T]):
    """One operation, ready to send.

    Attributes:
        op: the operation's name (for error messages).
        sql: the statement.
        params: its arguments.
        parse: the rows it returns -> the operation's result.
        write: whether it may change the store (decides what a lost connection means).
        refuse: SQLSTATE and detail of a domain error -> the memvault error to raise.
        checked: run in a transaction of its own that commits only once ``parse``
            returned: a write whose result cannot be parsed changes nothing.
    """

    op: str
    sql: str
    params: tuple[Any, ...]
    parse: Callable[[Rows], T]
    write: bool
    refuse: Refuse = field(default=_no_refusals)
    checked: bool = False


def _one(call: Call[T]) -> Op[T]:
    """The operation of one call: its reply is the result."""
    result: T = yield call
    return result


def _utf8(text: str) -> bytes:
    return text.encode("utf-8")


def _optional_utf8(text: str | None) -> bytes | None:
    return None if text is None else _utf8(text)


def _snapshot(session_id: str, r: tuple[Any, ...]) -> Snapshot:
    name = bytes(r[0]).decode("utf-8", "replace")
    # r[7:9], the summary pointer: absent from a schema before version 5
    return records.decoded(
        session_id,
        f"snapshot {name!r}",
        lambda: Snapshot(
            bytes(r[0]).decode("utf-8"), r[1], r[2], r[3], r[4], utc(r[5]), r[6], *r[7:9]
        ),
    )


def _event(session_id: str, r: tuple[Any, ...]) -> Event:
    return records.decoded(
        session_id,
        f"the event of version {r[0]}",
        lambda: Event(
            r[0],
            r[1],
            bytes(r[2]).decode("utf-8"),
            utc(r[3]),
            r[4],
            r[5],
            r[6],
            r[7],
            records.json_object(r[8]),
        ),
    )


def _scalar(rows: Rows) -> Any:
    return rows[0][0]


def _stored(rows: Rows) -> list[Stored]:
    return [(r[0], r[1]) for r in rows]


def _column(rows: Rows) -> list[Any]:
    return [r[0] for r in rows]


def _ignore(rows: Rows) -> None:
    return None


def _row(rows: Rows) -> tuple[Any, ...]:
    return rows[0]


def _store_damage(state: str, detail: str) -> MemvaultError | None:
    """A store-wide call's broken chain (compact, search; DETAIL: the depth, the
    session's name in hex) or damaged snapshot (compact; DETAIL: the snapshot's
    name, the session's name, in hex)."""
    if state == BROKEN_CHAIN:
        depth, name = detail.split(" ")
        return errors.broken_chain(bytes.fromhex(name).decode("utf-8"), int(depth))
    if state == DAMAGED_SNAPSHOT:
        snapshot, name = detail.split(" ")
        return errors.damaged_snapshot(
            bytes.fromhex(name).decode("utf-8"), bytes.fromhex(snapshot).decode("utf-8", "replace")
        )
    return None


def _names(rows: Rows) -> list[str]:
    return sorted(bytes(r[0]).decode("utf-8") for r in rows)


def _listed(rows: Rows) -> list[Listed]:
    """Rows of sessions_page: a session's info, then its key (as float8, which the
    function casts back for an integer order: exact below 2**53)."""
    return [
        (
            SessionInfo(
                bytes(r[0]).decode("utf-8"),
                r[1],
                r[2],
                utc(r[3]),
                utc(r[4]),
                to_datetime(r[5]),
                r[6],
            ),
            r[7],
        )
        for r in rows
    ]


class Calls:
    """The backend protocol's operations on one schema, each a generator of
    :class:`Call` requests.

    Args:
        schema: a name that passed :func:`~memvault.backends.postgres.migrations.check_schema`.
    """

    def __init__(self, schema: str) -> None:
        q = quote(schema)
        # Binary parameters (%b): in text format psycopg escapes every quote of every
        # JSON body in an array, one regex substitution each; in binary the bodies go
        # as they are (an append without fsync: 507 -> 394 µs on the test machine).
        self._sql = {
            name: f"SELECT * FROM {q}.{name}({', '.join(f'%b::{t}' for t in types)})"
            for name, types in _SIGNATURES.items()
        }
        # A write with search vectors: put_vectors and the write in one statement, one
        # transaction (the write's domain error rolls the vectors back too).
        put = self._sql["put_vectors"].removeprefix("SELECT * FROM ")
        for name in ("append", "append_after", "summarize"):
            write = self._sql[name].removeprefix("SELECT * FROM ")
            self._sql[f"{name}+vectors"] = f"SELECT w.* FROM {put} AS v, {write} AS w"

    def _with_vectors(self, call: Call[T], records: Sequence[Record]) -> Call[T]:
        """``call`` storing ``records``' vectors in the same statement, if they have any."""
        items = [r.vector for r in records if r.vector is not None]
        if not items:
            return call
        keys, vecs = [k for k, _ in items], [v for _, v in items]
        return replace(call, sql=self._sql[f"{call.op}+vectors"], params=(keys, vecs, *call.params))

    def vector_space(self) -> Op[str | None]:
        return _one(self._call("vector_space", (), _scalar, write=False))

    def set_vector_space(self, space: str, reset: bool) -> Op[None]:
        return _one(self._call("set_vector_space", (space, reset), _ignore, write=True))

    def get_vectors(self, keys: Sequence[str]) -> Op[dict[str, bytes]]:
        return _one(
            self._call(
                "get_vectors",
                (list(keys),),
                lambda rows: {r[0]: bytes(r[1]) for r in rows},
                write=False,
            )
        )

    def put_vectors(self, items: Sequence[tuple[str, bytes]]) -> Op[None]:
        keys, vectors = [k for k, _ in items], [v for _, v in items]
        return _one(self._call("put_vectors", (keys, vectors), _ignore, write=True))

    def vector_keys(self) -> Op[list[str]]:
        return _one(self._call("vector_keys", (), _column, write=False))

    def drop_vectors(self, keys: Sequence[str]) -> Op[None]:
        return _one(self._call("drop_vectors", (list(keys),), _ignore, write=True))

    def node_bodies(self, session_id: str, now: float) -> Op[list[str]]:
        return _one(self._call("node_bodies", (_utf8(session_id), now), _column, write=False))

    def _call(
        self,
        op: str,
        params: tuple[Any, ...],
        parse: Callable[[Rows], T],
        *,
        write: bool,
        refuse: Refuse = _no_refusals,
    ) -> Call[T]:
        return Call(op, self._sql[op], params, parse, write, refuse)

    @staticmethod
    def _write(w: Write) -> tuple[bytes, float, float | None]:
        return _utf8(w.writer), w.now, w.expires_at

    def append(
        self,
        session_id: str,
        records: Sequence[Record],
        expect_version: int | None,
        expect_message: str | None,
        w: Write,
    ) -> Op[int]:
        def refuse(state: str, detail: str) -> MemvaultError | None:
            if state == DUPLICATE_IDS:
                count, example = detail.split(" ")
                return errors.duplicate_ids(
                    session_id, int(count), len(records), bytes.fromhex(example).decode("utf-8")
                )
            if state == VERSION_CONFLICT and expect_version is not None:
                return errors.version_conflict(session_id, int(detail), expect_version)
            if state == NOT_STORED and expect_message is not None:
                return errors.not_stored(session_id, expect_message)
            return None

        params = (
            _utf8(session_id),
            [_utf8(r.id) for r in records],
            [r.body for r in records],
            expect_version,
        )
        if expect_message is None:
            call = self._call(
                "append", (*params, *self._write(w)), _scalar, write=True, refuse=refuse
            )
        else:
            call = self._call(
                "append_after",
                (*params, _utf8(expect_message), *self._write(w)),
                _scalar,
                write=True,
                refuse=refuse,
            )
        return _one(self._with_vectors(call, records))

    def history(
        self, session_id: str, last: int | None, now: float, full: bool = False
    ) -> Op[list[Stored]]:
        return _one(
            self._call(
                "full_history" if full else "history",
                (_utf8(session_id), last, now),
                _stored,
                write=False,
                refuse=_damage(session_id),
            )
        )

    def summarize(
        self, session_id: str, record: Record, through: str, expect_version: int | None, w: Write
    ) -> Op[int]:
        through_errors = {
            THROUGH_UNKNOWN: errors.unknown_through,
            THROUGH_HIDDEN: errors.hidden_through,
            THROUGH_SUMMARIZED: errors.summarized_through,
        }

        def refuse(state: str, detail: str) -> MemvaultError | None:
            if state in through_errors:
                return through_errors[state](session_id, through)
            if state == DUPLICATE_IDS:
                return errors.duplicate_ids(session_id, 1, 1, record.id)
            if state == VERSION_CONFLICT and expect_version is not None:
                return errors.version_conflict(session_id, int(detail), expect_version)
            return None

        params = (
            _utf8(session_id),
            _utf8(through),
            _utf8(record.id),
            record.body,
            expect_version,
            *self._write(w),
        )
        call = self._call(
            "summarize", params, _scalar, write=True, refuse=_damage(session_id, refuse)
        )
        return _one(self._with_vectors(call, [record]))

    def chain(
        self, session_id: str, head: int, base: int, last: int | None, now: float
    ) -> Op[list[Stored] | None]:
        def parse(rows: Rows) -> list[Stored] | None:
            return None if rows and rows[0][0] is None else _stored(rows)  # (NULL, NULL)

        params = (_utf8(session_id), head, base, last, now)
        return _one(self._call("chain", params, parse, write=False, refuse=_damage(session_id)))

    def info(self, session_id: str, now: float) -> Op[SessionInfo | None]:
        def parse(rows: Rows) -> SessionInfo | None:
            if not rows:
                return None
            version, length, created, updated, expires, *summarized = rows[0]  # schema < 5: no
            return SessionInfo(
                session_id,
                version,
                length,
                utc(created),
                utc(updated),
                to_datetime(expires),
                *summarized,
            )

        return _one(self._call("info", (_utf8(session_id), now), parse, write=False))

    def pop(self, session_id: str, w: Write) -> Op[Stored | None]:
        """Decoded before the commit: a pop whose message cannot be returned changes
        nothing (a retry would pop a second message)."""

        def parse(rows: Rows) -> Stored | None:
            if not rows:
                return None
            decode_message(session_id, rows[0][0], rows[0][1])
            return rows[0][0], rows[0][1]

        call = self._call(
            "pop",
            (_utf8(session_id), *self._write(w)),
            parse,
            write=True,
            refuse=_damage(session_id),
        )
        return _one(replace(call, checked=True))

    def trim(self, session_id: str, keep_last: int, op: str, w: Write) -> Op[int]:
        params = (_utf8(session_id), keep_last, op, *self._write(w))
        return _one(self._call("trim", params, _scalar, write=True))

    def _named(
        self,
        op: str,
        session_id: str,
        name: str,
        w: Write,
        state: str,
        error: Callable[[str, str], MemvaultError],
    ) -> Op[Snapshot]:
        """snapshot and rollback: a write naming a snapshot, returning one, refusing once."""

        def refuse(got: str, detail: str) -> MemvaultError | None:
            return error(session_id, name) if got == state else None

        params = (_utf8(session_id), _utf8(name), *self._write(w))
        return _one(
            self._call(
                op,
                params,
                lambda rows: _snapshot(session_id, rows[0]),
                write=True,
                refuse=_damage(session_id, refuse),
            )
        )

    def snapshot(self, session_id: str, name: str, w: Write) -> Op[Snapshot]:
        return self._named("snapshot", session_id, name, w, SNAPSHOT_EXISTS, errors.snapshot_exists)

    def snapshots(self, session_id: str, now: float) -> Op[list[Snapshot]]:
        return _one(
            self._call(
                "snapshots",
                (_utf8(session_id), now),
                lambda rows: [_snapshot(session_id, r) for r in rows],
                write=False,
                refuse=_damage(session_id),
            )
        )

    def rollback(self, session_id: str, name: str, w: Write) -> Op[Snapshot]:
        return self._named(
            "rollback", session_id, name, w, SNAPSHOT_MISSING, errors.snapshot_missing
        )

    def fork(self, session_id: str, new_id: str, at: str | None, w: Write) -> Op[None]:
        def refuse(state: str, detail: str) -> MemvaultError | None:
            if state == SESSION_EXISTS:
                return errors.session_exists(new_id)
            if state == SNAPSHOT_MISSING and at is not None:
                return errors.snapshot_missing(session_id, at)
            return None

        params = (_utf8(session_id), _utf8(new_id), _optional_utf8(at), *self._write(w))
        call = self._call("fork", params, _ignore, write=True, refuse=_damage(session_id, refuse))
        return _one(call)

    def log(self, session_id: str, now: float) -> Op[list[Event]]:
        def parse(rows: Rows) -> list[Event]:
            return [_event(session_id, r) for r in rows]

        return _one(self._call("log", (_utf8(session_id), now), parse, write=False))

    def delete(self, session_id: str, now: float) -> Op[bool]:
        return _one(self._call("delete", (_utf8(session_id), now), _scalar, write=True))

    def sessions(self, now: float) -> Op[list[str]]:
        return _one(self._call("sessions", (now,), _names, write=False))

    def sessions_page(self, query: PageQuery, now: float) -> Op[list[Listed]]:
        after_key, after = query.after if query.after else (None, None)
        params = (
            query.order,
            query.descending,
            _utf8(query.match),
            after_key,
            _optional_utf8(after),
            query.limit,
            now,
        )
        return _one(self._call("sessions_page", params, _listed, write=False))

    def search(
        self,
        session_ids: Sequence[str] | None,
        terms: Sequence[str],
        k: int,
        include_hidden: bool,
        now: float,
    ) -> Op[list[Match]]:
        """Index the nodes appended since the last search (batches of
        ``SEARCH_BATCH``, each one call, the words counted here), then search (one
        call): an idle index costs one round trip more than the search."""
        while True:
            pending = yield self._call("search_pending", (SEARCH_BATCH,), list, write=False)
            if pending:
                yield self._call("search_index", _postings(pending), _ignore, write=True)
            if len(pending) < SEARCH_BATCH:
                break
        names = None if session_ids is None else [_utf8(i) for i in session_ids]
        found: list[Match] = yield self._call(
            "search",
            (names, list(terms), k, include_hidden, now),
            lambda rows: [Match(r[0].decode(), r[1], r[2], r[3], r[4]) for r in rows],
            write=False,
            refuse=_store_damage,
        )
        return found

    def compact(
        self, keep_events: int | None, now: float, batch: int, progress: Progress | None
    ) -> Op[CompactStats]:
        """Steps of at most ``batch`` sessions, each one call (its own transaction),
        over the sessions stored when it began; ``progress`` after each."""
        total, until = yield self._call("compact_plan", (), _row, write=False)
        after, done, stats = 0, 0, CompactStats()
        while True:
            params = (after, until, batch, COMPACT_STEP_NODES, keep_events, now)
            *removed, took, last = yield self._call(
                "compact_step", params, _row, write=True, refuse=_store_damage
            )
            if last is None:
                return stats
            after, done, stats = last, done + took, stats + CompactStats(*removed)
            if progress is not None:
                yield Callback(progress, CompactProgress(done, total, stats))


def _postings(pending: Rows) -> tuple[Any, ...]:
    """search_index's arguments for the rows of search_pending."""
    docs: list[int] = []
    terms: list[str] = []
    tfs: list[int] = []
    lengths: list[int] = []
    for i, (_, _, body, _, _) in enumerate(pending, 1):
        counts = Counter(body_words(body))
        lengths.append(counts.total())
        docs += [i] * len(counts)
        terms += counts.keys()
        tfs += counts.values()
    return (
        [r[0] for r in pending],
        [r[1] for r in pending],
        [r[3] for r in pending],
        [r[4] for r in pending],
        lengths,
        docs,
        terms,
        tfs,
    )


def failure(exc: psycopg.Error, call: Call[Any], connection_lost: bool) -> MemvaultError:
    """The memvault error for a driver error raised while ``call`` ran.

    Every statement runs alone in autocommit mode, so an error the server reports
    on a live connection means its transaction rolled back: nothing was applied.
    A connection lost after the statement was sent leaves the outcome of a write
    unknown (a read has no outcome to lose).
    """
    state = exc.sqlstate or ""
    reason = reason_of(exc)
    if state in _PREPARED_ELSEWHERE or (state == "08P01" and "prepared statement" in reason):
        reason += (
            " (behind PgBouncer in transaction mode? open the store with prepared_statements=False)"
        )
    refused = call.refuse(state, exc.diag.message_detail or "") if state else None
    if refused is not None:
        return refused
    if connection_lost:
        if call.write:
            return OutcomeUnknownError(
                f"PostgreSQL: the connection was lost during {call.op}, which may or may not "
                f"have been applied (retrying an append with the same messages is safe): {reason}"
            )
        return BackendUnavailableError(
            f"PostgreSQL: the connection was lost during {call.op}: {reason}"
        )
    if state.startswith(_TRANSIENT):
        return BackendUnavailableError(
            f"PostgreSQL: {call.op} failed and was rolled back, nothing was applied: {reason}"
        )
    return BackendError(f"PostgreSQL: {call.op} failed (nothing was applied): {reason}")


def reason_of(exc: psycopg.Error) -> str:
    """The driver error's main message, on one line."""
    text = exc.diag.message_primary or str(exc) or type(exc).__name__
    return " ".join(text.split())
