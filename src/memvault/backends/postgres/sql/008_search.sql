-- memvault PostgreSQL schema, version 8: the lexical search index (Store.search).
--
-- An index beside the chain, never a second source of truth: search_docs holds each
-- indexed node (its session, node, whether it is a summary, its word count),
-- search_postings each of its words (memvault.words.body_words, computed by the
-- client, so a query is only words, never tsquery syntax) with its count, for Okapi
-- BM25 as the SQLite and memory stores rank. append never writes them: a node above
-- its session's watermark (search_marks) is pending, and the next search indexes the
-- pending nodes first (search_pending, search_index in functions.sql). A store
-- written before this version has no marks: every node is pending, and the first
-- search indexes them. Visibility is decided at query time (search).

CREATE TABLE @schema@.search_docs (
    sid bigint NOT NULL,
    node bigint NOT NULL,
    summary boolean NOT NULL,
    length integer NOT NULL,
    PRIMARY KEY (sid, node)
);
-- A posting repeats its node's length and summary flag: a search reads one index
-- range per word and never joins search_docs.
CREATE TABLE @schema@.search_postings (
    term text NOT NULL,
    sid bigint NOT NULL,
    node bigint NOT NULL,
    tf integer NOT NULL,
    length integer NOT NULL,
    summary boolean NOT NULL,
    PRIMARY KEY (term, sid, node) INCLUDE (tf, length, summary)
);
CREATE INDEX search_postings_node ON @schema@.search_postings (sid, node);
CREATE TABLE @schema@.search_marks (
    sid bigint PRIMARY KEY,
    node bigint NOT NULL
);
