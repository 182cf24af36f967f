"""The Redis backend (``redis://``, ``rediss://``, ``redis+unix://``), sync and async.

Every operation on a session is one call of a Lua script run with ``EVALSHA`` (the
script text is sent only after ``NOSCRIPT``; two scripts, reads and writes, each
dispatching on the operation it is given; a third reads the session index, a fourth
keeps it on a cluster): atomic on the server, one round trip (on a cluster a write is
three: docs/redis.md), no read-modify-write in Python. The logic, keys and scripts
live in :mod:`memvault.backends.redis.ops`; this module only sends its requests, through
redis-py (sync) or ``redis.asyncio`` (async), and maps driver errors:

* nothing was sent (connection refused, auth failure, server loading, cluster
  down): :class:`~memvault.errors.BackendUnavailableError`;
* the connection failed or timed out after the command was sent:
  :class:`~memvault.errors.OutcomeUnknownError` (retrying an append is safe);
* any other server error (out of memory included): :class:`~memvault.errors.BackendError`.

redis-py's own retries are switched off: a command retried after a timeout could
apply twice (a second ``pop``). Needs Redis 7.0 or later (flagged scripts).

Options (keywords, or query parameters of the URL; keywords win):

* ``prefix`` (default ``"memvault"``): first part of every key; no braces.
* ``cluster`` (default false; ``?cluster=true``): talk to a Redis Cluster.
* ``socket_timeout`` (default 10 s), ``socket_connect_timeout`` (default 5 s),
  ``max_connections`` (default unbounded).
* ``wait_replicas`` (default 0) and ``wait_timeout`` (default 1 s): after each
  write, wait for that many replicas to acknowledge it (``WAIT``), else raise
  :class:`~memvault.errors.OutcomeUnknownError`; see :mod:`memvault.backends.redis.wait`.
  Not with ``cluster``.

Also accepted in the URL query and handed to redis-py: ``db``, ``client_name``,
``health_check_interval``, ``socket_keepalive`` and the ``ssl_*`` settings.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import SplitResult, unquote_plus, urlsplit

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.retry
import redis.cluster
import redis.retry
from redis.asyncio.cluster import PipelineCommand
from redis.backoff import NoBackoff
from redis.exceptions import (
    AuthenticationError,
    BusyLoadingError,
    ClusterDownError,
    MaxConnectionsError,
    NoScriptError,
    RedisClusterException,
    RedisError,
    TryAgainError,
)

from memvault.backends.base import AsyncBackend, Backend
from memvault.backends.driven import AsyncDriven, Driven, Op
from memvault.backends.redis import wait as redis_wait
from memvault.backends.redis.ops import (
    FETCH_FIELDS,
    WRITE,
    Afterward,
    Batch,
    Command,
    Eval,
    Layout,
    Operations,
    Request,
    Scan,
)
from memvault.backends.url import boolean, read_options, redact
from memvault.errors import (
    BackendError,
    BackendUnavailableError,
    ConfigurationError,
    OutcomeUnknownError,
)
from memvault.model import (
    check_seconds,
)
from memvault.sansio import drive, drive_async

T = TypeVar("T")

DEFAULTS: dict[str, Any] = {
    "prefix": "memvault",
    "cluster": False,
    "socket_timeout": 10.0,
    "socket_connect_timeout": 5.0,
    "max_connections": None,
    "wait_replicas": 0,
    "wait_timeout": 1.0,
}
# memvault's own options, and how to read their text in a URL's query.
OPTIONS: dict[str, Callable[[str], Any]] = {
    "prefix": str,
    "cluster": boolean,
    "socket_timeout": float,
    "socket_connect_timeout": float,
    "max_connections": int,
    "wait_replicas": int,
    "wait_timeout": float,
}
# URL query parameters handed to redis-py as they are.
DRIVER_QUERY = frozenset(
    {
        "db",
        "client_name",
        "health_check_interval",
        "socket_keepalive",
        "ssl_cert_reqs",
        "ssl_ca_certs",
        "ssl_ca_path",
        "ssl_certfile",
        "ssl_keyfile",
        "ssl_check_hostname",
    }
)
_SCHEMES = {"redis": "redis", "rediss": "rediss", "redis+unix": "unix"}
_DRIVER_ERRORS = (RedisError, RedisClusterException)


@dataclass(frozen=True)
class RedisSettings:
    """A parsed store URL: the URL redis-py gets, and memvault's own options.

    Attributes:
        url: the URL for redis-py, memvault's query parameters removed.
        shown: the URL as given, password redacted (for errors and repr).
        prefix: the key prefix.
        cluster: whether to use the cluster client.
        client: keyword options for the redis-py client.
        wait: replicas to wait for after each write, if any.
    """

    url: str
    shown: str
    prefix: str
    cluster: bool
    client: dict[str, Any] = field(default_factory=dict)
    wait: redis_wait.Wait | None = None


def settings(url: str, **options: Any) -> RedisSettings:
    """Parse a store URL and options; raises ConfigurationError on anything unknown."""
    shown = redact(url)
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ConfigurationError(f"cannot parse the Redis URL {shown!r}: {exc}") from exc
    scheme = _SCHEMES.get(parts.scheme.lower())
    if scheme is None:
        raise ConfigurationError(f"{shown}: not a redis://, rediss:// or redis+unix:// URL")
    if not _port_readable(parts):
        raise ConfigurationError(
            f"{shown}: the port is not a number (a '#', '?' or '/' in the password must "
            "be percent-encoded)"
        )
    given = read_options(
        url, parts.query, OPTIONS, options, backend="Redis", passed_on=DRIVER_QUERY
    )
    merged = {**DEFAULTS, **given.merged}
    _check(shown, merged)
    passed = given.passed_on
    databases = [parts.path.strip("/")] if scheme != "unix" else []
    databases += [unquote_plus(p.partition("=")[2]) for p in passed if p.startswith("db=")]
    for database in databases:
        if database and not re.fullmatch("[0-9]+", database):
            raise ConfigurationError(
                f"{shown}: the database is a number (redis://host:port/0), not {database!r}"
            )
    if merged["cluster"] and (
        scheme == "unix"
        or parts.path.strip("/") not in ("", "0")
        or any(p.partition("=")[0] == "db" for p in passed)
    ):
        raise ConfigurationError(f"{shown}: a cluster is reached over TCP and has database 0 only")
    query_text = f"?{'&'.join(passed)}" if passed else ""
    driver_url = f"{scheme}://{parts.netloc}{parts.path}{query_text}"
    # RESP2: plain replies, and redis-py then checks a pooled connection before
    # reusing it (with RESP3 maintenance notifications it does not), so a command
    # is not written into a connection the server already closed.
    client = {"protocol": 2}
    client.update(
        {
            k: merged[k]
            for k in ("socket_timeout", "socket_connect_timeout", "max_connections")
            if merged[k] is not None
        }
    )
    return RedisSettings(
        driver_url,
        shown,
        merged["prefix"],
        merged["cluster"],
        client,
        redis_wait.from_options(merged, shown),
    )


def _port_readable(parts: SplitResult) -> bool:
    """Whether the URL's port parses, as redis-py parses it. urllib's error quotes the
    "port", which is the password's start when an unencoded "#", "?" or "/" in it
    ends the host part early: it must never reach an error (not even as a context)."""
    try:
        parts.port  # noqa: B018 - the property parses it
    except ValueError:
        return False
    return True


def _check(shown: str, merged: dict[str, Any]) -> None:
    Layout(merged["prefix"])
    if not isinstance(merged["cluster"], bool):
        raise ConfigurationError(f"{shown}: cluster must be True or False")
    for name in ("socket_timeout", "socket_connect_timeout"):
        if merged[name] is not None:
            check_seconds(name, merged[name], where=f"{shown}: ")
    value = merged["max_connections"]
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigurationError(f"{shown}: max_connections must be an integer >= 1 or None")


def translate(exc: Exception, shown: str) -> BackendError:
    """The memvault error for a driver error (which the caller chains as __cause__)."""
    message = f"Redis at {shown}: {type(exc).__name__}: {exc}"
    not_sent = (
        AuthenticationError,
        BusyLoadingError,
        MaxConnectionsError,
        ClusterDownError,
        TryAgainError,
        RedisClusterException,
    )
    lost = (redis.ConnectionError, redis.TimeoutError)
    # redis-py says "Error 111 connecting to ..." / "Timeout connecting to server" only
    # while opening a connection: the command was not sent.
    if isinstance(exc, not_sent) or (isinstance(exc, lost) and "connecting to" in str(exc)):
        return BackendUnavailableError(f"{message} (nothing was applied)")
    if isinstance(exc, lost):
        return OutcomeUnknownError(
            f"{message} (the command may or may not have been applied; retrying an append "
            f"with the same messages is safe)"
        )
    return BackendError(message)


def _connect(make: Callable[[], T], shown: str) -> T:
    try:
        return make()
    except _DRIVER_ERRORS as exc:
        raise translate(exc, shown) from exc
    except ValueError as exc:  # redis-py's URL parser
        raise ConfigurationError(f"{shown}: {exc}") from exc


def _scan_targets(client: Any) -> list[dict[str, Any]]:
    """One SCAN per primary on a cluster, one at a time (the cluster clients' own
    fan-out leaves tasks behind when a node fails); a single SCAN otherwise."""
    if isinstance(client, (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster)):
        return [{"target_nodes": node} for node in client.get_primaries()]
    return [{}]


def _pipeline(client: Any, batch: Batch) -> Any:
    pipe = client.pipeline(transaction=False)
    for e in batch.evals:
        pipe.evalsha(e.script.sha, len(e.keys), *e.keys, *e.args)
    return pipe


def _replies(batch: Batch, replies: list[Any]) -> list[Any] | None:
    """The replies, or None if a script was not loaded (then load it and retry)."""
    if any(isinstance(r, NoScriptError) for r in replies):
        return None
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies


def _evals(client: Any, batch: Batch) -> list[Any]:
    """A Batch in one pipeline; after NOSCRIPT, the scripts are loaded and it runs again
    (a Batch holds reads, and scripts that index a session as it is: running one twice
    changes nothing)."""
    replies = _replies(batch, _pipeline(client, batch).execute(raise_on_error=False))
    if replies is None:
        for script in {e.script for e in batch.evals}:
            client.script_load(script.text)
        replies = _pipeline(client, batch).execute()
    return replies


# The async twin of _evals: a function cannot both await and not.
async def _evals_async(client: Any, batch: Batch) -> list[Any]:
    replies = _replies(batch, await _pipeline(client, batch).execute(raise_on_error=False))
    if replies is None:
        for script in {e.script for e in batch.evals}:
            await client.script_load(script.text)
        replies = await _pipeline(client, batch).execute()
    return replies


@dataclass(frozen=True)
class _Part:
    """The scripts of a Batch that one cluster primary holds: ``client`` pipelines to
    that primary alone; ``where`` are their places in the Batch."""

    client: Any
    batch: Batch
    where: list[int]


def _parts(
    batch: Batch, client_of: Callable[[Any], Any], node_of: Callable[[str], Any]
) -> list[_Part]:
    """A cluster's Batch split by the primary that holds each script's keys (the cluster
    clients' pipelines refuse scripts): one pipeline per primary, not one round trip
    per script. A slot that moves meanwhile answers MOVED: a BackendError."""
    groups: dict[str, tuple[Any, list[Eval], list[int]]] = {}
    for i, e in enumerate(batch.evals):
        node = node_of(e.keys[0])
        group = groups.setdefault(node.name, (node, [], []))
        group[1].append(e)
        group[2].append(i)
    return [_Part(client_of(node), Batch(evals), where) for node, evals, where in groups.values()]


def _merged(batch: Batch, parts: list[tuple[_Part, list[Any]]]) -> list[Any]:
    replies: list[Any] = [None] * len(batch.evals)
    for part, got in parts:
        for i, reply in zip(part.where, got, strict=True):
            replies[i] = reply
    return replies


class _NodePipeline:
    """One primary of ``redis.asyncio``'s cluster client, as :func:`_evals_async` uses
    a client: a pipeline of scripts on that node (the sync cluster client has a plain
    client per node, ``get_redis_connection``)."""

    def __init__(self, node: Any) -> None:
        self._node, self._commands = node, []  # type: ignore[var-annotated]

    def pipeline(self, transaction: bool) -> _NodePipeline:
        return _NodePipeline(self._node)

    def evalsha(self, *args: Any) -> None:
        self._commands.append(PipelineCommand(len(self._commands), "EVALSHA", *args))

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        await self._node.execute_pipeline(self._commands)
        replies = [c.result for c in self._commands]
        errors = [r for r in replies if isinstance(r, Exception)]
        if errors and raise_on_error:
            raise errors[0]
        return replies

    async def script_load(self, text: str) -> Any:
        return await self._node.execute_command("SCRIPT", "LOAD", text)


class RedisBackend(Driven):
    """The synchronous backend: one redis-py client (thread-safe, pooled)."""

    _ops: Operations

    def __init__(self, config: RedisSettings) -> None:
        self._shown, self._wait = config.shown, config.wait
        self._ops = Operations(Layout(config.prefix), cluster=config.cluster)
        self._cluster = config.cluster
        kind = redis.cluster.RedisCluster if config.cluster else redis.Redis
        no_retry = redis.retry.Retry(NoBackoff(), 0)
        self._client: Any = _connect(
            lambda: kind.from_url(config.url, retry=no_retry, **config.client), config.shown
        )
        self._closed = False

    def __repr__(self) -> str:
        return f"RedisBackend({self._shown!r})"

    def _send(self, request: Request) -> Any:
        if isinstance(request, Afterward):
            try:
                return self._send(request.eval)
            except BackendError:
                return None
        client = self._client
        try:
            if isinstance(request, Eval) and self._wait and request.script is WRITE:
                return redis_wait.send(client, request, self._wait, self._shown)
            if isinstance(request, Eval):
                keys = request.keys
                try:
                    return client.evalsha(request.script.sha, len(keys), *keys, *request.args)
                except NoScriptError:
                    return client.eval(request.script.text, len(keys), *keys, *request.args)
            if isinstance(request, Scan):
                return [
                    key
                    for target in _scan_targets(client)
                    for key in client.scan_iter(match=request.pattern, count=1000, **target)
                ]
            if isinstance(request, Command):
                return client.execute_command(*request.args)
            if isinstance(request, Batch):
                if self._cluster:
                    return _merged(
                        request,
                        [
                            (part, _evals(part.client, part.batch))
                            for part in _parts(
                                request, client.get_redis_connection, client.get_node_from_key
                            )
                        ],
                    )
                return _evals(client, request)
            pipe = client.pipeline(transaction=False)
            for key in request.keys:
                pipe.hmget(key, FETCH_FIELDS)
            return pipe.execute()
        except _DRIVER_ERRORS as exc:
            raise translate(exc, self._shown) from exc

    def _run(self, op: Op[T]) -> T:
        if self._closed:  # redis-py's client would connect again
            raise BackendUnavailableError("the store is closed")
        return drive(op, self._send)

    def close(self) -> None:
        self._closed = True
        self._client.close()


_PARENTS: list[Any] = []  # a fork's child: the parent's async clients (_own_client)


class AsyncRedisBackend(AsyncDriven):
    """The asynchronous backend: one ``redis.asyncio`` client, used from one event loop."""

    _ops: Operations

    def __init__(self, config: RedisSettings) -> None:
        self._shown, self._wait = config.shown, config.wait
        self._ops = Operations(Layout(config.prefix), cluster=config.cluster)
        self._cluster = config.cluster
        kind = redis.asyncio.cluster.RedisCluster if config.cluster else redis.asyncio.Redis
        no_retry = redis.asyncio.retry.Retry(NoBackoff(), 0)
        self._new_client = lambda: kind.from_url(config.url, retry=no_retry, **config.client)
        self._client: Any = _connect(self._new_client, config.shown)
        self._pid = os.getpid()
        self._closed = False

    def __repr__(self) -> str:
        return f"AsyncRedisBackend({self._shown!r})"

    def _own_client(self) -> None:
        """In a fork's child: a client of its own (redis-py's sync pools do this by
        themselves; ``redis.asyncio``'s connections stay bound to the parent's event
        loop and sockets). The parent's is kept, never used or closed here."""
        _PARENTS.append(self._client)
        self._client, self._pid = _connect(self._new_client, self._shown), os.getpid()

    async def _send(self, request: Request) -> Any:
        if isinstance(request, Afterward):
            try:
                return await self._send(request.eval)
            except BackendError:
                return None
        client = self._client
        try:
            if self._cluster:
                # Before its slot map is loaded, redis.asyncio's cluster client sends
                # keyed commands to a random node; five MOVED replies then make it
                # close every connection, under other tasks' commands. Loading the
                # map first (a no-op once loaded) avoids both.
                await client.initialize()
            if isinstance(request, Eval) and self._wait and request.script is WRITE:
                return await redis_wait.send_async(client, request, self._wait, self._shown)
            if isinstance(request, Eval):
                keys = request.keys
                try:
                    return await client.evalsha(request.script.sha, len(keys), *keys, *request.args)
                except NoScriptError:
                    return await client.eval(request.script.text, len(keys), *keys, *request.args)
            if isinstance(request, Scan):
                return [
                    key
                    for target in _scan_targets(client)
                    async for key in client.scan_iter(match=request.pattern, count=1000, **target)
                ]
            if isinstance(request, Command):
                return await client.execute_command(*request.args)
            if isinstance(request, Batch):
                if self._cluster:
                    return _merged(
                        request,
                        [
                            (part, await _evals_async(part.client, part.batch))
                            for part in _parts(request, _NodePipeline, client.get_node_from_key)
                        ],
                    )
                return await _evals_async(client, request)
            pipe = client.pipeline(transaction=False)
            for key in request.keys:
                pipe.hmget(key, FETCH_FIELDS)
            return await pipe.execute()
        except _DRIVER_ERRORS as exc:
            raise translate(exc, self._shown) from exc

    async def _run(self, op: Op[T]) -> T:
        if self._closed:  # as RedisBackend._run
            raise BackendUnavailableError("the store is closed")
        if self._pid != os.getpid():
            self._own_client()
        return await drive_async(op, self._send)

    async def close(self) -> None:
        self._closed = True
        if self._pid != os.getpid():
            self._own_client()
        await self._client.aclose()


def open_backend(url: str, **options: Any) -> Backend:
    """Open ``redis://``, ``rediss://`` or ``redis+unix://`` for the sync API."""
    return RedisBackend(settings(url, **options))


def open_async_backend(url: str, **options: Any) -> AsyncBackend:
    """Open ``redis://``, ``rediss://`` or ``redis+unix://`` for the async API."""
    return AsyncRedisBackend(settings(url, **options))
