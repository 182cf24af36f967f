"""A canonical, human-readable dump of a store's logical state, and its diff.

:func:`dump_state` reads what any user can read — sessions, visible histories,
snapshots, event logs — and replaces what changes from run to run with stable
placeholders: every timestamp becomes ``"<time>"``, generated message ids
(time-ordered UUIDv7) become ``"<id:N>"`` numbered in order of first appearance,
and default writer labels (``host:pid``) become ``"<writer:N>"``. Ids and writers
a test chose itself are kept. The same operations therefore dump identically on
every backend, in every run. Raw database files are never compared: they change
when the data does not (change counters, free lists, unflushed WAL).
"""

from __future__ import annotations

import difflib
import json
import re
import socket
from collections.abc import Callable, Iterable
from typing import Any

from memvault.messages import Message
from memvault.model import Event, SessionInfo, Snapshot

FORMAT = 1
TIME = "<time>"
_GENERATED_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
_DEFAULT_WRITER = re.compile(rf"^{re.escape(socket.gethostname())}:\d+$")

Raw = tuple[SessionInfo | None, list[Message], list[Snapshot], list[Event], list[Message]]
"""info, history, snapshots, log, and the full view (read only when something is
summarized; else empty)."""
State = dict[str, Any]


class _Placeholders:
    """Stable names for volatile values, numbered in order of first appearance."""

    def __init__(self) -> None:
        self._names: dict[tuple[str, str], str] = {}

    def _name(self, kind: str, value: str) -> str:
        key = (kind, value)
        if key not in self._names:
            count = sum(1 for k in self._names if k[0] == kind)
            self._names[key] = f"<{kind}:{count + 1}>"
        return self._names[key]

    def msg_id(self, value: Any) -> Any:
        if isinstance(value, str) and _GENERATED_ID.match(value):
            return self._name("id", value)
        return value

    def writer(self, value: str) -> str:
        return self._name("writer", value) if _DEFAULT_WRITER.match(value) else value


def _message(m: Message, ph: _Placeholders) -> dict[str, Any]:
    out = m.model_dump(mode="json", exclude_defaults=True)
    out["id"] = ph.msg_id(m.id)
    out["role"] = m.role
    out["created_at"] = TIME
    return out


def _snapshot(s: Snapshot) -> dict[str, Any]:
    out = {
        "name": s.name,
        "version": s.version,
        "length": s.length,
        "head": s.head,
        "base": s.base,
        "auto": s.auto,
        "created_at": TIME,
    }
    if s.summary:
        out["summary"] = [s.summary, s.through]
    return out


def _event(e: Event, ph: _Placeholders) -> dict[str, Any]:
    detail = {k: ph.msg_id(v) for k, v in sorted(e.detail.items())}
    return {
        "version": e.version,
        "op": e.op,
        "writer": ph.writer(e.writer),
        "at": TIME,
        "head": [e.head_before, e.head_after],
        "base": [e.base_before, e.base_after],
        "detail": detail,
    }


def canonical_state(raw: dict[str, Raw]) -> State:
    """The canonical dump of raw reads (session id -> info, history, snapshots, log)."""
    ph = _Placeholders()
    sessions: dict[str, Any] = {}
    for sid in sorted(raw):
        info, history, snapshots, log, full = raw[sid]
        sessions[sid] = state = {
            "version": info.version if info else 0,
            "length": info.length if info else 0,
            "expires_at": None if info is None or info.expires_at is None else TIME,
            "history": [_message(m, ph) for m in history],
            "snapshots": [_snapshot(s) for s in snapshots],
            "log": [_event(e, ph) for e in log],
        }
        if info is not None and info.summarized:  # keys only when used: baselines stand
            state["summarized"] = info.summarized
            state["full_history"] = [_message(m, ph) for m in full]
    return {"format": FORMAT, "sessions": sessions}


def _selected(
    ids: Iterable[str], sessions: Iterable[str] | Callable[[str], bool] | None
) -> list[str]:
    if sessions is None:
        return list(ids)
    if callable(sessions):
        return [sid for sid in ids if sessions(sid)]
    return list(sessions)


def dump_state(store: Any, sessions: Iterable[str] | Callable[[str], bool] | None = None) -> State:
    """The logical state of a sync store (or of the contract's blocking async proxy).

    Args:
        store: a :class:`memvault.Store`.
        sessions: which sessions to dump: ids, a predicate on ids, or None for
            every live session.

    Returns:
        A JSON-serializable dict; equal dicts mean equal logical states.
    """
    raw: dict[str, Raw] = {}
    for sid in _selected(store.sessions(), sessions):
        s = store.session(sid)
        info = s.info()
        raw[sid] = (
            info,
            s.history(),
            s.snapshots(),
            s.log(),
            s.history(full=True) if info and info.summarized else [],
        )
    return canonical_state(raw)


