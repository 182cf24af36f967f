"""MemvaultMemoryStore and MemvaultStepStore: pydantic-ai-harness's stores on every backend.

The harness's own contract tests for its stores also run against it, from a scratch
checkout of the harness's tests (docs/integrations.md says how); these tests drive it
the way the harness's ``Memory`` capability does, and through a real agent.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness.conversation_search import SnapshotStore
from pydantic_ai_harness.memory import (
    Memory,
    MemoryConflictError,
    MemoryOperation,
    MemoryOperationConflictError,
    MemoryStore,
    SearchableMemoryStore,
)
from pydantic_ai_harness.step_persistence import (
    ContinuableSnapshot,
    InMemoryStepStore,
    RunRecord,
    StepEvent,
    StepPersistence,
    StepStore,
    ToolEffectRecord,
    continue_run,
)

import memvault
from memvault import ConfigurationError, Message
from memvault.integrations.pydantic_ai_harness import KEY, MemvaultMemoryStore, MemvaultStepStore
from tests.support.backends import BACKENDS
from tests.support.pydantic_ai_agents import make_agent

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def raw(any_store_url: str) -> AsyncIterator[memvault.AsyncStore]:
    async with memvault.open_async(any_store_url) as opened:
        yield opened


@pytest.fixture
def store(raw: memvault.AsyncStore) -> MemvaultMemoryStore:
    return MemvaultMemoryStore(raw)


def claim(op: MemoryOperation, path: str) -> Message:
    """The receipt's first message, as the module docstring describes it."""
    return Message.system(
        "claim", id="claim", metadata={KEY: {"fingerprint": op.fingerprint, "path": path}}
    )


async def test_versions_are_compare_and_set_and_never_repeat(
    raw: memvault.AsyncStore, store: MemvaultMemoryStore
) -> None:
    assert isinstance(store, MemoryStore) and isinstance(store, SearchableMemoryStore)
    created = await store.write("u/MEMORY.md", "- likes tea \u200f\x00", expected_version=None)
    assert not created.existed and not created.replayed
    read = await store.read("u/MEMORY.md", max_chars=100)
    assert read is not None and read.content == "- likes tea \u200f\x00"
    assert read.version == created.version and read.operation_id is None
    with pytest.raises(MemoryConflictError):
        await store.write("u/MEMORY.md", "stale", expected_version=None)
    updated = await store.write("u/MEMORY.md", "- tea", expected_version=created.version)
    with pytest.raises(MemoryConflictError):
        await store.delete("u/MEMORY.md", expected_version=created.version)
    deleted = await store.delete("u/MEMORY.md", expected_version=updated.version)
    assert deleted.existed and deleted.version is None
    assert await store.read("u/MEMORY.md", max_chars=100) is None
    again = await store.write("u/MEMORY.md", "- tea", expected_version=None)
    assert again.version not in (created.version, updated.version)
    # every version is kept in the file's session, with the writer and time in its log
    session = raw.session("memory:file:u/MEMORY.md")
    assert [m.content for m in await session.history()] == [
        "- likes tea \u200f\x00",
        "- tea",
        "",
        "- tea",
    ]


async def test_a_replayed_operation_applies_once(
    raw: memvault.AsyncStore, store: MemvaultMemoryStore
) -> None:
    op = MemoryOperation(id="run-1:call-1", fingerprint="write:a.md:one")
    first = await store.write("a.md", "one", expected_version=None, operation=op)
    replay = await store.write("a.md", "one", expected_version=None, operation=op)
    assert (replay.version, replay.replayed, replay.existed) == (first.version, True, False)
    assert await store.get_operation(op) == replay
    assert (await store.read("a.md", max_chars=10)).operation_id == op.id  # type: ignore[union-attr]
    with pytest.raises(MemoryOperationConflictError):
        await store.write(
            "a.md",
            "two",
            expected_version=first.version,
            operation=MemoryOperation(id=op.id, fingerprint="other"),
        )
    assert len(await raw.session("memory:file:a.md").history()) == 1


async def test_a_write_that_landed_before_its_receipt_is_not_written_again(
    raw: memvault.AsyncStore, store: MemvaultMemoryStore
) -> None:
    """A process killed between the file's append and the receipt's outcome: the
    replay finds the write in the file's session and returns its outcome."""
    op = MemoryOperation(id="run-2:call-9", fingerprint="write:b.md:x")
    await raw.session("memory:op:run-2:call-9").append([claim(op, "b.md")])
    landed = Message.system(
        "x", id="op:run-2:call-9", metadata={KEY: {"path": "b.md", "existed": False}}
    )
    await raw.session("memory:file:b.md").append([landed])
    receipt = await store.get_operation(op)
    assert receipt is not None and receipt.replayed and receipt.version == landed.id
    replay = await store.write("b.md", "x", expected_version=None, operation=op)
    assert replay == receipt
    assert len(await raw.session("memory:file:b.md").history()) == 1


