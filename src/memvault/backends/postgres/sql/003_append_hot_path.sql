-- memvault PostgreSQL schema, version 3: a cheaper append, the hot path of every agent.
--
-- 1. append locks a live session and saves it inline instead of calling _lock and
--    _commit: one PL/pgSQL call where there were three (each nested call is one more
--    statement and one more function setup). _lock still creates a missing session and
--    restarts an expired one. The statements write exactly what _commit writes for
--    append (the session's new head, depth, next node, version, times; one event), and
--    the results, errors and their precedence are those of version 2.
-- 2. events keeps one index, its primary key (sid, id), instead of a key on id and an
--    index on (sid, id): every read and delete of events names the session, and each
--    write now updates one index less. Rebuilding it locks the table while migrating.
--
-- Measured (benchmarks/RESULTS.md, PostgreSQL): 17-19 µs less per append (470 -> 453 µs,
-- 508 -> 489 µs in two studies), 0.96x of version 2.

ALTER TABLE @schema@.events DROP CONSTRAINT events_pkey;
DROP INDEX @schema@.events_sid;
ALTER TABLE @schema@.events ADD PRIMARY KEY (sid, id);
