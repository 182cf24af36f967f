"""The Python engine: the whole backend protocol written once over a few storage
primitives (:class:`~memvault.backends.engine.core.Txn`), and the word index beside it
(:mod:`~memvault.backends.engine.lexical`), and compaction in steps
(:mod:`~memvault.backends.engine.compaction`). The memory backend, SQLite and the
JSON-file example run on it."""
