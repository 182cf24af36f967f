"""Waiting for replicas after each write: the Redis options ``wait_replicas`` and
``wait_timeout``.

Redis replicates asynchronously: a primary acknowledges a write before any replica
has it, and a failover that promotes a replica loses what the replica had not
received. With ``wait_replicas=N`` every write script is followed, on the same
connection and in the same round trip, by ``WAIT N <wait_timeout in ms>``. When
fewer than N replicas acknowledged the write in time, the call raises
:class:`~memvault.errors.OutcomeUnknownError`: the write is applied on the primary
and may or may not survive a failover (retrying an append with the same messages
is safe). Reads are not affected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.exceptions import NoScriptError

from memvault.backends.redis.ops import Eval
from memvault.errors import ConfigurationError, OutcomeUnknownError
from memvault.model import check_seconds


@dataclass(frozen=True)
class Wait:
    """Wait for ``replicas`` replicas, at most ``timeout`` seconds, after a write."""

    replicas: int
    timeout: float


def from_options(merged: dict[str, Any], shown: str) -> Wait | None:
    """The checked ``wait_replicas`` and ``wait_timeout`` options (None: no waiting)."""
    replicas, timeout = merged["wait_replicas"], merged["wait_timeout"]
    if isinstance(replicas, bool) or not isinstance(replicas, int) or not 0 <= replicas < 2**31:
        raise ConfigurationError(f"{shown}: wait_replicas must be an integer >= 0")
    check_seconds("wait_timeout", timeout, where=f"{shown}: ")
    if replicas and merged["cluster"]:
        raise ConfigurationError(
            f"{shown}: wait_replicas works on a single primary, not with cluster=true (in a "
            f"cluster, bound the loss with min-replicas-to-write: see docs/redis.md)"
        )
    return Wait(replicas, float(timeout)) if replicas else None


def _queue(pipe: Any, request: Eval, wait: Wait, by_text: bool) -> None:
    keys, script = request.keys, request.script
    if by_text:
        pipe.eval(script.text, len(keys), *keys, *request.args)
    else:
        pipe.evalsha(script.sha, len(keys), *keys, *request.args)
    pipe.execute_command("WAIT", wait.replicas, max(1, round(wait.timeout * 1000)))


def _reply(results: list[Any], wait: Wait, shown: str) -> Any:
    reply, acknowledged = results
    if isinstance(reply, Exception):
        raise reply
    if int(acknowledged) < wait.replicas:
        raise OutcomeUnknownError(
            f"Redis at {shown}: the write was applied on the primary, but only "
            f"{int(acknowledged)} of the {wait.replicas} replicas asked for acknowledged it "
            f"within {wait.timeout:g} s (wait_replicas, wait_timeout): a failover may lose it; "
            f"retrying an append with the same messages is safe"
        )
    return reply


def send(client: Any, request: Eval, wait: Wait, shown: str) -> Any:
    """Run a write script and WAIT, in one pipeline (one connection, one round trip)."""
    for by_text in (False, True):
        pipe = client.pipeline(transaction=False)
        _queue(pipe, request, wait, by_text)
        results = pipe.execute(raise_on_error=False)
        if not isinstance(results[0], NoScriptError):
            break
    return _reply(results, wait, shown)


async def send_async(client: Any, request: Eval, wait: Wait, shown: str) -> Any:
    """:func:`send` for ``redis.asyncio``."""
    for by_text in (False, True):
        pipe = client.pipeline(transaction=False)
        _queue(pipe, request, wait, by_text)
        results = await pipe.execute(raise_on_error=False)
        if not isinstance(results[0], NoScriptError):
            break
    return _reply(results, wait, shown)
