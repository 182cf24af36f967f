"""Semantic and hybrid search with an embedder (``memvault.open(url, embedder=...)``),
driven by :class:`ConceptEmbedder`, a tiny deterministic embedder: words of one
concept (cat, kitten, feline) share a dimension, so a query finds a message that
shares no word with it only through its vector."""

from __future__ import annotations

import inspect
import itertools
import re
import time
from typing import Any

import pytest

import memvault.store
from memvault.cli.reindex import reindex
from memvault.errors import ConfigurationError, InvalidArgumentError
from memvault.messages import Message, ToolCall
from memvault.testing.contract.base import ContractBase
from memvault.testing.contract.ttl import FrozenClock
from memvault.vectors import Index, text_key
from memvault.words import text_of

CONCEPTS = (
    {"cat", "cats", "kitten", "feline"},
    {"dog", "puppy", "canine"},
    {"car", "automobile", "vehicle"},
    {"money", "invoice", "payment", "bill"},
)


class ConceptEmbedder:
    """``dims`` dimensions: one per concept of :data:`CONCEPTS`, then the other words
    hashed (stably) into the rest. ``fail_on``: a word whose presence makes ``embed``
    raise (a failing embedding service)."""

    def __init__(self, dims: int = 16, name: str = "concepts", fail_on: str | None = None) -> None:
        self.dims, self.name, self.fail_on = dims, name, fail_on
        self.calls = 0

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return [self._one(t) for t in texts]

    def _one(self, text: str) -> list[float]:
        vector = [0.0] * self.dims
        for word in re.findall(r"[a-z]+", text.lower()):
            if word == self.fail_on:
                raise RuntimeError(f"embedding service failed on {word!r}")
            dim = next((i for i, c in enumerate(CONCEPTS) if word in c), None)
            if dim is None:
                dim = len(CONCEPTS) + sum(map(ord, word)) % (self.dims - len(CONCEPTS))
            vector[dim] += 1.0
        return vector


class RecordingEmbedder(ConceptEmbedder):
    """:class:`ConceptEmbedder` that remembers the texts of its last call."""

    last: list[str] = []

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.last = list(texts)
        return super().embed(texts)


def contents(hits: list[Any]) -> list[Any]:
    return [h.message.content for h in hits]


def keys_of(*messages: Message) -> set[str]:
    """The keys of the vectors of these messages' texts."""
    return {text_key(text_of(m)) for m in messages}


def stored_keys(store: Any) -> set[str]:
    """The keys of every vector the store holds, read through its backend (an async
    store's behind :class:`~memvault.checks.opener.Blocking` is run on its loop)."""
    keys = store.backend.vector_keys()
    if inspect.iscoroutine(keys):
        keys = store.run(keys)
    return set(keys)


