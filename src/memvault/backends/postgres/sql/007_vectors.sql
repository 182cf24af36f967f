-- memvault PostgreSQL schema, version 7: search vectors (memvault.vectors).
--
-- One vector per distinct searchable text, keyed by the text's hash, as float32
-- bytes: an index beside the chain (dropping it loses nothing: `memvault reindex`
-- rebuilds it), ranked brute force by the client; pgvector is not used yet.
-- vector_space holds the name of the embedder that made them (one row, or none).

CREATE TABLE @schema@.vectors (
    key text PRIMARY KEY,
    vec bytea NOT NULL
);
CREATE TABLE @schema@.vector_space (
    space text NOT NULL
);
