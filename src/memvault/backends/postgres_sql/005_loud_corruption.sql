-- memvault PostgreSQL schema, version 5: damaged chains are loud; delete of an
-- expired session answers false.
--
-- Version 4 walked a chain by its parent links for as many steps as asked: a missing
-- node ended the walk early (history returned fewer messages than the session holds,
-- fork copied the shorter history) and a node that is its own parent was returned
-- again at every step. _chain now also takes the depth its head must have, follows
-- a link only to the node one level below, and raises MV010 (DETAIL: the depth where
-- the chain breaks) unless it found every node asked for. pop checks the head's node
-- the same way, and that its body is a JSON object, before changing anything: a
-- message that cannot be returned is not popped.

DROP FUNCTION @schema@._chain(bigint, bigint, bigint);

-- The chain from p_head (at depth p_depth) back p_count nodes; k = 1 is p_head.
-- STABLE, so it reads with its caller's snapshot.
CREATE FUNCTION @schema@._chain(p_sid bigint, p_head bigint, p_depth bigint, p_count bigint)
RETURNS TABLE (k bigint, node bigint, depth bigint, msg_id bytea, body text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_found bigint;
BEGIN
    RETURN QUERY
    WITH RECURSIVE walk (k, node, parent, depth) AS (
        SELECT 1::bigint, n.node, n.parent, n.depth FROM @schema@.nodes n
        WHERE p_count > 0 AND n.sid = p_sid AND n.node = p_head AND n.depth = p_depth
        UNION ALL
        SELECT w.k + 1, n.node, n.parent, n.depth FROM walk w
        JOIN @schema@.nodes n ON n.sid = p_sid AND n.node = w.parent AND n.depth = w.depth - 1
        WHERE w.k < p_count
    )
    SELECT w.k, n.node, n.depth, n.msg_id, n.body
    FROM walk w JOIN @schema@.nodes n ON n.sid = p_sid AND n.node = w.node;
    GET DIAGNOSTICS v_found = ROW_COUNT;
    IF v_found < greatest(p_count, 0) THEN
        RAISE EXCEPTION 'broken chain' USING ERRCODE = 'MV010', DETAIL = p_depth - v_found;
    END IF;
END $$;

CREATE OR REPLACE FUNCTION @schema@.chain(
    p_session bytea, p_head bigint, p_base bigint, p_last bigint, p_now double precision
) RETURNS SETOF @schema@.stored_row
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_sid bigint;
    v_depth bigint;
BEGIN
    SELECT s.sid INTO v_sid FROM @schema@.sessions s
    WHERE s.name = p_session AND (s.expires_at IS NULL OR s.expires_at > p_now);
    IF v_sid IS NULL OR p_head = 0 THEN
        RETURN;
    END IF;
    SELECT n.depth INTO v_depth FROM @schema@.nodes n WHERE n.sid = v_sid AND n.node = p_head;
    IF v_depth IS NULL THEN
        RETURN NEXT ROW(NULL, NULL)::@schema@.stored_row;
        RETURN;
    END IF;
    RETURN QUERY
        SELECT c.depth, c.body
        FROM @schema@._chain(v_sid, p_head, v_depth,
                             greatest(0, least(coalesce(p_last, v_depth - p_base),
                                               v_depth - p_base))) c
        ORDER BY c.depth;
END $$;

CREATE OR REPLACE FUNCTION @schema@.history(p_session bytea, p_last bigint,
                                            p_now double precision)
RETURNS SETOF @schema@.stored_row
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_row @schema@.sessions;
BEGIN
    SELECT * INTO v_row FROM @schema@.sessions s
    WHERE s.name = p_session AND (s.expires_at IS NULL OR s.expires_at > p_now);
    IF NOT FOUND THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT c.depth, c.body
    FROM @schema@._chain(v_row.sid, v_row.head, v_row.depth,
                         least(coalesce(p_last, v_row.depth - v_row.base),
                               v_row.depth - v_row.base)) c
    ORDER BY c.depth;
END $$;

CREATE OR REPLACE FUNCTION @schema@.pop(
    p_session bytea, p_writer bytea, p_now double precision, p_expires double precision
) RETURNS SETOF @schema@.stored_row
LANGUAGE plpgsql AS $$
DECLARE
    v_row @schema@.sessions;
    v_node @schema@.nodes;
    v_envelope json;
    v_head bigint;
BEGIN
    v_row := @schema@._lock(p_session, p_now, false);
    IF v_row.sid IS NULL OR v_row.depth = v_row.base THEN
        RETURN;
    END IF;
    SELECT * INTO v_node FROM @schema@.nodes n
    WHERE n.sid = v_row.sid AND n.node = v_row.head AND n.depth = v_row.depth;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'broken chain' USING ERRCODE = 'MV010', DETAIL = v_row.depth;
    END IF;
    BEGIN
        v_envelope := v_node.body::json;
    EXCEPTION WHEN invalid_text_representation OR statement_too_complex THEN
        v_envelope := NULL;  -- not JSON, or nested too deep to parse
    END;
    -- (Only the whole: reading a field de-escapes the body's strings, and text
    -- cannot hold the NUL a message may carry as \u0000.)
    IF json_typeof(v_envelope) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'not a memvault envelope' USING ERRCODE = 'MV011',
            DETAIL = v_row.depth;
    END IF;
    v_head := v_row.head;
    v_row.head := v_node.parent;
    v_row.depth := v_node.depth - 1;
    v_row.version := v_row.version + 1;
    PERFORM @schema@._commit(v_row, 'pop', p_writer, p_now, p_expires, v_head, v_row.base,
                             '{"message_id": ' || @schema@._json_quote(v_node.msg_id) || '}');
    RETURN QUERY SELECT v_node.depth, v_node.body;
END $$;

-- The source is read without a lock, in the single statement that copies it, so
-- the copy is one consistent snapshot of it.
CREATE OR REPLACE FUNCTION @schema@.fork(
    p_session bytea, p_new bytea, p_at bytea, p_writer bytea, p_now double precision,
    p_expires double precision
) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_row @schema@.sessions;
    v_found bigint;
    v_length bigint;
BEGIN
    v_row := @schema@._lock(p_new, p_now, true);
    -- A live session has a version or a snapshot; a row _lock just made has neither.
    IF v_row.version > 0
       OR EXISTS (SELECT 1 FROM @schema@.snapshots s WHERE s.sid = v_row.sid) THEN
        RAISE EXCEPTION 'session exists' USING ERRCODE = 'MV005';
    END IF;
    WITH src AS (
        SELECT s.sid, s.head, s.depth, s.depth - s.base AS length FROM @schema@.sessions s
        WHERE s.name = p_session AND (s.expires_at IS NULL OR s.expires_at > p_now)
    ), ptr AS (
        SELECT src.sid, src.head, src.depth, src.length FROM src WHERE p_at IS NULL
        UNION ALL
        SELECT src.sid, n.head, n.base + n.length, n.length FROM src
        JOIN @schema@.snapshots n ON n.sid = src.sid AND n.name = p_at
    ), copied AS (
        INSERT INTO @schema@.nodes (sid, node, parent, depth, msg_id, body)
        SELECT v_row.sid, ptr.length - c.k + 1, ptr.length - c.k, ptr.length - c.k + 1,
               c.msg_id, c.body
        FROM ptr CROSS JOIN LATERAL @schema@._chain(ptr.sid, ptr.head, ptr.depth, ptr.length) c
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM ptr), coalesce((SELECT ptr.length FROM ptr), 0),
           (SELECT count(*) FROM copied)
    INTO v_found, v_length;
    IF p_at IS NOT NULL AND v_found = 0 THEN
        RAISE EXCEPTION 'snapshot not found' USING ERRCODE = 'MV004';
    END IF;
    v_row.head := v_length;
    v_row.depth := v_length;
    v_row.next_node := v_length + 1;
    v_row.version := v_row.version + 1;
    PERFORM @schema@._commit(v_row, 'fork', p_writer, p_now, p_expires, 0, 0,
                             '{"from": ' || @schema@._json_quote(p_session) || ', "at": '
                             || coalesce(@schema@._json_quote(p_at), 'null') || '}');
END $$;

-- delete() of an expired session removes what is left of it and answers false, as
-- every read already did (version 4 answered true; Redis, whose keys expire, false).
DROP FUNCTION @schema@.delete(bytea);

CREATE FUNCTION @schema@.delete(p_session bytea, p_now double precision) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_sid bigint;
    v_expires double precision;
BEGIN
    DELETE FROM @schema@.sessions WHERE name = p_session RETURNING sid, expires_at
    INTO v_sid, v_expires;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM @schema@._purge(v_sid);
    RETURN v_expires IS NULL OR v_expires > p_now;
END $$;
