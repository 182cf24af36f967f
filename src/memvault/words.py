"""Words: what search matches, the same for every backend and index.

Words are runs of Unicode letters and digits, compared in lower case (``casefold``).
A message's text is its content (the text parts of a list content), its name, and
its tool calls' names and arguments. A low module: backends index these words.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from memvault.messages import Message

_WORD = re.compile(r"[^\W_]+")
K1, B = 1.2, 0.75
"""Okapi BM25's parameters, wherever memvault computes it."""


def words(text: str) -> list[str]:
    """The words of ``text``, case-folded."""
    return _WORD.findall(text.casefold())


def _text(content: object, name: object, calls: Iterable[tuple[str, str]]) -> str:
    parts: list[str] = []
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        parts += [
            text for p in content if isinstance(p, dict) and isinstance(text := p.get("text"), str)
        ]
    if isinstance(name, str):
        parts.append(name)
    for call_name, arguments in calls:
        parts += [call_name, arguments]
    return "\n".join(parts)


def text_of(message: Message) -> str:
    """The searchable text of a message."""
    return _text(message.content, message.name, ((c.name, c.arguments) for c in message.tool_calls))


def body_text(body: str | bytes) -> str:
    """The searchable text of a stored message (its encoded envelope), read with
    ``json``, not decoded into a Message (what :func:`text_of` of the decoded message
    says, faster); an error (ValueError, KeyError, TypeError...) for damaged data."""
    m: dict[str, Any] = json.loads(body)["m"]
    calls = m.get("tool_calls") or ()
    return _text(m.get("content"), m.get("name"), ((c["name"], c["arguments"]) for c in calls))


def body_words(body: str) -> list[str]:
    """The words of a stored message (its encoded envelope): what the indexes store.
    Read with ``json``, not decoded into a Message: every append pays for it."""
    return words(body_text(body))


__all__ = ["K1", "B", "body_text", "body_words", "text_of", "words"]
