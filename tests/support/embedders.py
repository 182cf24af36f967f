"""Embedders the reindex tests name on the command line (``module:attr``)."""

from __future__ import annotations

import time

from memvault.testing import ConceptEmbedder


class SlowConcepts(ConceptEmbedder):
    """:class:`ConceptEmbedder` (same name and dims) taking 0.2 s per batch, so a test
    can kill a reindex in the middle."""

    def embed(self, texts: list[str]) -> list[list[float]]:
        time.sleep(0.2)
        return super().embed(texts)
