"""SQLite, the embedded default: the backend (:mod:`.backend`) runs the Python engine
over one ``BEGIN IMMEDIATE`` transaction per operation (:mod:`.txn`), on connections
pooled per thread (:mod:`.connections`), with the schema and its migrations in
:mod:`.schema` and the search index's lag bookkeeping in :mod:`.lag`."""
