"""The SQLite backend's connections: one a thread, lent again when the thread ends,
and none carried across a fork; and the write gate its threads queue at."""

from __future__ import annotations

import os
import sqlite3
import threading
import weakref
from typing import Protocol

from memvault.errors import BackendUnavailableError, ConfigurationError

IDLE = 8  # the connections of ended threads a store keeps for the next new ones
_INHERITED: list[sqlite3.Connection] = []  # a fork's child: copies it could not close


class Forkable(Protocol):
    def forked(self) -> None:
        """In a fork's child, before anything else runs there."""


_OPEN: weakref.WeakSet[Forkable] = weakref.WeakSet()  # this process's open stores


def watch(store: Forkable) -> None:
    """Call ``store.forked()`` in the child of every fork, until :func:`forget`."""
    _OPEN.add(store)


def forget(store: Forkable) -> None:
    _OPEN.discard(store)


class Connections:
    """A store's connections: each lent to one thread until it ends, then kept idle
    (up to :data:`IDLE`) for the next new thread. A graph's executor makes new threads
    at every run: each would otherwise open a connection (0.2 ms, and its statements
    compiled again), and keep it until the store closes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.all: set[sqlite3.Connection] = set()  # lent or idle: close() closes them
        self.idle: list[sqlite3.Connection] = []
        self.pid = os.getpid()
        self.closed = False
        self.stuck = False  # a fork's child holding a copy it could not close
        # the connections a call is running on, and how many calls (a search runs a
        # transaction inside its own): each written only by the thread it is lent to
        self.busy: dict[sqlite3.Connection, int] = {}

    def forked(self) -> None:
        """In a fork's child, before anything else runs: close the copies of the
        parent's connections, so that the child's own are the only ones SQLite
        counts. SQLite keeps one record of locks a file for the whole process, and
        the copies' record says the file's locks are held, which the child's kernel
        does not know: a connection opened beside them takes no lock, and the
        parent's close then finds itself the file's last user and deletes its WAL
        under the child's writes. A copy inside a transaction (another thread of the
        parent was in one at the fork) cannot be closed safely: rolling it back
        would change the WAL index the parent's thread is writing. The store then
        refuses to work in the child."""
        self.lock, self.pid = threading.Lock(), os.getpid()  # the old one may be held
        copies, self.all, self.idle, self.busy = self.all, set(), [], {}
        for db in copies:
            if db.in_transaction:
                _INHERITED.append(db)
                self.stuck = True
            else:
                db.close()

    def take(self) -> sqlite3.Connection | None:
        """An idle connection, or None (open one and :meth:`add` it)."""
        with self.lock:
            if self.closed:
                raise BackendUnavailableError("the store is closed")
            if self.stuck:
                raise ConfigurationError(
                    "this process was forked while another thread was inside a SQLite "
                    "transaction on this store: SQLite connections cannot cross a fork, "
                    "and that one could not be closed here; fork when no thread is "
                    "using the store, or use the 'spawn' start method"
                )
            return self.idle.pop() if self.idle else None

    def add(self, db: sqlite3.Connection) -> None:
        with self.lock:
            self.all.add(db)

    def give_back(self, db: sqlite3.Connection) -> None:
        """The finalizer of a thread's :class:`Lease`: keep its connection idle, or
        close it if the store is closed, enough are idle, or a transaction was left
        open on it (a read abandoned half way). One not in ``all`` was closed with the
        store or at a fork. In a fork's child, the parent's threads' leases go
        before :meth:`forked` runs: nothing to do, :meth:`forked` closes them."""
        if self.pid != os.getpid():
            return
        with self.lock:
            if db not in self.all:
                return
            if not self.closed and not db.in_transaction and len(self.idle) < IDLE:
                self.idle.append(db)
                return
            self.all.discard(db)
        db.close()

    def enter(self, db: sqlite3.Connection) -> None:
        """Before a call runs on ``db`` (by the thread it is lent to): marks it in use,
        then raises if the store is closed (a close that did not see the mark has set
        ``closed`` first, and may have closed ``db``)."""
        self.busy[db] = self.busy.get(db, 0) + 1
        if self.closed:
            self.leave(db)
            raise BackendUnavailableError("the store is closed")

    def leave(self, db: sqlite3.Connection) -> None:
        """After the call: the connection of a store closed meanwhile is closed now,
        by its own thread, out of the call."""
        count = self.busy.pop(db) - 1
        if count:
            self.busy[db] = count
        elif self.closed:
            db.close()

    def close(self) -> None:
        """Close every connection no call is running on. One a call is running on
        (in another thread) is closed by that thread when the call ends
        (:meth:`leave`): closing a connection under a running statement crashes the
        interpreter."""
        with self.lock:
            self.closed = True
            quiet = [db for db in self.all if db not in self.busy]
            self.all.clear()
            self.idle.clear()
        for db in quiet:
            db.close()


class WriteGate:
    """One database file's write lock among this process's threads: a writer takes
    it before ``BEGIN IMMEDIATE`` and gives it back after ``COMMIT`` or ``ROLLBACK``
    (:class:`~memvault.backends.sqlite.txn.Transaction`). Threads then queue here,
    each woken as soon as the one before is done, and only other processes' writers
    meet SQLite's busy handler, which sleeps (up to 100 ms at a time) and looks again
    while others take the lock in between: 8 threads appending at once each met it,
    and one in 400-1,600 appends gave up after a busy_timeout of 0.5 s though an
    append takes 0.5 ms. Every store on the file in this process shares the gate
    (:func:`write_gate`)."""

    __slots__ = ("__weakref__", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def enter(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the gate (0: only if it is free)."""
        if not self._lock.acquire(timeout=timeout):
            raise BackendUnavailableError(
                f"SQLite database is locked: other threads of this process wrote to it"
                f" for the whole busy_timeout ({timeout:g} s)"
            )

    def try_enter(self) -> bool:
        return self._lock.acquire(blocking=False)

    def leave(self) -> None:
        self._lock.release()


_GATES: weakref.WeakValueDictionary[tuple[int, int], WriteGate] = weakref.WeakValueDictionary()
_GATES_LOCK = threading.Lock()


def write_gate(path: str) -> WriteGate:
    """The gate of the database file at ``path`` (which exists), shared by every
    store of this process on that file, whatever path names it."""
    stat = os.stat(path)
    key = (stat.st_dev, stat.st_ino)
    with _GATES_LOCK:
        gate = _GATES.get(key)
        if gate is None:
            gate = _GATES[key] = WriteGate()
        return gate


def _forked() -> None:
    """In a fork's child: each open store drops its connections (:meth:`Connections.
    forked`) and the forking thread's lease, so its next call opens its own; the
    gates are new (another thread of the parent may have held one at the fork)."""
    global _GATES_LOCK
    _GATES_LOCK = threading.Lock()
    _GATES.clear()
    for store in list(_OPEN):
        store.forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


class Lease:
    """Kept in a thread's locals only: when the thread ends, it goes, and its finalizer
    gives the thread's connection back (:meth:`Connections.give_back`)."""

    __slots__ = ("__weakref__",)
