"""The torture audit: is every acknowledged change accounted for?

Input: the history file of a run (workers' records, kills, and the final state:
each session's info, visible history, event log, and every snapshot with its own
history read through a throwaway fork). The audit is a pure function of that file.

How the accounting works, per session:

1. **Replay the event log.** Starting from the empty state (head 0, base 0), each
   event must start where the previous one ended, and versions must go +1 per change
   (a snapshot keeps the version). Node ids start at 1 and grow by one per stored
   message, so an append of *n* messages must create exactly the next *n* nodes,
   chained onto the head it started from; a pop must move the head to its parent; a
   trim or clear only raises the base; a rollback must land on its target snapshot
   and save the state it replaced as ``auto:pre-rollback@v{version}``. Replaying
   rebuilds the whole tree of nodes and every state the session was ever in.
   Anything else is ``unlogged``: a change no event explains.
2. **Read every node.** Every message the store holds is reachable from the final
   state, from a snapshot (rollback saves the replaced state as one), or was hidden
   by a pop, whose event names the message. The visible history, each snapshot's
   history and the history right before each pop, trim and clear (read back through
   ``history(at_version=N)``, so a message they hid is read too, not taken on trust)
   must have exactly the length their pointers give, and they fill in which message
   sits at which node; two reads that disagree about a node are
   ``misplaced`` (different ids) or ``corrupted`` (same id, different content). A
   node that nothing reaches and no pop names is ``unlogged``.
3. **Tie acknowledgements to events.** An append acknowledged as version *v* (on a
   first attempt, or after attempts that certainly applied nothing) must be the
   append event of version *v*, and its nodes must hold its ids in order; an
   acknowledged snapshot must be in the final list unchanged (same head, base,
   version, length) and its event must match (else ``snapshot_drift``); an
   acknowledged rollback must have its event, an acknowledged pop a pop event
   naming the message; a write the caller was told failed must not be there
   (``failed_but_present``).
4. **The lost-write checker.** The messages of all nodes, in node order (the order
   appends were applied), are handed to :func:`memvault.checks.report.audit` as the
   ``final`` history, with one ``invoke`` and one outcome per turn (``ok`` if an
   attempt was acknowledged, else ``unknown`` if one may have applied, else
   ``failed``). It finds acknowledged turns that never reached the store (``lost``),
   ids stored twice (``duplicated``), a writer's turns applied out of order
   (``reordered``), turns split or partial (``torn``), checksum failures
   (``corrupted``), ids nobody sent (``unexpected``) and failed turns that landed.
5. **Reads during the run.** Each history a worker read must be a chain of the tree
   that was, at some point, the session's logged state (``phantom_reads``
   otherwise). Reads are not tied to a moment, so this checks existence, not
   linearizability. Checksum failures in reads are ``corrupted``.

``foreign_errors`` are exceptions that are not :class:`~memvault.errors.MemvaultError`
(the error contract); ``unverified`` means the final state could not be read; ``idle``
means no append was acknowledged (a store refusing every write, or a run too short for
one): the run checked nothing, so it vouches for nothing.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from memvault.checks.history import parse_all
from memvault.checks.lostwrites import checksum, make_turn
from memvault.checks.report import audit
from memvault.torture.report import APPEND_RECORDS, TortureReport, count_operations, merge
from memvault.torture.workers import wire

Record = dict[str, Any]
State = tuple[int, int]  # (head, base)


class _Tree:
    """The nodes the event log says exist: parent and depth of each."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {0: 0}
        self.depth: dict[int, int] = {0: 0}

    def chain(self, head: int, base: int) -> list[int] | None:
        """Nodes visible from ``(head, base)``, oldest first; None for an unknown head."""
        out, node = [], head
        while node in self.depth and self.depth[node] > base:
            out.append(node)
            node = self.parent[node]
        return out[::-1] if node in self.depth else None

    def add(self, node: int, parent: int) -> bool:
        """Record a node; False if the id is taken or the parent unknown. Nodes are never
        rewritten and an unknown parent becomes -1 (no such node), so depths strictly
        decrease along every walk, and every walk ends, whatever the log says."""
        if node in self.depth:
            return False
        known = parent in self.depth
        self.parent[node] = parent if known else -1
        self.depth[node] = self.depth[parent] + 1 if known else 1
        return known


