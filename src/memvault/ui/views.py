"""What the inspector's pages show, built from the public API and the event log.

No I/O of its own and no web framework: each function takes an open
:class:`memvault.Store` and returns plain data the templates render. Nothing
here reads a backend's tables or keys.

The timeline is the event log in version order, each message under the event
that added it (append, fork), greyed when it is no longer visible (popped,
trimmed, cleared, rolled back), with the other events (pop, trim, clear,
snapshot, rollback) as markers where they happened. It is paged by events,
newest page first, so the first view of a 10,000-message session reads only the
newest messages: the messages of one page come from a few
``history(at_version=N, last=M)`` reads (one per stretch of consecutive appends),
and whether they are still visible from ``history(last=K)`` with K the number of
messages added since the page starts (a visible message added later than another
always sits above it in the chain).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import memvault
from memvault.errors import InvalidArgumentError, VersionNotFoundError
from memvault.messages import Message
from memvault.model import Event, SessionInfo, Snapshot
from memvault.paging import MAX_MATCH, ORDERS

SESSIONS_PAGE = 50
"""Sessions per page of the sessions list."""
PAGE_MESSAGES = 100
"""A timeline page holds events until it holds at least this many messages."""
SORTS = ORDERS


@dataclass(frozen=True)
class SessionsPage:
    """One page of the sessions list.

    Attributes:
        rows: the page's sessions.
        cursor: the next page's cursor (None: this is the last page).
        number: the page's number in the walk (1: the first).
        sort / desc / query: the order, its direction and the id filter.
        note: why the page asked for is not the one shown, if it is not.
    """

    rows: list[SessionInfo]
    cursor: str | None
    number: int
    sort: str
    desc: bool
    query: str
    note: str = ""


def sessions_page(
    store: memvault.Store,
    query: str = "",
    sort: str = "id",
    desc: bool = False,
    cursor: str = "",
    number: int = 1,
) -> SessionsPage:
    """One page of ``store.sessions_page``: the same cost at any number of sessions,
    in any order. A cursor that no longer fits (edited, or from another order or
    filter) starts the list again, saying so."""
    sort = sort if sort in SORTS else "id"
    query, note = query[:MAX_MATCH], ""
    try:
        page = store.sessions_page(
            SESSIONS_PAGE, cursor=cursor or None, order=sort, descending=desc, match=query
        )
    except InvalidArgumentError:
        page, number = (
            store.sessions_page(SESSIONS_PAGE, order=sort, descending=desc, match=query),
            1,
        )
        note = "that page link no longer applies: back to the first page"
    return SessionsPage(page.sessions, page.cursor, max(1, number), sort, desc, query, note)


@dataclass(frozen=True)
class Visible:
    """Message ids visible now (full view), and those of them a summary stands for."""

    ids: set[str]
    summarized: set[str]


@dataclass
class Item:
    """One message of the timeline, as it was added, and whether it is visible now."""

    message: Message
    visible: bool
    summarized: bool = False  # visible, and stood for by a summary in the context view
    arguments: dict[str, str] = field(default_factory=dict)  # tool call id -> pretty JSON
    content: str = ""


@dataclass
class Entry:
    """One event of the timeline and the messages it added."""

    event: Event
    items: list[Item]
    more: int = 0  # messages of the event not shown (over PAGE_MESSAGES)
    note: str = ""


@dataclass(frozen=True)
class Timeline:
    """One page of a session's timeline, oldest entry first."""

    info: SessionInfo
    entries: list[Entry]
    snapshots: list[Snapshot]
    versions: list[int]  # the oldest kept and the two newest (the diff's defaults)
    older: int | None  # the ``before`` of the next older page, None: this is the first
    newer: int | None  # the ``before`` of the next newer page (0: the newest page)
    dropped: str = ""  # events compacted away before the oldest kept one
    earlier: list[Item] = field(default_factory=list)  # the history the kept log starts from
    earlier_more: int = 0  # older messages of it not shown


