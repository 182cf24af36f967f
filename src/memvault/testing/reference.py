"""Model-based testing: any backend against the in-memory reference, step by step.

A Hypothesis :class:`~hypothesis.stateful.RuleBasedStateMachine` applies the same
random operations (append, batch append, idempotent retries, summarize, pop, trim,
clear, snapshot, rollback, fork, delete, compact, close-and-reopen) to the backend under test and
to a ``memory://`` store, and after every step checks that both return the same
results, raise the same errors and hold the same logical state
(:func:`~memvault.testing.dump_state`: histories, snapshots, versions, event logs).

Each example uses session ids of its own, so it runs on a shared, non-empty store.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from typing import Any, ClassVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import memvault
from memvault.checks.opener import Opener
from memvault.messages import Message
from memvault.model import Snapshot
from memvault.testing.state import diff_states, dump_state

WRITER = "model"
_texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
_slots = st.integers(0, 7)
_names = st.sampled_from(["cp1", "cp2", "cp3"])
_targets = st.sampled_from(
    [
        "cp1",
        "cp2",
        "cp3",
        "nope",
        "auto:pre-rollback@v1",
        "auto:pre-rollback@v2",
        "auto:pre-rollback@v4",
    ]
)


def _outcome(call: Callable[[], Any]) -> Any:
    """A comparable outcome: the result (snapshots without their clock time), or the
    type of the error raised."""
    try:
        result = call()
    except Exception as exc:
        return ("raised", type(exc).__name__)
    if isinstance(result, Snapshot):
        return (
            result.name,
            result.head,
            result.base,
            result.version,
            result.length,
            result.auto,
            result.summary,
            result.through,
        )
    if isinstance(result, (int, Message, list)) or result is None:
        return result
    return "a session handle"  # fork's result: Session, AsyncSession or its proxy


def _ids_at(session_id: str, version: int, store: Any) -> list[str]:
    return [m.id for m in store.session(session_id).history(at_version=version)]


class StoreModel(RuleBasedStateMachine):
    """Drives :attr:`opener`'s store and the reference side by side (subclassed by
    :func:`model_machine`, which sets the class attributes)."""

    opener: ClassVar[Opener]
    reopen_allowed: ClassVar[bool] = False

    def __init__(self) -> None:
        super().__init__()
        run = uuid.uuid4().hex[:10]
        self.prefix = f"model-{run}-"
        self.sids = [f"{self.prefix}a", f"{self.prefix}b"]
        self.batches: list[list[Message]] = []
        self.real = self.opener(writer=WRITER)
        self.ref = memvault.open("memory://", writer=WRITER)

    def _sid(self, slot: int) -> str:
        return self.sids[slot % len(self.sids)]

    def both(self, what: str, call: Callable[[Any], Any]) -> Any:
        real, ref = _outcome(lambda: call(self.real)), _outcome(lambda: call(self.ref))
        assert real == ref, f"{what}: the backend gave {real!r}, the reference {ref!r}"
        return real

    def _append(self, slot: int, texts: list[str], expect: int | None) -> None:
        batch = [
            Message(role="user" if i % 2 == 0 else "assistant", content=t)
            for i, t in enumerate(texts)
        ]
        self.batches.append(batch)
        sid = self._sid(slot)
        self.both(
            f"append {len(batch)} to {sid} (expect_version={expect})",
            lambda st_: st_.session(sid).append(batch, expect_version=expect),
        )

    @rule(slot=_slots, text=_texts)
    def append_one(self, slot: int, text: str) -> None:
        self._append(slot, [text], None)

    @rule(
        slot=_slots,
        texts=st.lists(_texts, min_size=2, max_size=4),
        expect=st.none() | st.integers(0, 6),
    )
    def append_batch(self, slot: int, texts: list[str], expect: int | None) -> None:
        self._append(slot, texts, expect)

    @precondition(lambda self: bool(self.batches))
    @rule(slot=_slots, pick=st.integers(0, 50), extra=st.booleans())
    def retry(self, slot: int, pick: int, extra: bool) -> None:
        """A retry of an earlier batch (a no-op where stored), maybe with a new id mixed in."""
        batch = self.batches[pick % len(self.batches)]
        if extra:
            batch = [*batch, Message.user("new")]
        sid = self._sid(slot)
        self.both(f"retry into {sid}", lambda st_: st_.session(sid).append(batch))

    @rule(
        slot=_slots,
        pick=st.integers(0, 50),
        bogus=st.booleans(),
        again=st.booleans(),
        expect=st.none() | st.integers(0, 6),
    )
    def summarize(self, slot: int, pick: int, bogus: bool, again: bool, expect: int | None) -> None:
        """A summary through a message of the full view (or an unknown id), new or a
        retry of an earlier one; appends may retry it later as a stored id."""
        sid = self._sid(slot)
        full = self.ref.session(sid).history(full=True)
        through = "nope" if bogus or not full else full[pick % len(full)].id
        summaries = [b[0] for b in self.batches if len(b) == 1 and b[0].role == "system"]
        if again and summaries:
            summary = summaries[pick % len(summaries)]
        else:
            summary = Message.system(f"summary {len(self.batches)}")
            self.batches.append([summary])
        self.both(
            f"summarize {sid} through {through} (expect_version={expect})",
            lambda st_: st_.session(sid).summarize(summary, through=through, expect_version=expect),
        )

    @rule(slot=_slots)
    def pop(self, slot: int) -> None:
        sid = self._sid(slot)
        self.both(f"pop {sid}", lambda st_: st_.session(sid).pop())

    @rule(slot=_slots, keep=st.integers(0, 4))
    def trim(self, slot: int, keep: int) -> None:
        sid = self._sid(slot)
        self.both(f"trim {sid} to {keep}", lambda st_: st_.session(sid).trim(keep_last=keep))

    @rule(slot=_slots)
    def clear(self, slot: int) -> None:
        sid = self._sid(slot)
        self.both(f"clear {sid}", lambda st_: st_.session(sid).clear())

    @rule(slot=_slots, name=_names)
    def snapshot(self, slot: int, name: str) -> None:
        sid = self._sid(slot)
        self.both(f"snapshot {sid} {name}", lambda st_: st_.session(sid).snapshot(name))

    @rule(slot=_slots, name=_targets)
    def rollback(self, slot: int, name: str) -> None:
        sid = self._sid(slot)
        self.both(f"rollback {sid} to {name}", lambda st_: st_.session(sid).rollback(name))

    @rule(slot=_slots, at=st.none() | _names, existing=st.booleans())
    def fork(self, slot: int, at: str | None, existing: bool) -> None:
        sid = self._sid(slot)
        new = self._sid(slot + 1) if existing else f"{self.prefix}f{len(self.sids)}"
        done = self.both(
            f"fork {sid} into {new} at {at}", lambda st_: st_.session(sid).fork(new, at=at)
        )
        if not existing and not isinstance(done, tuple):
            self.sids.append(new)

    @rule(slot=_slots)
    def delete(self, slot: int) -> None:
        sid = self._sid(slot)
        self.both(f"delete {sid}", lambda st_: st_.session(sid).delete())

    @rule(keep=st.none() | st.integers(0, 3))
    def compact(self, keep: int | None) -> None:
        """compact (its stats are not compared: the store under test may hold other
        examples' sessions), then every version of every session read back on both:
        compact deleted nothing a pointer or kept event reaches."""

        def compact(st_: Any) -> None:
            st_.compact(keep_events=keep)

        self.both(f"compact (keep_events={keep})", compact)
        for sid in self.sids:
            top = max((e.version for e in self.ref.session(sid).log()), default=0)
            for version in range(top + 1):
                self.both(
                    f"history of {sid} at version {version} after compact",
                    functools.partial(_ids_at, sid, version),
                )

    @precondition(lambda self: self.reopen_allowed)
    @rule()
    def reopen(self) -> None:
        """Close the backend's handle and open a new one: nothing may change."""
        self.real.close()
        self.real = self.opener(writer=WRITER)

    @invariant()
    def same_state(self) -> None:
        def mine(sid: str) -> bool:
            return sid.startswith(self.prefix)

        real, ref = dump_state(self.real, mine), dump_state(self.ref, mine)
        assert real == ref, "the backend's state differs from the reference:\n" + "\n".join(
            diff_states(ref, real)
        )

    def teardown(self) -> None:
        self.real.close()
        self.ref.close()


def model_machine(opener: Opener, *, reopen: bool = False) -> type[StoreModel]:
    """A state machine class bound to ``opener``'s store (for Hypothesis to run).

    Args:
        opener: opens a new handle on the store under test (any face, any backend).
        reopen: include the close-and-reopen step (the store must be persistent).
    """
    return type("StoreModelFor", (StoreModel,), {"opener": opener, "reopen_allowed": reopen})


def check_against_model(
    opener: Opener, *, reopen: bool = False, max_examples: int = 20, steps: int = 20
) -> None:
    """Run the model-based test against ``opener``'s store; raises on a disagreement
    (Hypothesis shrinks it to a minimal sequence of steps first)."""
    # derandomize, no example database: the same sequences on every run and machine,
    # so a certification run (and CI) passes or fails the same way each time.
    run_state_machine_as_test(
        model_machine(opener, reopen=reopen),
        settings=settings(
            max_examples=max_examples,
            stateful_step_count=steps,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        ),
    )


__all__ = ["StoreModel", "check_against_model", "model_machine"]
