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

CREATE OR REPLACE FUNCTION @schema@.append(
    p_session bytea, p_ids bytea[], p_bodies text[], p_expect bigint,
    p_writer bytea, p_now double precision, p_expires double precision
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_row @schema@.sessions;
    v_count integer := cardinality(p_ids);
    v_added bigint;
    v_first bytea;
BEGIN
    SELECT * INTO v_row FROM @schema@.sessions WHERE name = p_session FOR UPDATE;
    IF NOT FOUND OR v_row.expires_at <= p_now THEN
        v_row := @schema@._lock(p_session, p_now, true);
    END IF;
    -- The unique index on (sid, msg_id) skips the ids already stored; a refusal
    -- below rolls the insert back with everything else.
    INSERT INTO @schema@.nodes (sid, node, parent, depth, msg_id, body)
    SELECT v_row.sid, v_row.next_node + t.i - 1,
           CASE WHEN t.i = 1 THEN v_row.head ELSE v_row.next_node + t.i - 2 END,
           v_row.depth + t.i, t.id, t.body
    FROM unnest(p_ids, p_bodies) WITH ORDINALITY AS t (id, body, i)
    ON CONFLICT (sid, msg_id) DO NOTHING;
    GET DIAGNOSTICS v_added = ROW_COUNT;
    IF v_added = 0 THEN
        RETURN v_row.version;
    END IF;
    IF v_added < v_count THEN
        -- the stored ones are the nodes numbered below this batch's
        SELECT n.msg_id INTO v_first FROM @schema@.nodes n
        WHERE n.sid = v_row.sid AND n.msg_id = ANY (p_ids) AND n.node < v_row.next_node
        ORDER BY n.msg_id LIMIT 1;
        RAISE EXCEPTION 'message ids already stored' USING ERRCODE = 'MV002',
            DETAIL = (v_count - v_added) || ' ' || encode(v_first, 'hex');
    END IF;
    IF p_expect IS NOT NULL AND p_expect <> v_row.version THEN
        RAISE EXCEPTION 'version conflict' USING ERRCODE = 'MV001', DETAIL = v_row.version;
    END IF;
    UPDATE @schema@.sessions
    SET head = v_row.next_node + v_count - 1, depth = v_row.depth + v_count,
        next_node = v_row.next_node + v_count, version = v_row.version + 1,
        updated_at = p_now, expires_at = p_expires
    WHERE sid = v_row.sid;
    INSERT INTO @schema@.events (sid, version, op, writer, at, head_before, base_before,
                                 head_after, base_after, detail)
    VALUES (v_row.sid, v_row.version + 1, 'append', p_writer, p_now, v_row.head, v_row.base,
            v_row.next_node + v_count - 1, v_row.base, format('{"messages": %s}', v_count));
    RETURN v_row.version + 1;
END $$;
