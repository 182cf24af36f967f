-- memvault PostgreSQL schema, version 1.
--
-- @schema@ is replaced by the quoted schema name before this runs. Every
-- operation of memvault.backends.engine.core is one function here, so each costs one
-- round trip; writers serialize on their session row (SELECT ... FOR UPDATE).
--
-- Column choices: session ids, snapshot names, message ids and writer labels are
-- the UTF-8 bytes of the string (bytea), because PostgreSQL text cannot hold NUL
-- and those strings may. Message bodies are the codec's JSON envelope as text:
-- JSON escapes NUL as \u0000, which jsonb rejects; text keeps it byte for byte.
-- Times are the client's epoch seconds (double precision), like the engine's.
-- Error SQLSTATEs MV001-MV009 carry domain errors to the client (see
-- memvault.backends.postgres.calls).

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

-- A JSON string literal for UTF-8 bytes. to_json() cannot see NUL (text cannot
-- hold it), so the pieces between NUL bytes are quoted and joined with \u0000.
CREATE FUNCTION @schema@._json_quote(p_value bytea) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
    v_parts text[] := '{}';
    v_cut integer;
    v_piece text;
BEGIN
    LOOP
        v_cut := position(decode('00', 'hex') IN p_value);
        v_piece := to_json(convert_from(
            CASE WHEN v_cut = 0 THEN p_value ELSE substring(p_value FROM 1 FOR v_cut - 1) END,
            'UTF8'))::text;
        v_parts := v_parts || substr(v_piece, 2, length(v_piece) - 2);
        EXIT WHEN v_cut = 0;
        p_value := substring(p_value FROM v_cut + 1);
    END LOOP;
    RETURN '"' || array_to_string(v_parts, E'\\u0000') || '"';
END $$;

