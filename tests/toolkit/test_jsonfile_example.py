"""The worked third-party backend (memvault.examples.jsonfile) beyond the contract
suite: what its transactions save. test_thirdparty_example.py stays the ten-line
file docs/testing.md shows word for word."""

import json

import memvault
from memvault import Message
from memvault.reindex import reindex
from memvault.testing import ConceptEmbedder


def test_only_writes_change_the_json_file(tmp_path) -> None:
    """The example saves what a write transaction did, and nothing else: reading a
    store never written creates no file; reindex's vectors and compact's reclaiming
    are in the file. Failing: a read begun as a write (the file written), a write
    begun as a read (nothing saved)."""
    path = tmp_path / "store.json"
    with memvault.open(f"jsonfile://{path}") as store:
        assert store.session("a").info() is None and store.sessions_page().sessions == []
        assert not path.exists()
        store.session("a").append([Message.user("a cat")])
        store.session("b").append([Message.user("a car")])
    with memvault.open(f"jsonfile://{path}", embedder=ConceptEmbedder()) as store:
        assert reindex(store).embedded == 2
        assert len(json.loads(path.read_text())["vectors"]["items"]) == 2
        store.session("b").delete()
        assert store.compact().vectors == 1
        assert len(json.loads(path.read_text())["vectors"]["items"]) == 1
