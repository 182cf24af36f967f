-- memvault PostgreSQL schema, version 2: append and snapshot let the unique indexes
-- find stored message ids and taken snapshot names while inserting.
--
-- Version 1 looked them up first. PL/pgSQL keeps the plan of such a lookup for the
-- life of a connection, made from the table statistics of that moment: planned while
-- the tables were small, the lookup could scan every node of the session (or every
-- snapshot) until the next ANALYZE, so each append or snapshot cost time in proportion
-- to what was stored. An INSERT ... ON CONFLICT DO NOTHING checks through the index
-- whatever the statistics say. Results, errors and their precedence are unchanged.

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
    v_head bigint;
BEGIN
    v_row := @schema@._lock(p_session, p_now, true);
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
    v_head := v_row.head;
    v_row.head := v_row.next_node + v_count - 1;
    v_row.depth := v_row.depth + v_count;
    v_row.next_node := v_row.next_node + v_count;
    v_row.version := v_row.version + 1;
    PERFORM @schema@._commit(v_row, 'append', p_writer, p_now, p_expires, v_head, v_row.base,
                             format('{"messages": %s}', v_count));
    RETURN v_row.version;
END $$;

CREATE OR REPLACE FUNCTION @schema@.snapshot(
    p_session bytea, p_name bytea, p_writer bytea, p_now double precision,
    p_expires double precision
) RETURNS SETOF @schema@.snapshot_row
LANGUAGE plpgsql AS $$
DECLARE
    v_row @schema@.sessions;
BEGIN
    v_row := @schema@._lock(p_session, p_now, true);
    INSERT INTO @schema@.snapshots (sid, name, head, base, version, length, created_at, auto)
    VALUES (v_row.sid, p_name, v_row.head, v_row.base, v_row.version, v_row.depth - v_row.base,
            p_now, false)
    ON CONFLICT (sid, name) DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'snapshot exists' USING ERRCODE = 'MV003';
    END IF;
    PERFORM @schema@._commit(v_row, 'snapshot', p_writer, p_now, p_expires, v_row.head,
                             v_row.base, '{"name": ' || @schema@._json_quote(p_name) || '}');
    RETURN QUERY SELECT p_name, v_row.head, v_row.base, v_row.version,
                        v_row.depth - v_row.base, p_now, false;
END $$;
