"""A store or session handed to another process (``multiprocessing``'s spawn start
method pickles its arguments) is refused with an error that says what to do instead."""

from __future__ import annotations

import asyncio
import pickle
from pathlib import Path

import pytest

import memvault


@pytest.mark.parametrize("face", ["sync", "async"])
def test_stores_and_sessions_refuse_pickling_and_say_why(tmp_path: Path, face: str) -> None:
    """Before, pickling failed on an internal object: "cannot pickle '_thread._local'
    object", naming nothing a user wrote."""
    url = f"sqlite:///{tmp_path / 'p.db'}"
    store = memvault.open(url) if face == "sync" else memvault.open_async(url)
    for thing in (store, store.session("s")):
        with pytest.raises(
            TypeError,
            match=rf"memvault {type(thing).__name__} cannot be "
            r"pickled .*URL and options",
        ):
            pickle.dumps(thing)
    if isinstance(store, memvault.AsyncStore):
        asyncio.run(store.close())
    else:
        store.close()
