"""What a MemvaultSaver keeps in memory, and the copies of it that it hands out.

A stored checkpoint node never changes (its id hashes its body), so the value a
channel has at a node can be decoded once and kept: :class:`Lru` holds such
*canonical* values, keyed by ``(session, node, channel)``, and bounded. Canonical
values are private: they are never handed to a caller, who gets a :func:`fresh`
copy instead, so a graph that mutates what ``get_tuple`` returned (appends to the
list, sets a message's field, edits a message's ``tool_calls``) changes its copy
only, and the next read, and the next ``put``'s comparison with the parent, still
see what was stored. A ``put`` keeps :func:`fresh` copies of what it was given,
for the same reason.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, ItemsView, Iterable, Iterator
from typing import Any, Generic, TypeVar, cast

from pydantic import BaseModel

from memvault.messages import set_dict, set_extra, set_fields_set, set_private

MISSING: Any = object()  # Lru.get's answer for a key it does not hold (None is a value)
FOLD = 64  # the newer entries a Grown copies before it folds them into its base
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_SCALARS = frozenset({str, int, float, bool, type(None), bytes})  # immutable: shared
_models: dict[type, bool] = {}  # type -> is a pydantic model (isinstance is slow on them)


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


class Grown(Generic[K, V]):
    """A dict that is copied often while it grows, sharing most of it between copies.

    It holds ``base`` (shared by the copies, never changed) and ``top``, the newer
    entries (each copy's own). A :meth:`copy` copies ``top`` only, folding it into a
    new base when it holds more than :data:`FOLD` entries and more than the square
    root of base's: a copy costs O(sqrt(n)), amortized, instead of O(n).
    """

    __slots__ = ("base", "top")

    def __init__(self, base: dict[K, V] | None = None, top: dict[K, V] | None = None) -> None:
        self.base: dict[K, V] = {} if base is None else base
        self.top: dict[K, V] = {} if top is None else top

    def copy(self) -> Grown[K, V]:
        size = len(self.top)
        if size > FOLD and size * size > len(self.base):
            return Grown({**self.base, **self.top})
        return Grown(self.base, self.top.copy())

    def __getitem__(self, key: K) -> V:
        value = self.top.get(key, MISSING)
        return self.base[key] if value is MISSING else cast(V, value)

    def get(self, key: K, default: Any = None) -> Any:
        value = self.top.get(key, MISSING)
        return self.base.get(key, default) if value is MISSING else value

    def __contains__(self, key: object) -> bool:
        return key in self.top or key in self.base

    def __setitem__(self, key: K, value: V) -> None:
        self.top[key] = value

    def setdefault(self, key: K, value: V) -> V:
        found = self.get(key, MISSING)
        if found is MISSING:
            self.top[key] = found = value
        return cast(V, found)

    def items(self) -> ItemsView[K, V]:
        return {**self.base, **self.top}.items()

    def __iter__(self) -> Iterator[K]:
        return iter({**self.base, **self.top})


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
    return value if kind in _SCALARS else (_copies.get(kind) or _copy_of(kind))(value)


# The copy of each type fresh() met: a look-up instead of a chain of type tests, in
# loops, not comprehensions: these run for every field of every message.


def _copy_of(kind: type) -> Callable[[Any], Any]:
    copy_it = _copies[kind] = _model if is_model(kind) else copy.deepcopy
    return copy_it


def _list(value: Iterable[Any]) -> list[Any]:
    items = []
    for x in value:
        kind = type(x)
        items.append(x if kind in _SCALARS else (_copies.get(kind) or _copy_of(kind))(x))
    return items


def _dict(value: dict[Any, Any]) -> dict[Any, Any]:
    mapping = {}
    for k, x in value.items():
        kind = type(x)
        mapping[k] = x if kind in _SCALARS else (_copies.get(kind) or _copy_of(kind))(x)
    return mapping


def _tuple(value: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(_list(value))


def _model(value: BaseModel) -> BaseModel:
    new = object.__new__(type(value))
    fields = value.__dict__.copy()  # most of a message's fields are immutable scalars
    for name, x in fields.items():
        kind = type(x)
        if kind in _SCALARS:
            continue
        if kind is dict:  # most of the others, and most of those empty
            fields[name] = _dict(x) if x else {}
        elif kind is list:
            fields[name] = _list(x) if x else []
        else:
            fields[name] = (_copies.get(kind) or _copy_of(kind))(x)
    set_dict(new, fields)
    set_fields_set(new, set(value.__pydantic_fields_set__))
    extra, private = value.__pydantic_extra__, value.__pydantic_private__
    set_extra(new, extra if extra is None else fresh(extra) if extra else {})
    set_private(new, private if private is None else fresh(private))
    return new


_copies: dict[type, Callable[[Any], Any]] = {list: _list, dict: _dict, tuple: _tuple}
