-- memvault PostgreSQL schema, version 1.
--
-- @schema@ is replaced by the quoted schema name before this runs. The tables,
-- indexes and result types; the functions that read and write them, one per
-- operation, are in functions.sql.
--
-- Column choices: session ids, snapshot names, message ids and writer labels are
-- the UTF-8 bytes of the string (bytea), because PostgreSQL text cannot hold NUL
-- and those strings may. Message bodies are the codec's JSON envelope as text:
-- JSON escapes NUL as \u0000, which jsonb rejects; text keeps it byte for byte.
-- Times are the client's epoch seconds (double precision), like the engine's.

CREATE TABLE @schema@.sessions (
    sid bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name bytea NOT NULL UNIQUE,
    head bigint NOT NULL,
    depth bigint NOT NULL,
    base bigint NOT NULL,
    version bigint NOT NULL,
    next_node bigint NOT NULL,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL,
    expires_at double precision
);

CREATE TABLE @schema@.nodes (
    sid bigint NOT NULL,
    node bigint NOT NULL,
    parent bigint NOT NULL,
    depth bigint NOT NULL,
    msg_id bytea NOT NULL,
    body text NOT NULL,
    PRIMARY KEY (sid, node),
    UNIQUE (sid, msg_id)
);

CREATE TABLE @schema@.snapshots (
    id bigint GENERATED ALWAYS AS IDENTITY,
    sid bigint NOT NULL,
    name bytea NOT NULL,
    head bigint NOT NULL,
    base bigint NOT NULL,
    version bigint NOT NULL,
    length bigint NOT NULL,
    created_at double precision NOT NULL,
    auto boolean NOT NULL,
    PRIMARY KEY (sid, name)
);

CREATE TABLE @schema@.events (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sid bigint NOT NULL,
    version bigint NOT NULL,
    op text NOT NULL,
    writer bytea NOT NULL,
    at double precision NOT NULL,
    head_before bigint NOT NULL,
    base_before bigint NOT NULL,
    head_after bigint NOT NULL,
    base_after bigint NOT NULL,
    detail text NOT NULL
);
CREATE INDEX events_sid ON @schema@.events (sid, id);

-- Result rows, shared by the functions that return them.
CREATE TYPE @schema@.stored_row AS (depth bigint, body text);
CREATE TYPE @schema@.snapshot_row AS (
    name bytea, head bigint, base bigint, version bigint, length bigint,
    created_at double precision, auto boolean
);
CREATE TYPE @schema@.event_row AS (
    version bigint, op text, writer bytea, at double precision, head_before bigint,
    base_before bigint, head_after bigint, base_after bigint, detail text
);
