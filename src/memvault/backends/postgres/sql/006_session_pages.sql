-- memvault PostgreSQL schema, version 6: paged listing of sessions
-- (Store.sessions_page). One index per order, then the name, so a page is one index
-- range scan from the cursor's position; the expressions are the ones the function
-- sessions_page (functions.sql) orders by: an expression index serves only the same
-- expression. 1e308 is the key of a session that never expires (paging.NEVER).

CREATE INDEX sessions_by_version ON @schema@.sessions (version, name);
CREATE INDEX sessions_by_length ON @schema@.sessions (
    (depth - greatest(base, through) + (summary <> 0 AND through > base)::int), name);
CREATE INDEX sessions_by_updated ON @schema@.sessions (updated_at, name);
CREATE INDEX sessions_by_expires ON @schema@.sessions ((coalesce(expires_at, 1e308)), name);
