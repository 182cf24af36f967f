"""The worked third-party backend (memvault.examples.jsonfile) beyond the contract
suite: what its transactions save. test_thirdparty_example.py stays the ten-line
file docs/testing.md shows word for word."""

import json

import memvault
from memvault import Message
from memvault.cli.reindex import reindex
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


def test_a_summary_is_saved_through_the_plain_engine(tmp_path) -> None:
    """The example subclasses the plain Engine, whose summary insert is the one no
    built-in backend uses (theirs index summaries): a summary is saved and read back,
    from a fresh process's view of the file. Failing: a summary never stored."""
    path = tmp_path / "store.json"
    with memvault.open(f"jsonfile://{path}") as store:
        s = store.session("s")
        s.append([Message.user("one", id="1"), Message.user("two", id="2")])
        s.summarize(Message.system("one and two", id="S"), through="2")
    with memvault.open(f"jsonfile://{path}") as store:
        s = store.session("s")
        assert [m.content for m in s.history()] == ["one and two"]
        assert [m.content for m in s.history(full=True)] == ["one", "two", "one and two"]