class _Session:
    def __init__(self, si: int, run: str, records: list[Record], report: TortureReport) -> None:
        self.si, self.run, self.report = si, run, report
        self.records = records
        self.tree = _Tree()
        self.states: set[State] = {(0, 0)}
        self.at: dict[int, State] = {0: (0, 0)}  # version -> the state right after it
        self.appended: dict[int, list[int]] = {}
        self.popped: dict[int, str] = {}
        self.pop_count: Counter[str] = Counter()
        self.snap_events: dict[str, list[tuple[int, State]]] = {}
        self.rollbacks: dict[str, tuple[int, State, State, str]] = {}
        self.trimmed = False
        self.seen: dict[int, tuple[Record, str]] = {}
        self.owner: dict[str, tuple[int, int, list[str]]] = {}

    def flag(self, finding: str, text: str) -> None:
        self.report.findings[finding].add(f"s{self.si}: {text}")

    def replay(self, events: list[Record]) -> State:
        version, state, next_node = 0, (0, 0), 1
        for i, ev in enumerate(events):
            op, detail = ev["op"], ev["detail"]
            before, after = (ev["head"][0], ev["base"][0]), (ev["head"][1], ev["base"][1])
            where = f"event {i + 1} (v{ev['version']} {op})"
            if before != state:
                self.flag("unlogged", f"{where} starts at {before}; the log was at {state}")
            want = version if op == "snapshot" else version + 1
            if ev["version"] != want:
                self.flag("unlogged", f"{where}: version {ev['version']}, expected {want}")
            if op == "append":
                n = detail.get("messages")
                new = list(range(next_node, next_node + n)) if isinstance(n, int) else []
                if not new or after != (new[-1], before[1]):
                    self.flag("unlogged", f"{where}: {n} messages onto {before} gave {after}")
                parent = before[0]
                for node in new:
                    if not self.tree.add(node, parent):
                        self.flag(
                            "unlogged", f"{where}: node {node} exists, or its parent does not"
                        )
                    parent = node
                next_node += len(new)
                self.appended[ev["version"]] = new
            elif op == "pop":
                head = before[0]
                if self.tree.depth.get(head, 0) <= before[1] or after != (
                    self.tree.parent[head],
                    before[1],
                ):
                    self.flag("unlogged", f"{where}: {before} -> {after} is not a pop")
                else:
                    self.popped[head] = detail.get("message_id", "")
                    self.pop_count[self.popped[head]] += 1
            elif op in ("trim", "clear"):
                self.trimmed = True
                if after[0] != before[0] or after[1] < before[1]:
                    self.flag("unlogged", f"{where}: {before} -> {after} is not a {op}")
            elif op == "rollback":
                saved = detail.get("saved", "")
                if saved in self.rollbacks:
                    self.flag("unlogged", f"{where} saved {saved!r} a second time")
                self.rollbacks[saved] = (ev["version"], before, after, detail.get("to", ""))
            elif op == "snapshot":
                if after != before:
                    self.flag("unlogged", f"{where} moved the history {before} -> {after}")
                self.snap_events.setdefault(detail.get("name", ""), []).append(
                    (ev["version"], before)
                )
            else:
                self.flag("unlogged", f"{where}: an operation torture never makes")
            version, state = ev["version"], after
            self.states.add(state)
            self.at[version] = state
        return state

    def observe(self, node: int, msg: Record, source: str) -> None:
        prev = self.seen.setdefault(node, (msg, source))
        if prev[0]["id"] != msg["id"]:
            self.flag(
                "misplaced", f"node {node}: {prev[0]['id']} in {prev[1]}, {msg['id']} in {source}"
            )
        elif prev[0] != msg:
            self.flag("corrupted", f"{msg['id']} reads differently in {prev[1]} and {source}")

    def read_chain(self, state: State, messages: list[Record], source: str, finding: str) -> None:
        chain = self.tree.chain(*state)
        if chain is None or len(chain) != len(messages):
            self.flag(
                finding,
                f"{source} holds {len(messages)} messages; the log accounts "
                f"for {'none' if chain is None else len(chain)} at {state}",
            )
            return
        for node, msg in zip(chain, messages, strict=True):
            self.observe(node, msg, source)

    def check_snapshots(self, snaps: dict[str, Record]) -> None:
        for name, snap in snaps.items():
            point = (snap["head"], snap["base"])
            if "messages" not in snap:
                self.flag(
                    "corrupted" if snap.get("corrupt") else "unverified",
                    f"snapshot {name!r}: {snap.get('error')}",
                )
            else:
                self.read_chain(point, snap["messages"], f"snapshot {name!r}", "snapshot_drift")
            if name in self.rollbacks:
                version, before, _, _ = self.rollbacks[name]
                made, kind_ok = [(version - 1, before)], bool(snap["auto"])
            else:
                made, kind_ok = self.snap_events.get(name, []), not snap["auto"]
            if len(made) != 1 or not kind_ok:
                self.flag("unlogged", f"snapshot {name!r} was made by {len(made)} events")
            elif (snap["version"], point) != (want := made[0]):
                self.flag(
                    "snapshot_drift",
                    f"snapshot {name!r} is v{snap['version']} at "
                    f"{point}; it was taken as v{want[0]} at {want[1]}",
                )
        for name in [*self.snap_events, *self.rollbacks]:
            if name not in snaps:
                self.flag("snapshot_drift", f"snapshot {name!r} was logged and is gone")
        for saved, (version, _, after, to) in self.rollbacks.items():
            if saved != f"auto:pre-rollback@v{version - 1}":
                self.flag("unlogged", f"rollback v{version} saved {saved!r}")
            target = snaps.get(to)
            if target is not None and after != (target["head"], target["base"]):
                self.flag(
                    "unlogged",
                    f"rollback v{version} to {to!r} landed on {after}, not on "
                    f"{(target['head'], target['base'])}",
                )

    def check_past(self, past: list[Record]) -> None:
        """The histories read as they were at a version (before a pop, trim or clear)."""
        for read in past:
            source = f"history(at_version={read['version']})"
            if "messages" not in read:
                self.flag(
                    "corrupted" if read.get("corrupt") else "unverified",
                    f"{source}: {read.get('error')}",
                )
            elif read["version"] not in self.at:
                self.flag("unlogged", f"{source} was read; no event has that version")
            else:
                self.read_chain(self.at[read["version"]], read["messages"], source, "unlogged")

    def check_calls(self, snaps: dict[str, Record]) -> None:
        calls = {(r["w"], r["n"]): r for r in self.records if r["e"] == "call"}
        for done in (r for r in self.records if r["e"] == "done"):
            call, who = calls.get((done["w"], done["n"]), {}), f"w{done['w']}"
            kind, outcome = done["k"], done["outcome"]
            if kind == "pop" and outcome == "ok" and done["message"] is not None:
                msg = done["message"]
                self.pop_count[msg["id"]] -= 1
                if self.pop_count[msg["id"]] < 0:
                    self.flag("unlogged", f"{who}'s pop of {msg['id']} has no pop event")
                for node in [n for n, mid in self.popped.items() if mid == msg["id"]]:
                    self.observe(node, msg, f"{who}'s pop")
            elif kind in ("snapshot", "rollback") and outcome == "ok":
                snap = snaps.get(done["name"])
                fields = ("head", "base", "version", "length")
                if snap is None or any(snap[f] != done[f] for f in fields):
                    self.flag(
                        "snapshot_drift",
                        f"{done['name']!r} as {who} was told: "
                        f"{[done[f] for f in fields]}, now: "
                        f"{snap and [snap[f] for f in fields]}",
                    )
                if kind == "rollback" and self.rollbacks.get(done["name"], (0, 0, 0, ""))[
                    3
                ] != call.get("arg"):
                    self.flag("unlogged", f"{who}'s rollback to {call.get('arg')!r} has no event")
            elif kind == "snapshot" and outcome == "failed" and call.get("arg") in snaps:
                self.flag(
                    "failed_but_present", f"snapshot {call['arg']!r}: {who} was told it failed"
                )

    def turns(self) -> dict[tuple[int, int], Record]:
        """One entry per turn: its ids, collapsed outcome, and exact version if known."""
        turns: dict[tuple[int, int], Record] = {}
        for r in self.records:
            if r["e"] not in APPEND_RECORDS:
                continue
            turn = turns.setdefault((r["w"], r["t"]), {"ids": r.get("ids"), "attempts": []})
            if r["e"] == "invoke":
                turn["attempts"].append({"outcome": "unknown"})
            else:
                turn["attempts"][-1] = {"outcome": r["e"], "version": r.get("version")}
        for (w, t), turn in turns.items():
            outcomes = [a["outcome"] for a in turn["attempts"]]
            turn["outcome"] = (
                "ok" if "ok" in outcomes else "unknown" if "unknown" in outcomes else "failed"
            )
            first_ok = outcomes.index("ok") if "ok" in outcomes else -1
            if first_ok >= 0 and "unknown" not in outcomes[:first_ok]:
                turn["version"] = turn["attempts"][first_ok]["version"]
            for mid in turn["ids"]:
                self.owner[mid] = (w, t, turn["ids"])
        return turns

    def tie_acks(self, turns: dict[tuple[int, int], Record]) -> dict[int, str]:
        expected: dict[int, str] = {}
        for (w, t), turn in turns.items():
            if "version" not in turn:
                continue
            nodes = self.appended.get(turn["version"], [])
            if len(nodes) != len(turn["ids"]):
                self.flag(
                    "unlogged",
                    f"w{w}.t{t} was acknowledged as v{turn['version']}; "
                    f"no append event of {len(turn['ids'])} messages has it",
                )
                continue
            for node, mid in zip(nodes, turn["ids"], strict=True):
                expected[node] = mid
                got = self.seen[node][0]["id"] if node in self.seen else self.popped.get(node)
                if got not in (None, mid):
                    self.flag(
                        "misplaced", f"node {node}: acknowledged as {mid} (w{w}.t{t}), holds {got}"
                    )
        return expected

    def regenerate(self, mid: str) -> Record:
        """A message nobody could read back, rebuilt from its id (content unchecked)."""
        if mid not in self.owner:
            return {"id": mid, "role": "?", "content": None, "sum": checksum("?", None)}
        w, t, ids = self.owner[mid]
        return wire(make_turn(self.run, w, t, len(ids))[ids.index(mid)])

    def stream(self, expected: dict[int, str]) -> list[tuple[int, Record]]:
        """Every node with its message, in node order: the appends as applied."""
        out = []
        for node in sorted(self.tree.depth)[1:]:
            if node in self.seen:
                out.append((node, self.seen[node][0]))
                continue
            mid = self.popped.get(node) or expected.get(node)
            if node not in self.popped and not self.trimmed:
                self.flag(
                    "unlogged",
                    f"node {node} ({mid}) is neither visible, in a snapshot, nor named by a pop",
                )
            if mid:
                self.report.notes["unread"].add(f"s{self.si}: {mid}")
                out.append((node, self.regenerate(mid)))
        return out

    def check_views(self, where: dict[str, int]) -> None:
        for view in (r for r in self.records if r["e"] == "view"):
            who = f"w{view['w']}"
            for mid in view["bad"]:
                self.flag("corrupted", f"{who} read {mid} with a bad checksum")
            if any(mid not in where for mid in view["ids"]):
                self.flag("phantom_reads", f"{who} read messages no logged append stored")
                continue
            nodes = [where[mid] for mid in view["ids"]]
            if not nodes:
                continue
            linked = all(self.tree.parent[b] == a for a, b in itertools.pairwise(nodes))
            state = (nodes[-1], self.tree.depth[nodes[0]] - 1)
            if not linked or state not in self.states:
                self.flag(
                    "phantom_reads",
                    f"{who} read {len(nodes)} messages ending at "
                    f"{view['ids'][-1]}: no logged state had them",
                )

    def audit(self, header: Record) -> dict[str, Any]:
        finals = [r for r in self.records if r["e"] in ("state", "final_error")]
        if not finals or finals[0]["e"] != "state":
            error = finals[0] if finals else {"error": "no final state recorded"}
            self.flag("corrupted" if error.get("corrupt") else "unverified", error["error"])
            return {"session": self.si}
        final = finals[0]
        state = self.replay(final["events"])
        info = final["info"]
        chain = self.tree.chain(*state) or []
        if (info is None) != (not final["events"]) or (
            info
            and (info["version"], info["length"]) != (final["events"][-1]["version"], len(chain))
        ):
            self.flag("unlogged", f"info says {info}; the log ends at {state}")
        self.read_chain(state, final["history"], "the visible history", "unlogged")
        snaps = {s["name"]: s for s in final["snapshots"]}
        self.check_snapshots(snaps)
        self.check_past(final.get("past", []))
        turns = self.turns()
        self.check_calls(snaps)
        expected = self.tie_acks(turns)
        stream = self.stream(expected)
        lost_writes = audit(
            parse_all(
                [
                    header,
                    *self._turn_records(turns),
                    *(r for r in self.records if r["e"] == "read_error"),
                    {"e": "final", "messages": [m for _, m in stream]},
                ]
            ),
            checksum,
        )
        # One model, one name per finding: the lost-write checker's findings that the
        # torture audit reports too (its reads are checked as phantom_reads instead).
        for group, mine in (
            (lost_writes.findings, self.report.findings),
            (lost_writes.notes, self.report.notes),
        ):
            for name in sorted(group.keys() & mine.keys()):
                merge(mine[name], group[name], f"s{self.si}: ")
        self.check_views({m["id"]: node for node, m in stream})
        return {
            "session": self.si,
            "version": info["version"] if info else 0,
            "messages": len(final["history"]),
            "snapshots": len(snaps),
            "events": len(final["events"]),
            "nodes": len(self.tree.depth) - 1,
        }

    @staticmethod
    def _turn_records(turns: dict[tuple[int, int], Record]) -> Iterable[Record]:
        for (w, t), turn in turns.items():
            yield {"e": "invoke", "w": w, "t": t, "ids": turn["ids"]}
            yield {"e": turn["outcome"], "w": w, "t": t}


