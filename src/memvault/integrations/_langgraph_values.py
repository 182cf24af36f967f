"""What a MemvaultSaver keeps in memory, and the copies of it that it hands out.

A stored checkpoint node never changes (its id hashes its body), so the value a
channel has at a node can be decoded once and kept: :class:`Lru` holds such
*canonical* values, keyed by ``(session, node, channel)``, and bounded. Canonical
values are private: they are never handed to a caller, who gets a :func:`fresh`
copy instead, so a graph that mutates what ``get_tuple`` returned (appends to the
list, sets a message's field, edits a message's ``tool_calls``) changes its copy
only, and the next read, and the next ``put``'s comparison with the parent, still
see what was stored.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from pydantic import BaseModel

MISSING: Any = object()  # Lru.get's answer for a key it does not hold (None is a value)

_SCALARS = frozenset({str, int, float, bool, type(None), bytes})  # immutable: shared
_models: dict[type, bool] = {}  # type -> is a pydantic model (isinstance is slow on them)
_set = object.__setattr__


class Lru:
    """A bounded, thread-safe mapping that forgets its least recently used keys."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        """The value of ``key`` (now the most recently used), or :data:`MISSING`."""
        with self._lock:
            value = self._items.get(key, MISSING)
            if value is not MISSING:
                self._items.move_to_end(key)
            return value

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def drop(self, unwanted: Callable[[Any], bool]) -> None:
        """Forget every key ``unwanted(key)`` is true for."""
        with self._lock:
            for key in [k for k in self._items if unwanted(k)]:
                del self._items[key]


def is_model(kind: type) -> bool:
    """``kind`` is a pydantic model class (cached: isinstance is slow on them)."""
    known = _models.get(kind)
    if known is None:
        known = _models[kind] = issubclass(kind, BaseModel)
    return known


def fresh(value: Any) -> Any:
    """A copy of ``value`` that shares nothing mutable with it.

    Lists, dicts and tuples are rebuilt, pydantic models (LangChain's messages) are
    copied field by field without validating again, immutable scalars are shared,
    anything else goes through ``copy.deepcopy``. Several times cheaper than
    ``copy.deepcopy`` or decoding, which matters for a ``messages`` list of
    thousands handed out at every ``get_tuple``.
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    # Loops, not comprehensions: this runs for every field of every message.
    if kind is list:
        items = []
        for x in value:
            items.append(x if type(x) in _SCALARS else fresh(x))
        return items
    if kind is dict:
        mapping = {}
        for k, x in value.items():
            mapping[k] = x if type(x) in _SCALARS else fresh(x)
        return mapping
    if kind is tuple:
        return tuple([fresh(x) for x in value])
    if not is_model(kind):
        return copy.deepcopy(value)
    new = object.__new__(kind)
    fields = value.__dict__.copy()  # most of a message's fields are immutable scalars
    for name, x in fields.items():
        of = type(x)
        if of in _SCALARS:
            continue
        if not x and (of is dict or of is list):  # most of the others
            fields[name] = {} if of is dict else []
        else:
            fields[name] = fresh(x)
    _set(new, "__dict__", fields)
    _set(new, "__pydantic_fields_set__", set(value.__pydantic_fields_set__))
    extra, private = value.__pydantic_extra__, value.__pydantic_private__
    _set(new, "__pydantic_extra__", extra if extra is None else fresh(extra) if extra else {})
    _set(new, "__pydantic_private__", private if private is None else fresh(private))
    return new