def timeline(store: memvault.Store, session_id: str, before: int | None = None) -> Timeline | None:
    """The page of events with versions below ``before`` (None: the newest page)."""
    s = store.session(session_id)
    info = s.info()
    if info is None:
        return None
    events = s.log()
    end = len(events) if before is None else sum(1 for e in events if e.version < before)
    start = _start(events, end)
    page = events[start:end]
    visible = _visible_ids(s, events[start:])
    entries = [Entry(e, []) for e in page]
    for run in _runs(entries):
        _fill(s, run, visible, info.version)
    _summaries(s, [e for e in entries if e.event.op == "summarize"])
    newer = None
    if end < len(events):  # the newest page whose window still reaches this one's end
        reach = end + 1  # _start grows with its end: stop at the first that starts later
        while reach < len(events) and _start(events, reach + 1) <= end:
            reach += 1
        newer = 0 if reach == len(events) else events[reach].version
    dropped, earlier, more = "", list[Item](), 0
    if start == 0 and (not events or events[0].version > 1):
        dropped, earlier, more = _before_log(s, info, events)
    versions = sorted({e.version for e in events})
    return Timeline(
        info,
        entries,
        s.snapshots(),
        versions[:1] + versions[-2:],
        page[0].version if start > 0 and page else None,
        newer,
        dropped,
        earlier,
        more,
    )


def _before_log(
    s: memvault.Session, info: SessionInfo, events: list[Event]
) -> tuple[str, list[Item], int]:
    """What the timeline cannot attribute to a kept event: the history the kept log
    starts from (its newest ``PAGE_MESSAGES``), each marked visible or not now."""
    if not events:
        what = "all events were dropped by compact(keep_events=...); the current history"
        messages = s.history(last=PAGE_MESSAGES, full=True)
        every = Visible({m.id for m in messages}, set())
        return what, [_item(m, every) for m in messages], info.length - len(messages)
    first = events[0]
    added = _added(first)
    what = (
        f"events before version {first.version} were dropped by compact(keep_events=...); "
        f"the history {'just before' if first.op == 'append' else 'at'} version "
        f"{first.version}"
    )
    try:
        messages = s.history(last=PAGE_MESSAGES + added, at_version=first.version)
        whole = len(s.history(at_version=first.version)) - added
    except VersionNotFoundError as exc:  # compacted meanwhile
        return str(exc), [], 0
    messages = messages[: len(messages) - added] if added else messages
    full = {m.id for m in s.history(full=True)}
    visible = Visible(full, full - {m.id for m in s.history()})
    return what, [_item(m, visible) for m in messages], max(0, whole - len(messages))


def _start(events: list[Event], end: int) -> int:
    """Where the page ending before ``events[end]`` starts: back until it holds
    ``PAGE_MESSAGES`` messages (each event other than an append counts one), never
    splitting the events of one version."""
    start, count = end, 0
    while start > 0 and count < PAGE_MESSAGES:
        start -= 1
        count += max(1, _added(events[start]))
    while 0 < start < end and events[start - 1].version == events[start].version:
        start -= 1
    return start


def _added(event: Event) -> int:
    return int(event.detail.get("messages", 0)) if event.op == "append" else 0


def _visible_ids(s: memvault.Session, since: list[Event]) -> Visible:
    """Which of the messages added by ``since`` and later are visible now (full view),
    and which of those a summary stands for (absent from the context view)."""
    # The full view also holds each summary right after the message it was taken
    # through: those of summarize events since then sit among the newest messages.
    added = sum(_added(e) for e in since) + sum(1 for e in since if e.op in ("fork", "summarize"))
    if not added:
        return Visible(set(), set())
    if any(e.op == "fork" for e in since):
        added = max(added, len(s.history(full=True)))
    full = {m.id for m in s.history(last=added, full=True)}
    return Visible(full, full - {m.id for m in s.history(last=added)})


def _summaries(s: memvault.Session, entries: list[Entry]) -> None:
    """Each summarize entry gets its summary message (read from the full view)."""
    if not entries:
        return
    by_id = {m.id: m for m in s.history(full=True)}
    for entry in entries:
        summary = by_id.get(str(entry.event.detail.get("summary_id")))
        if summary is None:
            entry.note = "this summary is no longer in the visible history"
        else:
            entry.items = [_item(summary, Visible({summary.id}, set()))]