def audit_records(records: list[Record]) -> TortureReport:
    """Audit the records of a torture history file (see the module docstring)."""
    report = TortureReport()
    header = next((r for r in records if r["e"] == "run"), {"e": "run", "sessions": []})
    report.run = {k: v for k, v in header.items() if k != "e"}
    report.kills = sum(1 for r in records if r["e"] == "kill" and not r["late"])
    report.late_kills = sum(1 for r in records if r["e"] == "kill" and r["late"])
    report.exits = sum(1 for r in records if r["e"] == "exit")
    report.server_kills = sum(1 for r in records if r["e"] == "server_kill")
    report.outages = sum(1 for r in records if r["e"] == "outage")
    report.cuts = {
        k: v for r in records if r["e"] == "cuts" for k, v in r.items() if k not in ("e", "outages")
    }
    count_operations(records, report)
    if not report.operations["append"].ok:
        report.findings["idle"].add("no append was acknowledged: the run checked nothing")
    for si in range(len(report.run.get("sessions", []))):
        mine = [r for r in records if r.get("s") == si]
        report.sessions.append(_Session(si, str(header["run"]), mine, report).audit(header))
    return report


def audit_history(path: str | Path) -> TortureReport:
    """Audit a torture history file (from :func:`memvault.torture.run_torture`)."""
    with Path(path).open(encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines if line.strip()]
    report = audit_records(records)
    report.history_file = str(path)
    return report
