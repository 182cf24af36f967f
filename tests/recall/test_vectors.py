"""Embedders, reciprocal rank fusion and the vectors each backend stores, from outside."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import memvault
from memvault import ConfigurationError, ConflictError, Hit, Message
from memvault.embedders import WordLlamaEmbedder, as_embedder
from memvault.testing import ConceptEmbedder
from memvault.vectors import fuse


def hit(name: str, session: str = "s") -> Hit:
    return Hit(session, Message.user(name), int(name[1:]), 0.0)


def test_fuse_ranks_by_reciprocal_rank() -> None:
    """A hit in both lists outranks one that heads a single list; scores are the sums
    of 1/(60 + rank); ties keep first appearance; k caps. Failing: any of those."""
    lexical = [hit("m1"), hit("m2"), hit("m3")]
    semantic = [hit("m4"), hit("m2"), hit("m1")]
    fused = fuse([lexical, semantic], k=10)
    assert [h.position for h in fused] == [1, 2, 4, 3]
    assert [h.score for h in fused] == pytest.approx([1 / 61 + 1 / 63, 2 / 62, 1 / 61, 1 / 63])
    assert [h.position for h in fuse([lexical, semantic], k=2)] == [1, 2]
    assert [h.position for h in fuse([[hit("m7")], [hit("m5")]], k=2)] == [7, 5]  # a tie
    assert fuse([[], []], k=3) == []
    # the same position in two sessions is two hits
    assert len(fuse([[hit("m1", "a")], [hit("m1", "b")]], k=5)) == 2


def test_callables_and_known_models_are_adapted_without_importing_them() -> None:
    """A callable (dims probed), a sentence-transformers, an OpenAI and a fastembed
    look-alike all become Embedders; anything else is refused. Failing: an adapter
    calls the wrong method, or dims are wrong."""
    fn = as_embedder(lambda texts: [[1.0, 0.0, 0.0] for _ in texts])
    assert fn.dims == 3 and fn.embed(["a", "b"]) == [[1.0, 0.0, 0.0]] * 2

    class SentenceModel:
        def get_sentence_embedding_dimension(self) -> int:
            return 2

        def encode(self, texts: list[str]) -> Any:
            return np.ones((len(texts), 2))

    st = as_embedder(SentenceModel(), dims=2)
    assert st.name.startswith("sentence-transformers") and st.embed(["x"]).shape == (1, 2)

    def create(model: str, input: list[str]) -> Any:  # noqa: A002 - the OpenAI keyword
        return SimpleNamespace(data=[SimpleNamespace(embedding=[0.5] * 4) for _ in input])

    client = SimpleNamespace(embeddings=SimpleNamespace(create=create))
    openai = as_embedder(client, model="text-embedding-3-small")
    assert (openai.dims, openai.name) == (4, "openai:text-embedding-3-small:4")
    with pytest.raises(ConfigurationError, match="model="):
        as_embedder(client)
    fast = SimpleNamespace(model_name="bge", embed=lambda texts: (np.zeros(5) for _ in texts))
    assert as_embedder(fast).dims == 5
    with pytest.raises(ConfigurationError, match="embedder must be"):
        as_embedder(42)
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, memvault, memvault.embedders, memvault.vectors; "
            "print(sorted(m for m in ('openai', 'sentence_transformers', 'fastembed', "
            "'wordllama', 'numpy') if m in sys.modules))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert loaded == "[]"


def test_the_builtin_embedder_loads_offline() -> None:
    """wordllama's model loads from the wheel with every network connection refused,
    and embeds into 256 dimensions. Failing: it downloads its tokenizer."""
    code = """
import socket
def refuse(*args, **kwargs):
    raise OSError("network disabled by the test")
socket.socket.connect = refuse
socket.create_connection = refuse
from memvault.embedders import as_embedder
e = as_embedder("wordllama")
v = e.embed(["the weather in Paris", "rain in France", "stock prices"])
print(e.dims, v.shape)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["256", "(3,", "256)"]


def test_the_builtin_embedder_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "wordllama", None)
    with pytest.raises(ConfigurationError, match=r"memvault\[recall\]"):
        WordLlamaEmbedder()


def test_wordllama_ranks_by_meaning() -> None:
    """The built-in embedder, end to end: a question finds the message about its
    subject first with no word in common."""
    with memvault.open("memory://", embedder="wordllama") as store:
        s = store.session("s")
        s.append(
            [
                Message.user("stock prices fell sharply on monday"),
                Message.user("it will rain in the afternoon"),
                Message.user("my cat sleeps on the sofa"),
            ]
        )
        assert (
            s.search("weather forecast", k=1)[0].message.content == "it will rain in the afternoon"
        )


def vectors_in(path: Path) -> int:
    with sqlite3.connect(path) as db:
        if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'vectors'").fetchone() is None:
            return -1
        count: int = db.execute("SELECT count(*) FROM vectors").fetchone()[0]
        return count


