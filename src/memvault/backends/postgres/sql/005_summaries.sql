-- memvault PostgreSQL schema, version 5: summaries (Engine.summarize and the views).
--
-- A session and each snapshot get a summary pointer: summary (the summary's node, 0:
-- none) and through (the depth of the last message it stands for). A summary is a
-- node off the chain: its parent is the previous summary, its depth is through.
-- The functions that read and write the pointer are in functions.sql.

ALTER TABLE @schema@.sessions
    ADD COLUMN summary bigint NOT NULL DEFAULT 0,
    ADD COLUMN through bigint NOT NULL DEFAULT 0;
ALTER TABLE @schema@.snapshots
    ADD COLUMN summary bigint NOT NULL DEFAULT 0,
    ADD COLUMN through bigint NOT NULL DEFAULT 0;
ALTER TYPE @schema@.snapshot_row ADD ATTRIBUTE summary bigint, ADD ATTRIBUTE through bigint;