class VectorsContract(ContractBase):
    def require(self, capability: str) -> None:
        """:meth:`ContractBase.require`; ``vectors`` needs numpy too (memvault ranks
        vectors with it): without it, skip naming the extra that installs it."""
        super().require(capability)
        if capability == "vectors":
            try:
                import numpy  # noqa: F401
            except ImportError:
                pytest.skip(
                    "the vectors part needs numpy, which the testing extra installs: "
                    "pip install 'memvault[testing]'"
                )

    @pytest.fixture
    def semantic(self, opener: Any) -> Any:
        self.require("vectors")
        store = opener(embedder=ConceptEmbedder())
        yield store
        store.close()

    def test_the_vector_store_names_its_space_and_drops_what_is_gone(self, semantic: Any) -> None:
        """The first embedded write records the embedder's space, read back by
        ``vector_space()``; ``drop_vectors`` of keys not (or no longer) stored is a
        no-op, as when two compacts reclaim the same vector. Failing: memory mutants
        forgetting the space, or raising KeyError for a key gone, survived the suite.
        """
        backend = semantic.backend

        def call(name: str, *args: Any) -> Any:
            result = getattr(backend, name)(*args)
            return semantic.run(result) if inspect.iscoroutine(result) else result

        semantic.session("s").append([Message.user("a cat")])
        assert call("vector_space") == Index(ConceptEmbedder()).space
        [key] = keys_of(Message.user("a cat"))
        for _ in range(2):
            call("drop_vectors", [key, text_key("never stored")])
            assert stored_keys(semantic) == set()

    def test_semantic_search_finds_meaning_in_the_full_view(self, semantic: Any) -> None:
        """A query finds messages and summaries by meaning (no shared word), never a
        hidden one, at a plain int position. Failing: vectors not stored or read, the
        context view searched, popped messages found, or numpy numbers in a Hit."""
        s = semantic.session("s")
        msgs = [
            Message.user("the cat sat on the mat"),
            Message.user("we drove the automobile"),
            Message.user("a dog barked twice"),
            Message.user("stock prices fell"),
        ]
        s.append(msgs)
        s.summarize(Message.system("summary: an invoice was paid"), through=msgs[1].id)
        s.append([Message.user("a hidden kitten")])
        s.pop()
        assert contents(s.search("kitten"))[:1] == ["the cat sat on the mat"]
        assert contents(s.search("car"))[:1] == ["we drove the automobile"]
        assert contents(s.search("payment", k=1)) == ["summary: an invoice was paid"]
        assert "a hidden kitten" not in contents(s.search("kitten", k=10))
        hit = s.search("puppy", k=1)[0]
        assert (hit.session_id, hit.position, hit.message.content) == ("s", 4, "a dog barked twice")
        assert type(hit.position) is int and type(hit.score) is float  # not numpy's

    def test_hybrid_ranks_words_and_meaning_together(self, semantic: Any) -> None:
        """A message matching the query's words and meaning outranks one matching
        only its meaning; store.search fuses every session. Failing: one list ignored."""
        semantic.session("a").append(
            [Message.user("my kitten sleeps"), Message.user("feline friends")]
        )
        semantic.session("b").append([Message.user("the cat purrs")])
        hits = semantic.search("cat")
        assert contents(hits)[0] == "the cat purrs"
        assert set(contents(hits)) == {"the cat purrs", "my kitten sleeps", "feline friends"}
        assert all(a.score >= b.score > 0 for a, b in itertools.pairwise(hits))
        assert contents(semantic.search("kitten", sessions=["b"])) == ["the cat purrs"]

    def test_failed_embedding_writes_nothing(self, opener: Any) -> None:
        """An embedder that raises, or returns the wrong shape, fails the write before
        anything is stored. Failing: the message is stored without its vector."""
        self.require("vectors")
        store = opener(embedder=ConceptEmbedder(fail_on="boom"))
        try:
            s = store.session("s")
            s.append([Message.user("first")])
            with pytest.raises(RuntimeError, match="boom"):
                s.append([Message.user("fine"), Message.user("boom goes the service")])
            with pytest.raises(RuntimeError, match="boom"):
                s.summarize(Message.system("boom"), through=s.history()[0].id)
            assert [m.content for m in s.history(full=True)] == ["first"]
            assert s.info().version == 1
        finally:
            store.close()
        bad = opener(embedder=_WrongShape())
        try:
            with pytest.raises(InvalidArgumentError, match="shape"):
                bad.session("t").append([Message.user("x")])
            assert bad.session("t").info() is None
        finally:
            bad.close()

    def test_messages_written_without_the_embedder_are_found(
        self, opener: Any, semantic: Any
    ) -> None:
        """Messages appended by a handle with no embedder are still ranked by meaning
        (embedded at query time). Failing: they are silently left out."""
        self.require("persistent")
        plain = opener()
        try:
            plain.session("s").append([Message.user("a feline on the roof")])
        finally:
            plain.close()
        assert contents(semantic.session("s").search("cat")) == ["a feline on the roof"]

    def test_moving_to_another_embedder_forgets_the_old_vectors(
        self, semantic: Any, opener: Any
    ) -> None:
        """``memvault reindex --replace`` (``set_vector_space(space, reset=True)``, then
        a reindex) deletes the old embedder's vectors: the new one's rank the messages.
        Failing: the old vectors stayed (they are keyed by text alone), so the reindex
        embedded nothing and search compared the new embedder's query with the old
        one's vectors (a PostgreSQL mutant survived the suite).
        """
        self.require("persistent")
        if self.face == "async":
            pytest.skip("memvault reindex drives the sync API")
        sent = ["a feline on the roof", "a puppy in the yard"]
        semantic.session("s").append([Message.user(t) for t in sent])
        assert contents(semantic.session("s").search("cat")) == sent[:1]
        shifted = _Shifted(name="shifted")
        plain = opener()
        try:
            plain.backend.set_vector_space(Index(shifted).space, True)
        finally:
            plain.close()
        moved = opener(embedder=shifted)
        try:
            assert reindex(moved).embedded == 2
            assert contents(moved.session("s").search("cat")) == sent[:1]
        finally:
            moved.close()

    def test_another_embedder_is_refused(self, semantic: Any, opener: Any) -> None:
        """Opening a store whose vectors another embedder made is a clear error naming
        `memvault reindex`. Failing: its vectors would rank garbage."""
        self.require("persistent")
        semantic.session("s").append([Message.user("cat")])
        for other in (ConceptEmbedder(name="other"), ConceptEmbedder(dims=8)):
            with pytest.raises(ConfigurationError, match="reindex"):
                store = opener(embedder=other)
                try:
                    store.session("s").search("cat")  # an async handle checks on first use
                finally:
                    store.close()

    def test_compact_reclaims_the_vectors_no_stored_message_uses(self, opener: Any) -> None:
        """compact deletes exactly the vectors whose text no stored message or summary
        of a live session has: after a delete, a pop whose event is dropped, and a
        rollback (the auto-snapshot keeps the replaced messages); a text two sessions
        share keeps its vector until the last of them goes; search finds the same,
        embedding only the query. Failing: vectors leak (the table grows with churn),
        or a vector still used is deleted (search embeds it again, or finds less)."""
        self.require("vectors")
        embedder = RecordingEmbedder()
        store = opener(embedder=embedder)
        try:
            U = Message.user
            a, b, c = store.session("a"), store.session("b"), store.session("c")
            cat, shared, kitten, tail = (
                U("the cat sat"),
                U("shared words"),
                U("a popped kitten"),
                U("a dog barked"),
            )
            a.append([cat, shared, kitten])
            a.snapshot("cp")  # holds the kitten once popped
            a.pop()
            b.append([U("shared words"), tail])
            summary = Message.system("summary: a puppy")
            b.summarize(summary, through=tail.id)
            car, doomed = U("we drove the automobile"), U("an invoice to drop")
            call = Message.assistant(
                name="agent",
                tool_calls=[ToolCall(id="c1", name="book_vehicle", arguments='{"kind": "car"}')],
            )
            parts = U([{"type": "text", "text": "a vehicle"}, {"type": "image_url"}])
            c.append([car, call, parts, doomed])
            c.pop()  # only its event reaches the invoice
            live = keys_of(cat, shared, kitten, tail, summary, car, call, parts, doomed)
            assert stored_keys(store) == live
            found = {
                q: [(h.session_id, h.message.content) for h in store.search(q)]
                for q in ("kitten", "shared")
            }
            assert found["kitten"][0] == ("a", "the cat sat")
            assert ("a", "shared words") in found["shared"]

            assert store.compact().vectors == 0  # every vector is used
            assert stored_keys(store) == live
            assert store.compact(keep_events=0).vectors == 1  # the popped invoice's
            live -= keys_of(doomed)
            assert stored_keys(store) == live
            c.delete()
            assert store.compact().vectors == 3
            assert stored_keys(store) == live - keys_of(car, call, parts)
            b.delete()  # "shared words" is still a's
            assert store.compact().vectors == 2
            assert stored_keys(store) == keys_of(cat, shared, kitten)
            for query in ("kitten", "shared"):  # a's hits, as before compact
                assert contents(store.search(query)) == [
                    text for sid, text in found[query] if sid == "a"
                ]
                assert embedder.last == [query]  # every visible text had its vector

            doomed = U("a doomed feline")
            a.append([doomed])
            a.rollback("cp")  # the auto-snapshot holds the doomed feline
            assert store.compact(keep_events=0).vectors == 0
            assert stored_keys(store) == keys_of(cat, shared, kitten, doomed)
            a.delete()
            assert store.compact().vectors == 4 and stored_keys(store) == set()
            assert store.compact().vectors == 0
        finally:
            store.close()

    def test_compact_reclaims_the_vectors_of_expired_sessions(
        self, opener: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An expired session's vectors go with it at compact, from its expiry instant
        on; a session without expiry keeps its own. Failing: expiry leaks vectors."""
        self.require("vectors")
        self.require("ttl")
        clock = FrozenClock(float(int(time.time())))
        monkeypatch.setattr(memvault.store, "time", clock)
        store = opener(embedder=ConceptEmbedder(), ttl=60)
        try:
            gone, kept = Message.user("a short-lived cat"), Message.user("a lasting dog")
            store.session("brief").append([gone])
            clock.now += 30
            store.session("lasting").append([kept])
            clock.now += 29.999
            assert store.compact().vectors == 0
            clock.now += 0.001
            assert store.compact().vectors == 1
            assert stored_keys(store) == keys_of(kept)
            assert contents(store.search("dog")) == ["a lasting dog"]
        finally:
            store.close()


class _Shifted(ConceptEmbedder):
    """Another embedder: each concept of :data:`CONCEPTS` one dimension further on."""

    def _one(self, text: str) -> list[float]:
        vector = super()._one(text)
        n = len(CONCEPTS)
        return [vector[n - 1], *vector[: n - 1], *vector[n:]]


class _WrongShape(ConceptEmbedder):
    """The same space as :class:`ConceptEmbedder`, but vectors of 2 floats."""

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 2.0] for _ in texts]


__all__ = ["CONCEPTS", "ConceptEmbedder", "VectorsContract"]