def test_sqlite_stores_vectors_in_the_write_transaction(tmp_path: Path) -> None:
    """With no embedder nothing is created; with one, each distinct text gets one
    vector, in the append's own transaction: a refused append stores none.
    Failing: vectors written outside the transaction, or per message."""
    path = tmp_path / "v.db"
    with memvault.open(f"sqlite:///{path}") as store:
        store.session("s").append([Message.user("plain")])
    assert vectors_in(path) == -1
    with memvault.open(f"sqlite:///{path}", embedder=ConceptEmbedder()) as store:
        s = store.session("s")
        s.append([Message.user("a cat"), Message.user("a cat"), Message.user("a dog")])
        assert vectors_in(path) == 2
        with pytest.raises(ConflictError):
            s.append([Message.user("a new text")], expect_version=0)
        assert vectors_in(path) == 2
        s.summarize(Message.system("cats and dogs"), through=s.history()[-1].id)
        assert vectors_in(path) == 3


def test_async_search_with_a_native_async_embedder(tmp_path: Path) -> None:
    """The async facade awaits ``aembed`` when the embedder has one."""

    class Async(ConceptEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self.awaited = 0

        async def aembed(self, texts: list[str]) -> list[list[float]]:
            self.awaited += 1
            return self.embed(texts)

    embedder = Async()

    async def main() -> list[Hit]:
        async with memvault.open_async(f"sqlite:///{tmp_path}/a.db", embedder=embedder) as store:
            await store.session("s").append([Message.user("a kitten"), Message.user("a car")])
            return await store.session("s").search("feline")

    hits = asyncio.run(main())
    assert [h.message.content for h in hits] == ["a kitten"] and embedder.awaited == 2


def test_a_read_only_store_is_searched_with_an_embedder(tmp_path: Path) -> None:
    """Searching with an embedder writes nothing: a read-only SQLite store (mode=ro)
    with no vectors yet is ranked by meaning, and the first write records the
    embedder. Failing: opening or searching records the embedder."""
    url = f"sqlite:///{tmp_path}/ro.db"
    with memvault.open(url) as store:
        store.session("s").append([Message.user("a kitten"), Message.user("a car")])
    with memvault.open(url, embedder=ConceptEmbedder(), mode="ro") as store:
        assert [h.message.content for h in store.session("s").search("feline")] == ["a kitten"]
    assert vectors_in(tmp_path / "ro.db") == -1
    with memvault.open(url, embedder=ConceptEmbedder()) as store:
        store.session("s").append([Message.user("a puppy")])
    with pytest.raises(ConfigurationError, match="reindex"):
        memvault.open(url, embedder=ConceptEmbedder(name="other"))


def test_compact_keeps_a_vector_stored_while_it_sweeps(tmp_path: Path) -> None:
    """compact lists the stored vectors before it reads the sessions: a vector
    another handle stores meanwhile is kept. A text whose last user had gone and
    that is written again meanwhile may lose its vector: search then embeds it at
    query time and finds it all the same, and reindex stores it again. Failing: the
    sessions read before the vectors are listed (a fresh vector deleted)."""
    url = f"sqlite:///{tmp_path}/race.db"
    with (
        memvault.open(url, embedder=ConceptEmbedder()) as store,
        memvault.open(url, embedder=ConceptEmbedder()) as writer,
    ):
        store.session("old").append([Message.user("a feline again")])
        store.session("old").delete()
        sessions = store.backend.sessions

        def write_meanwhile(now: float) -> list[str]:
            listed = sessions(now)  # the vectors are listed, the sessions not yet read
            writer.session("new").append(
                [Message.user("a new puppy"), Message.user("a feline again")]
            )
            return listed

        store.backend.sessions = write_meanwhile  # type: ignore[method-assign]
        assert store.compact().vectors == 1  # the reused text's: at worst that
        assert vectors_in(tmp_path / "race.db") == 1  # the puppy's, stored meanwhile
        hits = writer.session("new").search("cat")
        assert [h.message.content for h in hits] == ["a feline again"]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "memvault",
            "reindex",
            "--url",
            url,
            "--embedder",
            "memvault.testing:ConceptEmbedder",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert vectors_in(tmp_path / "race.db") == 2


def test_the_cli_compact_reports_the_vectors_it_reclaimed(tmp_path: Path) -> None:
    """`memvault compact` says how many search vectors it deleted (and --json has
    them). Failing: the count is lost between Store.compact and the command."""
    url = f"sqlite:///{tmp_path}/cli.db"
    with memvault.open(url, embedder=ConceptEmbedder()) as store:
        store.session("a").append([Message.user("a cat"), Message.user("a dog")])
        store.session("b").append([Message.user("a car")])
        store.session("a").delete()
    command = [sys.executable, "-m", "memvault", "compact", "--url", url, "--yes"]
    said = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    assert said == "removed 0 messages, 0 events, 0 expired sessions, 2 search vectors\n"
    again = subprocess.run([*command, "--json"], capture_output=True, text=True, check=True)
    assert json.loads(again.stdout) == {"nodes": 0, "events": 0, "sessions": 0, "vectors": 0}
    assert vectors_in(tmp_path / "cli.db") == 1