async def dump_state_async(
    store: Any, sessions: Iterable[str] | Callable[[str], bool] | None = None
) -> State:
    """:func:`dump_state` for a :class:`memvault.AsyncStore`."""
    raw: dict[str, Raw] = {}
    for sid in _selected(await store.sessions(), sessions):
        s = store.session(sid)
        info = await s.info()
        raw[sid] = (
            info,
            await s.history(),
            await s.snapshots(),
            await s.log(),
            await s.history(full=True) if info and info.summarized else [],
        )
    return canonical_state(raw)


_NUMBERS = re.compile(r"\[\s*(-?\d+(?:,\s*-?\d+)*)\s*\]")


def render_state(state: State) -> str:
    """The dump as stable, readable JSON text (what baselines store); number pairs
    such as ``"head": [0, 2]`` stay on one line."""
    text = json.dumps(state, indent=2, ensure_ascii=False)
    return _NUMBERS.sub(lambda m: "[" + ", ".join(re.split(r",\s*", m.group(1))) + "]", text) + "\n"


def _short(item: dict[str, Any]) -> str:
    if "role" in item:
        text = json.dumps(item.get("content"), ensure_ascii=False)
        return f"{item['role']} {item['id']}: {text[:60]}{'…' if len(text) > 60 else ''}"
    if "op" in item:
        return f"v{item['version']} {item['op']} {json.dumps(item['detail'], ensure_ascii=False)}"
    return json.dumps(item, ensure_ascii=False)


def _changed(a: dict[str, Any], b: dict[str, Any]) -> str:
    keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    return ", ".join(f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in keys)


def _diff_list(where: str, what: str, old: list[Any], new: list[Any]) -> list[str]:
    keys = (
        [json.dumps(x, sort_keys=True) for x in old],
        [json.dumps(x, sort_keys=True) for x in new],
    )
    out: list[str] = []
    matcher = difflib.SequenceMatcher(a=keys[0], b=keys[1], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        olds, news = list(range(i1, i2)), list(range(j1, j2))
        # Pair items that keep their id (changed), else those at the same offset.
        pairs = [
            (i, j)
            for i in olds
            for j in news
            if "id" in old[i] and old[i].get("id") == new[j].get("id")
        ]
        if not pairs and len(olds) == len(news):
            pairs = list(zip(olds, news, strict=True))
        paired_old, paired_new = {i for i, _ in pairs}, {j for _, j in pairs}
        out += [
            f"{where}: changed {what} {i + 1} ({_short(old[i])}): {_changed(old[i], new[j])}"
            for i, j in pairs
        ]
        out += [
            f"{where}: missing {what} {i + 1} ({_short(old[i])})"
            for i in olds
            if i not in paired_old
        ]
        out += [
            f"{where}: extra {what} {j + 1} ({_short(new[j])})" for j in news if j not in paired_new
        ]
    return out


def diff_states(expected: State, actual: State) -> list[str]:
    """Readable differences, one per line, naming session and message; [] if equal."""
    out: list[str] = []
    old, new = expected.get("sessions", {}), actual.get("sessions", {})
    for sid in sorted(set(old) - set(new)):
        out.append(f"session {sid!r}: missing ({len(old[sid]['history'])} messages)")
    for sid in sorted(set(new) - set(old)):
        out.append(f"session {sid!r}: extra ({len(new[sid]['history'])} messages)")
    for sid in sorted(set(old) & set(new)):
        a, b = old[sid], new[sid]
        where, start = f"session {sid!r}", len(out)
        for key in ("version", "length", "expires_at"):
            if a.get(key) != b.get(key):
                out.append(f"{where}: {key} {a.get(key)!r} -> {b.get(key)!r}")
        out += _diff_list(f"{where} history", "message", a["history"], b["history"])
        snaps_a = {s["name"]: s for s in a["snapshots"]}
        snaps_b = {s["name"]: s for s in b["snapshots"]}
        for name in snaps_a.keys() - snaps_b.keys():
            out.append(f"{where}: missing snapshot {name!r}")
        for name in snaps_b.keys() - snaps_a.keys():
            out.append(f"{where}: extra snapshot {name!r}")
        for name in sorted(snaps_a.keys() & snaps_b.keys()):
            if snaps_a[name] != snaps_b[name]:
                out.append(
                    f"{where}: changed snapshot {name!r}: {_changed(snaps_a[name], snaps_b[name])}"
                )
        if len(out) == start and list(snaps_a) != list(snaps_b):
            out.append(f"{where}: snapshots in another order: {list(snaps_a)} -> {list(snaps_b)}")
        out += _diff_list(f"{where} log", "event", a["log"], b["log"])
    if not out and expected != actual:
        out.append("the dumps differ outside sessions (format?)")
    return out


__all__ = ["canonical_state", "diff_states", "dump_state", "dump_state_async", "render_state"]