async def test_a_claimed_operation_that_never_wrote_is_written_by_its_replay(
    raw: memvault.AsyncStore, store: MemvaultMemoryStore
) -> None:
    op = MemoryOperation(id="run-3:call-1", fingerprint="write:c.md:y")
    await raw.session("memory:op:run-3:call-1").append([claim(op, "c.md")])  # then killed
    assert await store.get_operation(op) is None
    written = await store.write("c.md", "y", expected_version=None, operation=op)
    assert not written.replayed
    assert (await store.read("c.md", max_chars=5)).content == "y"  # type: ignore[union-attr]


async def test_listing_and_search_see_only_live_files_of_their_namespace(
    any_store_url: str,
) -> None:
    async with memvault.open_async(any_store_url) as opened:
        mine, theirs = MemvaultMemoryStore(opened), MemvaultMemoryStore(opened, namespace="other")
        for path in ("t/a.md", "t/b.md", "t/deep/c.md", "u/d.md"):
            await mine.write(path, f"alpha {path}", expected_version=None)
        await theirs.write("t/z.md", "alpha", expected_version=None)
        gone = await mine.write("t/gone.md", "alpha", expected_version=None)
        await mine.delete("t/gone.md", expected_version=gone.version)
        assert await mine.list_paths("t/", limit=10) == ["t/a.md", "t/b.md", "t/deep/c.md"]
        assert await mine.list_paths(limit=2) == ["t/a.md", "t/b.md"]
        found = await mine.search(
            "t/", "alpha", limit=10, max_files=10, max_chars=200, max_file_chars=100
        )
        assert {m.path for m in found.matches} <= {"t/a.md", "t/b.md", "t/deep/c.md"}
        assert {"t/a.md", "t/b.md"} <= {m.path for m in found.matches}
        with pytest.raises(ValueError, match="limit"):
            await mine.list_paths(limit=0)
        with pytest.raises(ValueError):
            await mine.read("../escape.md", max_chars=10)
        with pytest.raises(ConfigurationError):
            MemvaultMemoryStore(memvault.open("memory://"))  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError):
            MemvaultMemoryStore(opened, namespace="a:b")


def remembering(fact: str) -> FunctionModel:
    """A model that saves ``fact`` with the memory tool, then answers."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(
            isinstance(p, ToolReturnPart) for p in last.parts
        ):
            return ModelResponse(parts=[TextPart("saved")])
        return ModelResponse(
            parts=[ToolCallPart("write_memory", {"content": f"- {fact}"}, tool_call_id="w1")]
        )

    return FunctionModel(model)


async def test_the_memory_capability_remembers_across_runs(store: MemvaultMemoryStore) -> None:
    await Agent(remembering("The user is Wang."), capabilities=[Memory(store=store)]).run("hi")
    seen: list[Any] = []

    def reader(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.extend(messages)
        return ModelResponse(parts=[TextPart("Hello, Wang.")])

    await Agent(FunctionModel(reader), capabilities=[Memory(store=store)]).run("who am I?")
    assert "The user is Wang." in str(seen)  # injected from the store, in a later run
    paths = await store.list_paths(limit=10)
    assert len(paths) == 1 and paths[0].endswith("MEMORY.md")


WORKER = r"""
import asyncio, sys
import memvault
from pydantic_ai import Agent
from pydantic_ai_harness.memory import Memory
from memvault.integrations.pydantic_ai_harness import MemvaultMemoryStore
from tests.integrations.test_integration_pydantic_ai_harness import remembering

