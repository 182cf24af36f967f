"""Hypothesis strategies for JSON data, shared by the framework strategies."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

# Any valid Unicode: NUL, RTL marks, emoji, astral planes; never a lone surrogate.
text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
short_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=6)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
)

json_values: st.SearchStrategy[Any] = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(short_text, inner, max_size=3),
    max_leaves=8,
)

json_objects: st.SearchStrategy[dict[str, Any]] = st.dictionaries(
    short_text, json_values, max_size=3
)


def unique_ids(values: list[Any], get: Any, put: Any) -> list[Any]:
    """Make the framework ids of ``values`` unique (suffixing their position), so a
    generated batch never repeats an earlier object's id by chance: repeating one
    on purpose is tested explicitly (idempotency)."""
    out = []
    for i, value in enumerate(values):
        key = get(value)
        out.append(put(value, f"{key}#{i}") if isinstance(key, str) else value)
    return out