def _runs(entries: list[Entry]) -> list[list[Entry]]:
    """Consecutive appends, each one's head after the previous one's: one read each.
    Only snapshots (which change nothing) may stand between them."""
    runs: list[list[Entry]] = []
    previous: Event | None = None
    for entry in entries:
        e = entry.event
        if e.op == "snapshot":
            continue
        if e.op in ("append", "fork"):
            if (
                previous is not None
                and previous.op == e.op == "append"
                and previous.head_after == e.head_before
            ):
                runs[-1].append(entry)
            else:
                runs.append([entry])
        previous = e
    return runs


def _at(s: memvault.Session, version: int, last: int, current: int) -> list[Message]:
    """``history(last=, at_version=version)``; at the current version, the plain read
    (no second log read), kept only if the version did not move meanwhile."""
    if version == current:
        messages = s.history(last=last, full=True)
        info = s.info()
        if info is not None and info.version == current:
            return messages
    return s.history(last=last, at_version=version)


def _fill(s: memvault.Session, run: list[Entry], visible: Visible, current: int) -> None:
    """Read the messages a run of entries added, newest ``PAGE_MESSAGES`` at most."""
    last = run[-1].event
    wanted = [_added(x.event) for x in run] if last.op == "append" else [None]
    total = sum(n or 0 for n in wanted) if last.op == "append" else None
    limit = PAGE_MESSAGES if total is None else min(total, PAGE_MESSAGES)
    try:
        messages = _at(s, last.version, limit, current)
    except VersionNotFoundError as exc:  # compacted meanwhile
        run[-1].note = str(exc)
        return
    if total is None:  # a fork: the whole copied history
        run[0].items = [_item(m, visible) for m in messages]
        return
    skipped = total - len(messages)
    for entry, n in zip(run, wanted, strict=True):
        n = n or 0
        shown = max(0, n - skipped)
        entry.more, skipped = n - shown, max(0, skipped - n)
        entry.items = [_item(m, visible) for m in messages[:shown]]
        messages = messages[shown:]


def _item(m: Message, visible: Visible) -> Item:
    args = {c.id: _pretty(c.arguments) for c in m.tool_calls or []}
    content = (
        m.content
        if isinstance(m.content, str) or m.content is None
        else json.dumps(m.content, ensure_ascii=False, indent=2)
    )
    return Item(m, m.id in visible.ids, m.id in visible.summarized, args, content or "")


def _pretty(arguments: str) -> str:
    """Tool call arguments indented when they are JSON; else as the model emitted them."""
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False, indent=2)
    except ValueError:
        return arguments


@dataclass(frozen=True)
class Diff:
    """What changed between two states of a session, by message id."""

    a: str
    b: str
    added: list[Item]
    hidden: list[Item]
    kept: int


def resolve(s: memvault.Session, ref: str) -> list[Message]:
    """A state named ``v<N>`` (a version), or ``<snapshot name>``."""
    if ref[:1] == "v" and ref[1:].isdigit():
        return s.history(at_version=int(ref[1:]))
    for snap in s.snapshots():
        if snap.name == ref:
            return s.history(at_version=snap.version)
    raise memvault.SnapshotNotFoundError(f"session {s.id!r} has no snapshot {ref!r}")


def diff(store: memvault.Store, session_id: str, a: str, b: str) -> Diff:
    """Messages added and hidden going from state ``a`` to state ``b``."""
    s = store.session(session_id)
    old, new = resolve(s, a), resolve(s, b)
    old_ids, new_ids = {m.id for m in old}, {m.id for m in new}
    shown, gone = Visible(new_ids, set()), Visible(set(), set())
    return Diff(
        a,
        b,
        [_item(m, shown) for m in new if m.id not in old_ids],
        [_item(m, gone) for m in old if m.id not in new_ids],
        len(old_ids & new_ids),
    )
