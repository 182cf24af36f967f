"""How the ``memvault`` command writes: every string exactly as stored (nothing is
read as markup), control characters escaped, plain lines that stream, JSON Lines
for scripts, and a pager when the output is a terminal and longer than the screen.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from rich.cells import cell_len

# C0 and C1 control characters (ESC, NUL, BEL, CSI...), the Unicode line and
# paragraph separators, and the bidirectional overrides that reorder what is shown.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
_C1 = re.compile("[\x7f-\x9f]")


def _escape(c: str) -> str:
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def shown(text: str, *, newlines: bool = False) -> str:
    """``text`` safe for a terminal: control characters as ``\\x1b``, ``\\n``...
    (with ``newlines``, newlines and tabs are kept as they are)."""
    if newlines:
        return _CONTROL.sub(
            lambda m: m.group() if m.group() in "\n\t" else _escape(m.group()), text
        )
    return _CONTROL.sub(lambda m: _escape(m.group()), text)


def plural(count: int, word: str) -> str:
    """``1 session``, ``2 sessions``."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def json_line(record: Any) -> str:
    """One JSON Lines record; exact (it parses back to ``record``) and terminal-safe:
    json escapes C0 controls itself, and DEL and C1 are escaped here."""
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    return _C1.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def columns(header: Sequence[str], rows: Iterable[Sequence[str]]) -> Iterator[str]:
    """Lines of left-aligned columns (two spaces apart), every cell escaped."""
    table = [list(header), *([shown(cell) for cell in row] for row in rows)]
    widths = [max(cell_len(row[i]) for row in table) for i in range(len(header) - 1)]
    for row in table:
        cells = [c + " " * (w - cell_len(c)) for c, w in zip(row, widths, strict=False)]
        yield "  ".join([*cells, row[-1]]).rstrip()


def emit(lines: Iterable[str]) -> None:
    """Write ``lines``: streamed when piped; on a terminal, through the pager
    (``$PAGER``, else ``less``) when they do not fit on the screen."""
    if sys.stdout.isatty():
        lines = iter(lines)
        room = shutil.get_terminal_size().lines - 1
        first = list(itertools.islice(lines, room))
        if len(first) == room and _page(itertools.chain(first, lines)):
            return
        lines = first
    _write(lines, sys.stdout)


def _write(lines: Iterable[str], stream: Any) -> None:
    for line in lines:
        stream.write(line)
        stream.write("\n")
    stream.flush()


def _page(lines: Iterable[str]) -> bool:
    """Feed ``lines`` to the pager; False if there is none to run."""
    command = shlex.split(os.environ.get("PAGER") or "less")
    try:
        pager = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            env={"LESS": "-FRX", **os.environ},
        )
    except OSError:
        return False
    assert pager.stdin is not None
    try:
        with pager.stdin:
            _write(lines, pager.stdin)
    except BrokenPipeError:  # the user quit the pager before the end
        pass
    pager.wait()
    return True


@contextlib.contextmanager
def progress_bar(what: str, *, enabled: bool = True) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr while the block runs, yielding ``update(done, total)``;
    only when stderr is a terminal and ``enabled`` (off for ``--json``), so pipes, logs
    and scripts never see it. It is cleared when the block ends."""
    if not (enabled and sys.stderr.isatty()):
        yield lambda done, total: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    with Progress(
        TextColumn(shown(what), markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(what, total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


def say(text: str) -> None:
    """One line of status on stdout, escaped."""
    sys.stdout.write(shown(text) + "\n")


def error(text: str) -> None:
    """``error: <text>`` as one line on stderr."""
    sys.stderr.write(f"error: {shown(text)}\n")
    sys.stderr.flush()