-- Delete a session's nodes, snapshots and events (not its row); returns the node count.
CREATE FUNCTION @schema@._purge(p_sid bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_nodes bigint;
BEGIN
    DELETE FROM @schema@.nodes WHERE sid = p_sid;
    GET DIAGNOSTICS v_nodes = ROW_COUNT;
    DELETE FROM @schema@.snapshots WHERE sid = p_sid;
    DELETE FROM @schema@.events WHERE sid = p_sid;
    RETURN v_nodes;
END $$;

-- Lock a session's row. A live row is returned as is. Otherwise, without
-- p_create: a row of NULLs. With p_create: an expired row is purged and reset, a
-- missing one inserted (a concurrent creator makes the INSERT wait, then the loop
-- locks the row it committed). Either way the caller's error rolls it all back.
CREATE FUNCTION @schema@._lock(p_name bytea, p_now double precision, p_create boolean)
RETURNS @schema@.sessions
LANGUAGE plpgsql AS $$
DECLARE
    v_row @schema@.sessions;
BEGIN
    LOOP
        SELECT * INTO v_row FROM @schema@.sessions WHERE name = p_name FOR UPDATE;
        IF FOUND THEN
            IF v_row.expires_at IS NULL OR v_row.expires_at > p_now THEN
                RETURN v_row;
            END IF;
            IF NOT p_create THEN
                RETURN NULL;
            END IF;
            PERFORM @schema@._purge(v_row.sid);
            UPDATE @schema@.sessions
            SET head = 0, depth = 0, base = 0, version = 0, next_node = 1,
                created_at = p_now, updated_at = p_now, expires_at = NULL
            WHERE sid = v_row.sid
            RETURNING * INTO v_row;
            RETURN v_row;
        END IF;
        IF NOT p_create THEN
            RETURN NULL;
        END IF;
        INSERT INTO @schema@.sessions
            (name, head, depth, base, version, next_node, created_at, updated_at)
        VALUES (p_name, 0, 0, 0, 0, 1, p_now, p_now)
        ON CONFLICT (name) DO NOTHING
        RETURNING * INTO v_row;
        IF FOUND THEN
            RETURN v_row;
        END IF;
    END LOOP;
END $$;

-- Save the row's new state and log the change (the engine's _commit).
CREATE FUNCTION @schema@._commit(
    p_row @schema@.sessions, p_op text, p_writer bytea, p_now double precision,
    p_expires double precision, p_head_before bigint, p_base_before bigint, p_detail text
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE @schema@.sessions
    SET head = p_row.head, depth = p_row.depth, base = p_row.base, version = p_row.version,
        next_node = p_row.next_node, updated_at = p_now, expires_at = p_expires
    WHERE sid = p_row.sid;
    INSERT INTO @schema@.events (sid, version, op, writer, at, head_before, base_before,
                                 head_after, base_after, detail)
    VALUES (p_row.sid, p_row.version, p_op, p_writer, p_now, p_head_before, p_base_before,
            p_row.head, p_row.base, p_detail);
END $$;

-- The chain from p_head back p_count nodes; k = 1 is p_head. STABLE, so it reads
-- with its caller's snapshot.
CREATE FUNCTION @schema@._chain(p_sid bigint, p_head bigint, p_count bigint)
RETURNS TABLE (k bigint, node bigint, depth bigint, msg_id bytea, body text)
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE walk (k, node, parent) AS (
        SELECT 1::bigint, n.node, n.parent FROM @schema@.nodes n
        WHERE p_count > 0 AND n.sid = p_sid AND n.node = p_head
        UNION ALL
        SELECT w.k + 1, n.node, n.parent FROM walk w
        JOIN @schema@.nodes n ON n.sid = p_sid AND n.node = w.parent
        WHERE w.k < p_count
    )
    SELECT w.k, n.node, n.depth, n.msg_id, n.body
    FROM walk w JOIN @schema@.nodes n ON n.sid = p_sid AND n.node = w.node
$$;

CREATE FUNCTION @schema@.append(
    p_session bytea, p_ids bytea[], p_bodies text[], p_expect bigint,
    p_writer bytea, p_now double precision, p_expires double precision
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_row @schema@.sessions;
    v_count integer := cardinality(p_ids);
    v_stored bigint;
    v_first bytea;
    v_head bigint;
BEGIN
    v_row := @schema@._lock(p_session, p_now, true);
    SELECT count(*), (array_agg(n.msg_id ORDER BY n.msg_id))[1] INTO v_stored, v_first
    FROM @schema@.nodes n WHERE n.sid = v_row.sid AND n.msg_id = ANY (p_ids);
    IF v_stored = v_count THEN
        RETURN v_row.version;
    END IF;
    IF v_stored > 0 THEN
        RAISE EXCEPTION 'message ids already stored' USING ERRCODE = 'MV002',
            DETAIL = v_stored || ' ' || encode(v_first, 'hex');
    END IF;
    IF p_expect IS NOT NULL AND p_expect <> v_row.version THEN
        RAISE EXCEPTION 'version conflict' USING ERRCODE = 'MV001', DETAIL = v_row.version;
    END IF;
    INSERT INTO @schema@.nodes (sid, node, parent, depth, msg_id, body)
    SELECT v_row.sid, v_row.next_node + t.i - 1,
           CASE WHEN t.i = 1 THEN v_row.head ELSE v_row.next_node + t.i - 2 END,
           v_row.depth + t.i, t.id, t.body
    FROM unnest(p_ids, p_bodies) WITH ORDINALITY AS t (id, body, i);
    v_head := v_row.head;
    v_row.head := v_row.next_node + v_count - 1;
    v_row.depth := v_row.depth + v_count;
    v_row.next_node := v_row.next_node + v_count;
    v_row.version := v_row.version + 1;
    PERFORM @schema@._commit(v_row, 'append', p_writer, p_now, p_expires, v_head, v_row.base,
                             format('{"messages": %s}', v_count));
    RETURN v_row.version;
END $$;

CREATE FUNCTION @schema@.history(p_session bytea, p_last bigint, p_now double precision)
RETURNS SETOF @schema@.stored_row
LANGUAGE sql STABLE AS $$
    SELECT c.depth, c.body
    FROM @schema@.sessions s
    CROSS JOIN LATERAL @schema@._chain(
        s.sid, s.head, least(coalesce(p_last, s.depth - s.base), s.depth - s.base)) c
    WHERE s.name = p_session AND (s.expires_at IS NULL OR s.expires_at > p_now)
    ORDER BY c.depth
$$;

CREATE FUNCTION @schema@.info(p_session bytea, p_now double precision)
RETURNS TABLE (version bigint, length bigint, created_at double precision,
               updated_at double precision, expires_at double precision)
LANGUAGE sql STABLE AS $$
    SELECT s.version, s.depth - s.base, s.created_at, s.updated_at, s.expires_at
    FROM @schema@.sessions s
    WHERE s.name = p_session AND (s.expires_at IS NULL OR s.expires_at > p_now)
$$;

CREATE FUNCTION @schema@.pop(
    p_session bytea, p_writer bytea, p_now double precision, p_expires double precision
) RETURNS SETOF @schema@.stored_row
LANGUAGE plpgsql AS $$
DECLARE
    v_row @schema@.sessions;
    v_node @schema@.nodes;
    v_head bigint;
BEGIN
    v_row := @schema@._lock(p_session, p_now, false);
    IF v_row.sid IS NULL OR v_row.depth = v_row.base THEN
        RETURN;
    END IF;
    SELECT * INTO v_node FROM @schema@.nodes n WHERE n.sid = v_row.sid AND n.node = v_row.head;
    v_head := v_row.head;
    v_row.head := v_node.parent;
    v_row.depth := v_node.depth - 1;
    v_row.version := v_row.version + 1;
    PERFORM @schema@._commit(v_row, 'pop', p_writer, p_now, p_expires, v_head, v_row.base,
                             '{"message_id": ' || @schema@._json_quote(v_node.msg_id) || '}');
    RETURN QUERY SELECT v_node.depth, v_node.body;
END $$;

CREATE FUNCTION @schema@.trim(
    p_session bytea, p_keep bigint, p_op text, p_writer bytea, p_now double precision,
    p_expires double precision
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_row @schema@.sessions;
    v_base bigint;
BEGIN
    v_row := @schema@._lock(p_session, p_now, false);
    IF v_row.sid IS NULL THEN
        RETURN 0;
    END IF;
    v_base := v_row.base;
    v_row.base := greatest(v_row.base, v_row.depth - p_keep);
    IF v_row.base = v_base THEN
        RETURN v_row.version;
    END IF;
    v_row.version := v_row.version + 1;
    PERFORM @schema@._commit(v_row, p_op, p_writer, p_now, p_expires, v_row.head, v_base,
                             format('{"hidden": %s}', v_row.base - v_base));
    RETURN v_row.version;
END $$;

CREATE FUNCTION @schema@.snapshot(
    p_session bytea, p_name bytea, p_writer bytea, p_now double precision,
    p_expires double precision
) RETURNS SETOF @schema@.snapshot_row
LANGUAGE plpgsql AS $$
DECLARE
    v_row @schema@.sessions;
BEGIN
    v_row := @schema@._lock(p_session, p_now, true);
    IF EXISTS (SELECT 1 FROM @schema@.snapshots s WHERE s.sid = v_row.sid AND s.name = p_name)
    THEN
        RAISE EXCEPTION 'snapshot exists' USING ERRCODE = 'MV003';
    END IF;
    INSERT INTO @schema@.snapshots (sid, name, head, base, version, length, created_at, auto)
    VALUES (v_row.sid, p_name, v_row.head, v_row.base, v_row.version, v_row.depth - v_row.base,
            p_now, false);
    PERFORM @schema@._commit(v_row, 'snapshot', p_writer, p_now, p_expires, v_row.head,
                             v_row.base, '{"name": ' || @schema@._json_quote(p_name) || '}');
    RETURN QUERY SELECT p_name, v_row.head, v_row.base, v_row.version,
                        v_row.depth - v_row.base, p_now, false;
END $$;

CREATE FUNCTION @schema@.snapshots(p_session bytea, p_now double precision)
RETURNS SETOF @schema@.snapshot_row
LANGUAGE sql STABLE AS $$
    SELECT n.name, n.head, n.base, n.version, n.length, n.created_at, n.auto
    FROM @schema@.sessions s JOIN @schema@.snapshots n ON n.sid = s.sid
    WHERE s.name = p_session AND (s.expires_at IS NULL OR s.expires_at > p_now)
    ORDER BY n.id
$$;

CREATE FUNCTION @schema@.rollback(
    p_session bytea, p_name bytea, p_writer bytea, p_now double precision,
    p_expires double precision
) RETURNS SETOF @schema@.snapshot_row
LANGUAGE plpgsql AS $$
DECLARE
    v_row @schema@.sessions;
    v_target @schema@.snapshots;
    v_saved bytea;
    v_head bigint;
    v_base bigint;
    v_length bigint;
BEGIN
    v_row := @schema@._lock(p_session, p_now, false);
    SELECT * INTO v_target FROM @schema@.snapshots s WHERE s.sid = v_row.sid AND s.name = p_name;
    IF v_row.sid IS NULL OR v_target.sid IS NULL THEN
        RAISE EXCEPTION 'snapshot not found' USING ERRCODE = 'MV004';
    END IF;
    v_saved := convert_to('auto:pre-rollback@v' || v_row.version, 'UTF8');
    v_head := v_row.head;
    v_base := v_row.base;
    v_length := v_row.depth - v_row.base;
    INSERT INTO @schema@.snapshots (sid, name, head, base, version, length, created_at, auto)
    VALUES (v_row.sid, v_saved, v_head, v_base, v_row.version, v_length, p_now, true);
    v_row.head := v_target.head;
    v_row.base := v_target.base;
    v_row.depth := v_target.base + v_target.length;
    v_row.version := v_row.version + 1;
    PERFORM @schema@._commit(v_row, 'rollback', p_writer, p_now, p_expires, v_head, v_base,
                             '{"to": ' || @schema@._json_quote(p_name) || ', "saved": '
                             || @schema@._json_quote(v_saved) || '}');
    RETURN QUERY SELECT v_saved, v_head, v_base, v_row.version - 1, v_length, p_now, true;
END $$;

-- The source is read without a lock, in the single statement that copies it, so
-- the copy is one consistent snapshot of it.
CREATE FUNCTION @schema@.fork(
    p_session bytea, p_new bytea, p_at bytea, p_writer bytea, p_now double precision,
    p_expires double precision
) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_row @schema@.sessions;
    v_found bigint;
    v_length bigint;
    v_copied bigint;
BEGIN
    v_row := @schema@._lock(p_new, p_now, true);
    -- A live session has a version or a snapshot; a row _lock just made has neither.
    IF v_row.version > 0
       OR EXISTS (SELECT 1 FROM @schema@.snapshots s WHERE s.sid = v_row.sid) THEN
        RAISE EXCEPTION 'session exists' USING ERRCODE = 'MV005';
    END IF;
    WITH src AS (
        SELECT s.sid, s.head, s.depth - s.base AS length FROM @schema@.sessions s
        WHERE s.name = p_session AND (s.expires_at IS NULL OR s.expires_at > p_now)
    ), ptr AS (
        SELECT src.sid, src.head, src.length FROM src WHERE p_at IS NULL
        UNION ALL
        SELECT src.sid, n.head, n.length FROM src
        JOIN @schema@.snapshots n ON n.sid = src.sid AND n.name = p_at
    ), copied AS (
        INSERT INTO @schema@.nodes (sid, node, parent, depth, msg_id, body)
        SELECT v_row.sid, ptr.length - c.k + 1, ptr.length - c.k, ptr.length - c.k + 1,
               c.msg_id, c.body
        FROM ptr CROSS JOIN LATERAL @schema@._chain(ptr.sid, ptr.head, ptr.length) c
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM ptr), coalesce((SELECT ptr.length FROM ptr), 0),
           (SELECT count(*) FROM copied)
    INTO v_found, v_length, v_copied;
    IF p_at IS NOT NULL AND v_found = 0 THEN
        RAISE EXCEPTION 'snapshot not found' USING ERRCODE = 'MV004';
    END IF;
    IF v_copied <> v_length THEN
        RAISE EXCEPTION 'fork found % of % messages', v_copied, v_length USING ERRCODE = 'MV009';
    END IF;
    v_row.head := v_length;
    v_row.depth := v_length;
    v_row.next_node := v_length + 1;
    v_row.version := v_row.version + 1;
    PERFORM @schema@._commit(v_row, 'fork', p_writer, p_now, p_expires, 0, 0,
                             '{"from": ' || @schema@._json_quote(p_session) || ', "at": '
                             || coalesce(@schema@._json_quote(p_at), 'null') || '}');
END $$;

CREATE FUNCTION @schema@.log(p_session bytea, p_now double precision)
RETURNS SETOF @schema@.event_row
LANGUAGE sql STABLE AS $$
    SELECT e.version, e.op, e.writer, e.at, e.head_before, e.base_before, e.head_after,
           e.base_after, e.detail
    FROM @schema@.sessions s JOIN @schema@.events e ON e.sid = s.sid
    WHERE s.name = p_session AND (s.expires_at IS NULL OR s.expires_at > p_now)
    ORDER BY e.id
$$;

CREATE FUNCTION @schema@.delete(p_session bytea) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_sid bigint;
BEGIN
    DELETE FROM @schema@.sessions WHERE name = p_session RETURNING sid INTO v_sid;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM @schema@._purge(v_sid);
    RETURN true;
END $$;

CREATE FUNCTION @schema@.sessions(p_now double precision) RETURNS SETOF bytea
LANGUAGE sql STABLE AS $$
    SELECT s.name FROM @schema@.sessions s
    WHERE s.expires_at IS NULL OR s.expires_at > p_now
$$;

-- Nodes no pointer reaches. A pointer (head, base) reaches the chain from head
-- while depth > base. A parent's id is always below its child's, so one pass in
-- descending id order hands each reached node's lowest floor to its parent.
CREATE FUNCTION @schema@._garbage(p_row @schema@.sessions) RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
    v_floor bigint[] := array_fill(NULL::bigint, ARRAY[greatest(p_row.next_node, 1)::integer]);
    v_dead bigint[] := '{}';
    v_ptr record;
    v_node record;
BEGIN
    FOR v_ptr IN
        SELECT p_row.head AS head, p_row.base AS base
        UNION ALL SELECT s.head, s.base FROM @schema@.snapshots s WHERE s.sid = p_row.sid
        UNION ALL SELECT e.head_before, e.base_before FROM @schema@.events e
                  WHERE e.sid = p_row.sid
        UNION ALL SELECT e.head_after, e.base_after FROM @schema@.events e
                  WHERE e.sid = p_row.sid
    LOOP
        IF v_ptr.head > 0 THEN
            v_floor[v_ptr.head] := least(v_floor[v_ptr.head], v_ptr.base);
        END IF;
    END LOOP;
    FOR v_node IN
        SELECT n.node, n.parent, n.depth FROM @schema@.nodes n
        WHERE n.sid = p_row.sid ORDER BY n.node DESC
    LOOP
        IF v_floor[v_node.node] < v_node.depth THEN
            IF v_node.parent > 0 THEN
                v_floor[v_node.parent] := least(v_floor[v_node.parent], v_floor[v_node.node]);
            END IF;
        ELSE
            v_dead := array_append(v_dead, v_node.node);
        END IF;
    END LOOP;
    RETURN v_dead;
END $$;

CREATE FUNCTION @schema@.compact(p_keep_events bigint, p_now double precision)
RETURNS TABLE (nodes bigint, events bigint, sessions bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_row @schema@.sessions;
    v_dead bigint[];
    v_count bigint;
BEGIN
    nodes := 0;
    events := 0;
    sessions := 0;
    FOR v_row IN SELECT * FROM @schema@.sessions s ORDER BY s.sid FOR UPDATE LOOP
        IF v_row.expires_at IS NOT NULL AND v_row.expires_at <= p_now THEN
            nodes := nodes + @schema@._purge(v_row.sid);
            DELETE FROM @schema@.sessions s WHERE s.sid = v_row.sid;
            sessions := sessions + 1;
            CONTINUE;
        END IF;
        IF p_keep_events IS NOT NULL THEN
            DELETE FROM @schema@.events e WHERE e.sid = v_row.sid AND e.id NOT IN (
                SELECT k.id FROM @schema@.events k WHERE k.sid = v_row.sid
                ORDER BY k.id DESC LIMIT p_keep_events);
            GET DIAGNOSTICS v_count = ROW_COUNT;
            events := events + v_count;
        END IF;
        v_dead := @schema@._garbage(v_row);
        IF cardinality(v_dead) > 0 THEN
            DELETE FROM @schema@.nodes n WHERE n.sid = v_row.sid AND n.node = ANY (v_dead);
            nodes := nodes + cardinality(v_dead);
        END IF;
    END LOOP;
    RETURN NEXT;
END $$;
