"""The inspector's timeline as terminal lines (``memvault show SESSION --timeline``).

The same page as the web timeline (:func:`memvault.ui.views.timeline`): events in
version order with writer and time, each append's messages under it, hidden ones
marked where they were added, snapshot and rollback markers. Every stored string
goes through ``render`` (the CLI's escaping renderer); with ``color``, rich styles
roles and dims hidden messages (ANSI, for a terminal or ``less -R``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from urllib.parse import quote

from rich.console import Console
from rich.text import Text

from memvault.cli.terminal import plural, shown
from memvault.messages import Message
from memvault.ui.views import Entry, Item, Timeline

ROLE_STYLES = {
    "user": "bold blue",
    "assistant": "bold green",
    "tool": "bold yellow",
    "system": "bold magenta",
    "developer": "bold magenta",
}


def timeline_lines(
    sid: str, t: Timeline, render: Callable[[Message], str], *, color: bool = False
) -> Iterator[str]:
    """The lines of one timeline page, oldest event first."""
    console = Console(force_terminal=True, color_system="standard", width=10_000) if color else None

    def styled(text: Text) -> str:
        if console is None:
            return text.plain
        with console.capture() as captured:
            console.print(text, end="", soft_wrap=True)
        return captured.get()

    info = t.info
    yield styled(
        Text.assemble(
            (shown(sid), "bold"), f"  version {info.version}, {info.length} visible messages"
        )
    )
    if t.dropped and t.older is None:
        yield f"({t.dropped}:)"
        if t.earlier_more:
            yield f"      ({plural(t.earlier_more, 'older message')} not shown)"
        yield from (styled(_message_line(item, render)) for item in t.earlier)
    if t.older is not None:
        yield f"(older events: memvault show {shown(quote(sid))} --timeline --before {t.older})"
    for entry in t.entries:
        yield styled(_event_line(entry))
        if entry.more:
            yield f"      ({plural(entry.more, 'earlier message')} of this event not shown)"
        yield from (styled(_message_line(item, render)) for item in entry.items)


def _message_line(item: Item, render: Callable[[Message], str]) -> Text:
    m = item.message
    line = Text.assemble(
        "      ",
        (f"{m.role:<9}", ROLE_STYLES.get(m.role, "bold")),
        "  ",
        render(m),
        "" if item.visible else "  [hidden]",
        "  [summarized]" if item.summarized else "",
    )
    if m.tool_call_id:
        line.append(f"  ← result of {shown(m.tool_call_id)}", "dim")
    for call in m.tool_calls or []:
        line.append(f"  [{shown(call.id)}]", "dim")
    if not item.visible:
        line.stylize("dim strike")
    return line


def _event_line(entry: Entry) -> Text:
    e = entry.event
    d = e.detail
    what = {
        "append": f"+{plural(int(d.get('messages', 0)), 'message')}",
        "pop": "hid the newest message",
        "trim": f"hid {plural(int(d.get('hidden', 0)), 'message')}",
        "clear": f"hid {plural(int(d.get('hidden', 0)), 'message')}",
        "snapshot": f"snapshot {d.get('name')!r}",
        "rollback": f"to {d.get('to')!r}, saved {d.get('saved')!r}",
        "summarize": f"summarized {plural(int(d.get('messages', 0)), 'message')} through "
        f"{d.get('through')!r}",
        "fork": f"from {d.get('from')!r}" + (f" at {d.get('at')!r}" if d.get("at") else ""),
    }.get(e.op, "")
    marker = (
        "yellow"
        if e.op in ("snapshot", "rollback", "summarize")
        else "red"
        if e.op in ("pop", "trim", "clear")
        else "cyan"
    )
    return Text.assemble(
        (f"v{e.version:<4}", "bold"),
        (f"{e.op:<9}", marker),
        shown(what),
        "  ",
        (shown(e.writer), "dim"),
        "  ",
        (e.at.strftime("%Y-%m-%d %H:%M:%S"), "dim"),
    )