async def main(url, name, count):
    async with memvault.open_async(url, writer=name) as opened:
        store = MemvaultMemoryStore(opened)
        for n in range(count):
            agent = Agent(remembering(f"{name} fact {n}"), capabilities=[Memory(store=store)])
            await agent.run(f"remember {n}")

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])  # memory:// is per process
def test_two_processes_appending_to_one_memory_lose_no_fact(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Each write reads MEMORY.md and writes it back, compare-and-set: a write that
    lost the race gets MemoryConflictError and the harness's tool retries it."""
    url = BACKENDS[backend](request, tmp_path)
    workers = [
        subprocess.Popen([sys.executable, "-c", WORKER, url, name, "8"], cwd=ROOT)
        for name in ("alpha", "beta")
    ]
    assert [w.wait(timeout=240) for w in workers] == [0, 0]

    async def facts() -> list[str]:
        async with memvault.open_async(url) as opened:
            store = MemvaultMemoryStore(opened)
            (path,) = await store.list_paths(limit=10)
            file = await store.read(path, max_chars=100_000)
            assert file is not None
            return file.content.splitlines()

    lines = asyncio.run(facts())
    assert sorted(lines) == sorted(f"- {n} fact {i}" for n in ("alpha", "beta") for i in range(8))


@pytest.fixture
def steps(raw: memvault.AsyncStore) -> MemvaultStepStore:
    return MemvaultStepStore(raw)


async def test_step_persistence_records_what_the_harness_own_store_does(
    steps: MemvaultStepStore,
) -> None:
    """The same two runs on InMemoryStepStore (the oracle) and on memvault."""
    assert isinstance(steps, StepStore) and isinstance(steps, SnapshotStore)

    async def record(store: Any) -> list[Any]:
        agent = make_agent([StepPersistence(store=store, agent_name="adder")])
        first = await agent.run("Add one and two.", conversation_id="conv-1")
        await agent.run("Again?", message_history=first.all_messages(), conversation_id="conv-1")
        seen = []
        for run in await store.list_runs(conversation_id="conv-1"):
            assert await store.get_run(run_id=run.run_id) == run
            seen.append(
                (
                    run.agent_name,
                    # the parallel tool calls' events come in either order
                    sorted(
                        (e.step_index, e.kind, e.tool_name or "")
                        for e in await store.list_events(run_id=run.run_id)
                    ),
                    len(await continue_run(store, run_id=run.run_id)),
                    [
                        r.tool_call_id
                        for r in await store.list_unresolved_tool_effects(run_id=run.run_id)
                    ],
                    (
                        await store.get_tool_effect(run_id=run.run_id, tool_call_id="t1-add") or run
                    ).__class__,
                )
            )
        return seen

    mine, theirs = await record(steps), await record(InMemoryStepStore())
    assert mine == theirs
    assert len(mine) == 2 and mine[0][2] == 6  # two runs; the first's snapshot: 6 messages
    [run, _] = await steps.list_runs(conversation_id="conv-1")
    snapshot = await steps.latest_snapshot(run_id=run.run_id)
    assert (
        snapshot is not None and await continue_run(steps, run_id=run.run_id) == snapshot.messages
    )


async def test_keyed_records_are_stored_once(steps: MemvaultStepStore) -> None:
    event = StepEvent(run_id="r", kind="run_started", step_index=0, idempotency_key="event:0")
    for _ in range(2):
        await steps.append_event(event)
        await steps.append_event(StepEvent(run_id="r", kind="model_request_started", step_index=1))
    assert [e.kind for e in await steps.list_events(run_id="r")] == [
        "run_started",
        "model_request_started",
        "model_request_started",  # no key: every append is stored
    ]
    snap = ContinuableSnapshot(
        run_id="r", step_index=1, messages=[], idempotency_key="1:1:complete"
    )
    older = ContinuableSnapshot(
        run_id="r", step_index=0, messages=[], idempotency_key="0:0:complete"
    )
    torn = ContinuableSnapshot(
        run_id="r",
        step_index=2,
        messages=[],
        state="interrupted",
        idempotency_key="1:2:interrupted",
    )
    for saved in (snap, snap, older, torn, torn):
        await steps.save_snapshot(saved)
    assert await steps.list_snapshots(run_id="r", include_interrupted=True) == [snap, torn]
    assert await steps.latest_snapshot(run_id="r") == snap
    assert await steps.latest_snapshot(run_id="r", include_interrupted=True) == torn
    assert await steps.latest_snapshot(run_id="missing") is None


async def test_the_newest_tool_effect_of_a_call_wins(steps: MemvaultStepStore) -> None:
    def effect(call: str, status: Any) -> ToolEffectRecord:
        return ToolEffectRecord(tool_call_id=call, tool_name="pay", run_id="r", status=status)

    for record in (effect("c1", "started"), effect("c2", "started"), effect("c1", "completed")):
        await steps.record_tool_effect(record)
    assert [r.tool_call_id for r in await steps.list_unresolved_tool_effects(run_id="r")] == ["c2"]
    assert (await steps.get_tool_effect(run_id="r", tool_call_id="c1")).status == "completed"  # type: ignore[union-attr]
    await steps.register_run(RunRecord(run_id="r", agent_name="first"))
    await steps.register_run(RunRecord(run_id="r", agent_name="second"))
    assert (await steps.get_run(run_id="r")).agent_name == "second"  # type: ignore[union-attr]
    assert await steps.get_run(run_id="missing") is None


async def test_concurrent_snapshot_saves_are_all_kept(steps: MemvaultStepStore) -> None:
    """Each save reads the high-water mark and appends compare-and-set: the ones that
    lose the race decide again, none is dropped."""
    saved = [ContinuableSnapshot(run_id="r", step_index=n, messages=[]) for n in range(8)]
    await asyncio.gather(*(steps.save_snapshot(s) for s in saved))
    stored = await steps.list_snapshots(run_id="r")
    assert sorted(s.step_index for s in stored) == list(range(8))
