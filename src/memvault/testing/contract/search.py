"""Lexical search: ``session.search`` and ``store.search`` (BM25 over the full view)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from memvault.errors import InvalidArgumentError
from memvault.messages import Message
from memvault.testing.contract.base import ContractBase


class SearchContract(ContractBase):
    def test_search_ranks_visible_messages_and_summaries(self, store: Any) -> None:
        """The best matches come first with their full-view positions; summaries are
        found; popped messages are not; ``k`` caps the hits.
        Failing: search reads the context view, or hidden messages."""
        s = store.session("s")
        msgs = [Message.user("the cat sat"), Message.user("a dog barked"),
                Message.user("cat and cat again"), Message.user("nothing here")]
        s.append(msgs)
        s.summarize(Message.system("summary: a cat, a dog"), through=msgs[1].id)
        s.append([Message.user("hidden cat")])
        s.pop()
        hits = s.search("CAT")
        assert [h.message.content for h in hits][:1] == ["cat and cat again"]
        assert {h.message.content for h in hits} == {
            "the cat sat", "summary: a cat, a dog", "cat and cat again"}
        assert {(h.position, h.session_id) for h in hits} == {(1, "s"), (3, "s"), (4, "s")}
        assert all(a.score >= b.score > 0 for a, b in itertools.pairwise(hits))
        assert len(s.search("cat", k=1)) == 1 and s.search("zebra") == []

    def test_store_search_ranks_sessions_together(self, store: Any) -> None:
        """store.search ranks every live session's messages together, or only those
        of ``sessions``. Failing: results not merged, or the filter ignored."""
        store.session("a").append([Message.user("apple pie recipe")])
        store.session("b").append([Message.user("apple"), Message.user("pear")])
        assert {h.session_id for h in store.search("apple")} == {"a", "b"}
        assert [h.session_id for h in store.search("apple", sessions=["a"])] == ["a"]
        assert store.search("pie")[0].message.content == "apple pie recipe"

    def test_bad_queries_are_refused(self, store: Any) -> None:
        """A query with no word, a negative k or a lone string as sessions: an error
        before any read. Failing: the arguments are not checked."""
        store.session("s").append([Message.user("x")])
        calls: list[Callable[[], object]] = [
            lambda: store.session("s").search("  ?! "),
            lambda: store.session("s").search("x", k=-1),
            lambda: store.search("x", sessions="s")]
        for call in calls:
            with pytest.raises(InvalidArgumentError):
                call()
