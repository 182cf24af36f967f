"""docs/testing.md runs as written: its example is the test file that certifies the
third-party backend, and it documents every part and tool it names."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
DOC = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")


def test_the_ten_line_example_is_the_test_file_that_runs() -> None:
    match = re.search(r"<!-- example: (\S+) -->\n```python\n(.*?)```", DOC, re.S)
    assert match, "the example block is missing from docs/testing.md"
    path, code = match.groups()
    assert (ROOT / path).read_text(encoding="utf-8") == code
    assert len(code.strip().splitlines()) <= 12


def test_every_contract_part_is_importable_from_the_toolkit() -> None:
    """docs/testing.md says each part is a class in ``memvault.testing``: every one the
    contract package exports is there (PagingContract was not)."""
    import memvault.testing as toolkit
    import memvault.testing.contract as contract

    missing = [name for name in contract.__all__ if name not in toolkit.__all__]
    assert missing == []
    for name in contract.__all__:
        assert getattr(toolkit, name) is getattr(contract, name)


def test_every_part_and_public_name_is_documented() -> None:
    import memvault.testing as toolkit

    undocumented = [
        name
        for name in toolkit.__all__
        if name.endswith("Contract")
        and f"`{name}`" not in DOC
        and name not in ("AsyncStoreContract",)
    ]
    assert undocumented == []
    for name in (
        "check_concurrent_appends",
        "dump_state",
        "store_snapshot",
        "seeded_store",
        "inject_faults",
        "check_against_model",
        "analyze_history",
    ):
        assert name in DOC
