-- memvault's PostgreSQL functions: the current definition of every one, in one place.
--
-- @schema@ is replaced by the quoted schema name before this runs. Every operation of
-- memvault.backends.engine.core is one function here, so each costs one round trip; writers
-- serialize on their session row (SELECT ... FOR UPDATE). Error SQLSTATEs MV001-MV013
-- carry domain errors to the client (see memvault.backends.postgres.calls).
--
-- The migrations (NNN_*.sql) create the tables, indexes and types these read and
-- write. This file is applied after them, whenever its content differs from the one
-- the schema last applied (its SHA-256 is recorded in <schema>.functions), so changing
-- a function here needs no migration: edit it in place. CREATE OR REPLACE cannot change
-- a function's arguments or result type; such a change drops the old function first
-- (DROP FUNCTION IF EXISTS ...) right above the new definition.
--
-- History: version 2 made append and snapshot let the unique indexes find stored
-- message ids and taken snapshot names while inserting (a lookup planned while the
-- tables were small scanned the whole session until the next ANALYZE); version 3 made
-- append lock and save a live session inline (one PL/pgSQL call instead of three;
-- 17-19 µs less per append, benchmarks/RESULTS.md); version 4 added chain; version 5
-- added summaries: the summary pointer (summary, through) that _lock, _commit, info,
-- pop, snapshot(s), rollback, fork and _garbage carry, summarize, and full_history
-- beside history (now the context view). Then every
-- chain walk became checked (_chain: a broken chain raised nothing, history returned
-- fewer messages, or the head repeated), pop refuses a body that is not a JSON object
-- before changing anything, and delete answers false for an expired session. Then
-- compact became compact_plan + compact_step, bounded steps each its own transaction,
-- and _garbage refuses a broken chain as the engine does.
-- Version 7 added the search vectors' functions (vector_space ... put_vectors); later
-- compact's sweep got vector_keys, drop_vectors and node_bodies.
-- At version 8, append_after: append refusing (MV012) unless a message id is stored.
-- Then pop refused an envelope whose "v" is not 1 or whose "m" is not an object too
-- (it committed, then the client's decode raised), as the Redis script does; then
-- those checks went: the client runs pop in a transaction and decodes the message
-- whole before it commits (an extra key or a bad field passed them).
-- Then snapshots, rollback and fork refused a snapshot whose pointers cannot be
-- right (MV013; rollback to a length of -7 left the session one), and pop a new head
-- not one level lower. Then compact_step refused (MV013) a session with such a
-- snapshot before changing anything of it, as the engine and the Redis script do.

-- A JSON string literal for UTF-8 bytes. to_json() cannot see NUL (text cannot
-- hold it), so the pieces between NUL bytes are quoted and joined with \u0000.
CREATE OR REPLACE FUNCTION @schema@._json_quote(p_value bytea) RETURNS text
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
CREATE OR REPLACE FUNCTION @schema@._purge(p_sid bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_nodes bigint;
BEGIN
    DELETE FROM @schema@.nodes WHERE sid = p_sid;
    GET DIAGNOSTICS v_nodes = ROW_COUNT;
    DELETE FROM @schema@.search_postings WHERE sid = p_sid;
    DELETE FROM @schema@.search_docs WHERE sid = p_sid;
    DELETE FROM @schema@.search_marks WHERE sid = p_sid;
    DELETE FROM @schema@.snapshots WHERE sid = p_sid;
    DELETE FROM @schema@.events WHERE sid = p_sid;
    RETURN v_nodes;
END $$;

-- Lock a session's row. A live row is returned as is. Otherwise, without
-- p_create: a row of NULLs. With p_create: an expired row is purged and reset, a
-- missing one inserted (a concurrent creator makes the INSERT wait, then the loop
-- locks the row it committed). Either way the caller's error rolls it all back.
CREATE OR REPLACE FUNCTION @schema@._lock(p_name bytea, p_now double precision,
                                          p_create boolean)
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
                created_at = p_now, updated_at = p_now, expires_at = NULL,
                summary = 0, through = 0
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
CREATE OR REPLACE FUNCTION @schema@._commit(
    p_row @schema@.sessions, p_op text, p_writer bytea, p_now double precision,
    p_expires double precision, p_head_before bigint, p_base_before bigint, p_detail text
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE @schema@.sessions
    SET head = p_row.head, depth = p_row.depth, base = p_row.base, version = p_row.version,
        next_node = p_row.next_node, updated_at = p_now, expires_at = p_expires,
        summary = p_row.summary, through = p_row.through
    WHERE sid = p_row.sid;
    INSERT INTO @schema@.events (sid, version, op, writer, at, head_before, base_before,
                                 head_after, base_after, detail)
    VALUES (p_row.sid, p_row.version, p_op, p_writer, p_now, p_head_before, p_base_before,
            p_row.head, p_row.base, p_detail);
END $$;

-- The chain from p_head (at depth p_depth) back p_count nodes; k = 1 is p_head. Each
-- step follows a link only to the node one level below, and unless every node asked
-- for was found it raises MV010 (DETAIL: the depth where the chain breaks): a missing
-- node, a node that is its own parent or a link into another branch never makes a
-- shorter or repeated history. STABLE, so it reads with its caller's snapshot.
-- One primary-key probe per step, whatever the statistics say: a recursive query
-- left the planner free to join the walk to nodes by a scan, and its estimates for a
-- recursive walk are guesses (docs/postgres.md, "Plans and vacuum").
DROP FUNCTION IF EXISTS @schema@._chain(bigint, bigint, bigint);
CREATE OR REPLACE FUNCTION @schema@._chain(p_sid bigint, p_head bigint, p_depth bigint, p_count bigint)
RETURNS TABLE (k bigint, node bigint, depth bigint, msg_id bytea, body text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_next bigint := p_head;
    v_parent bigint;
BEGIN
    k := 1;
    WHILE k <= p_count LOOP
        SELECT n.node, n.parent, n.depth, n.msg_id, n.body
        INTO node, v_parent, depth, msg_id, body
        FROM @schema@.nodes n WHERE n.sid = p_sid AND n.node = v_next;
        IF NOT FOUND OR depth <> p_depth - k + 1 THEN
            RAISE EXCEPTION 'broken chain' USING ERRCODE = 'MV010', DETAIL = p_depth - k + 1;
        END IF;
        RETURN NEXT;
        v_next := v_parent;
        k := k + 1;
    END LOOP;
END $$;

-- append_after is append with p_message: refuse (MV012) unless that message id is
-- stored in the session, checked under the session's lock. append (the released
-- signature, still called by older processes) is append_after without it.
CREATE OR REPLACE FUNCTION @schema@.append_after(
    p_session bytea, p_ids bytea[], p_bodies text[], p_expect bigint, p_message bytea,
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
    IF p_message IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM @schema@.nodes n
            WHERE n.sid = v_row.sid AND n.msg_id = p_message AND n.node < v_row.next_node) THEN
        RAISE EXCEPTION 'expected message not stored' USING ERRCODE = 'MV012';
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

CREATE OR REPLACE FUNCTION @schema@.append(
    p_session bytea, p_ids bytea[], p_bodies text[], p_expect bigint,
    p_writer bytea, p_now double precision, p_expires double precision
) RETURNS bigint
LANGUAGE sql AS $$
    SELECT @schema@.append_after(p_session, p_ids, p_bodies, p_expect, NULL, p_writer, p_now,
                                 p_expires)
$$;

-- The context view's newest p_last (NULL: all): the summary only if it fits. Its
-- depth (through) lies below every chain node shown, so ORDER BY depth places it.
CREATE OR REPLACE FUNCTION @schema@.history(p_session bytea, p_last bigint,
                                            p_now double precision)
RETURNS SETOF @schema@.stored_row
LANGUAGE sql STABLE AS $$
    WITH s AS (
        SELECT x.sid, x.head, x.depth, x.summary, x.through > x.base AND x.summary <> 0 AS shows,
               x.depth - greatest(x.base, x.through) AS above
        FROM @schema@.sessions x
        WHERE x.name = p_session AND (x.expires_at IS NULL OR x.expires_at > p_now)
    )
    SELECT v.depth, v.body FROM (
        SELECT c.depth, c.body
        FROM s CROSS JOIN LATERAL @schema@._chain(s.sid, s.head, s.depth, least(p_last, s.above)) c
        UNION ALL
        SELECT n.depth, n.body
        FROM s JOIN @schema@.nodes n ON n.sid = s.sid AND n.node = s.summary
        WHERE s.shows AND (p_last IS NULL OR p_last > s.above)
    ) v ORDER BY v.depth
$$;

-- Every message above base, each summary (above base) right after its through.
CREATE OR REPLACE FUNCTION @schema@.full_history(p_session bytea, p_last bigint, p_now double precision)
RETURNS SETOF @schema@.stored_row
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE s AS (
        SELECT x.sid, x.head, x.base, x.depth, x.summary,
               -- linear: every node ever made (node ids 1 .. next_node - 1) is the
               -- message at the depth of its id and all above base are stored, so
               -- the chain is the nodes in id order: read as a range, not walked
               -- one node at a time by _chain (10,000 nodes: 182 -> 66 ms, load 21)
               x.next_node - 1 = x.depth AND (
                   SELECT count(*) FROM @schema@.nodes n
                   WHERE n.sid = x.sid AND n.node > x.base) = x.depth - x.base AS linear
        FROM @schema@.sessions x
        WHERE x.name = p_session AND (x.expires_at IS NULL OR x.expires_at > p_now)
    ), sums (node, parent, depth, body) AS (
        SELECT n.node, n.parent, n.depth, n.body
        FROM s JOIN @schema@.nodes n ON n.sid = s.sid AND n.node = s.summary
        UNION ALL
        SELECT n.node, n.parent, n.depth, n.body
        FROM sums u CROSS JOIN s JOIN @schema@.nodes n ON n.sid = s.sid AND n.node = u.parent
    ), shown AS (
        SELECT n.depth, n.body, 0 AS kind
        FROM s JOIN @schema@.nodes n ON n.sid = s.sid AND n.node > s.base WHERE s.linear
        UNION ALL
        SELECT c.depth, c.body, 0 AS kind
        FROM s CROSS JOIN LATERAL @schema@._chain(s.sid, s.head, s.depth, s.depth - s.base) c
        WHERE NOT s.linear
        UNION ALL
        SELECT u.depth, u.body, 1 FROM sums u CROSS JOIN s WHERE u.depth > s.base
    )
    SELECT t.depth, t.body FROM (
        SELECT v.depth, v.body, v.kind FROM shown v ORDER BY v.depth DESC, v.kind DESC
        LIMIT p_last
    ) t ORDER BY t.depth, t.kind
$$;

DROP FUNCTION IF EXISTS @schema@.info(bytea, double precision);  -- version 5 added summarized
CREATE OR REPLACE FUNCTION @schema@.info(p_session bytea, p_now double precision)
RETURNS TABLE (version bigint, length bigint, created_at double precision,
               updated_at double precision, expires_at double precision, summarized bigint)
LANGUAGE sql STABLE AS $$
    SELECT s.version,
           s.depth - greatest(s.base, s.through)
               + CASE WHEN s.summary <> 0 AND s.through > s.base THEN 1 ELSE 0 END,
           s.created_at, s.updated_at, s.expires_at,
           CASE WHEN s.summary <> 0 AND s.through > s.base THEN s.through - s.base ELSE 0 END
    FROM @schema@.sessions s
    WHERE s.name = p_session AND (s.expires_at IS NULL OR s.expires_at > p_now)
$$;

-- Hide the context view's newest message; with nothing after the summary, undo it
-- (the previous summary is back). The client commits only once it has decoded the
-- message returned.
CREATE OR REPLACE FUNCTION @schema@.pop(
    p_session bytea, p_writer bytea, p_now double precision, p_expires double precision
) RETURNS SETOF @schema@.stored_row
LANGUAGE plpgsql AS $$
DECLARE
    v_row @schema@.sessions;
    v_node @schema@.nodes;
    v_head bigint;
    v_undo boolean;
    v_at bigint;
    v_depth bigint;
BEGIN
    v_row := @schema@._lock(p_session, p_now, false);
    IF v_row.sid IS NULL THEN
        RETURN;
    END IF;
    v_undo := v_row.depth <= greatest(v_row.base, v_row.through);
    IF v_undo AND NOT (v_row.summary <> 0 AND v_row.through > v_row.base) THEN
        RETURN;
    END IF;
    v_at := CASE WHEN v_undo THEN v_row.summary ELSE v_row.head END;
    v_depth := CASE WHEN v_undo THEN v_row.through ELSE v_row.depth END;
    SELECT * INTO v_node FROM @schema@.nodes n
    WHERE n.sid = v_row.sid AND n.node = v_at AND n.depth = v_depth;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'broken chain' USING ERRCODE = 'MV010', DETAIL = v_depth;
    END IF;
    -- the new head (unless hidden: compact may have deleted it) sits one level lower
    IF NOT v_undo AND v_depth - 1 > v_row.base AND NOT EXISTS (
            SELECT 1 FROM @schema@.nodes n
            WHERE n.sid = v_row.sid AND n.node = v_node.parent AND n.depth = v_depth - 1) THEN
        RAISE EXCEPTION 'broken chain' USING ERRCODE = 'MV010', DETAIL = v_depth - 1;
    END IF;
    v_head := v_row.head;
    v_row.version := v_row.version + 1;
    IF v_undo THEN
        v_row.summary := v_node.parent;
        v_row.through := 0;
        IF v_node.parent <> 0 THEN
            SELECT n.depth INTO v_row.through FROM @schema@.nodes n
            WHERE n.sid = v_row.sid AND n.node = v_node.parent;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'broken chain' USING ERRCODE = 'MV010', DETAIL = v_depth;
            END IF;
        END IF;
        PERFORM @schema@._commit(v_row, 'pop', p_writer, p_now, p_expires, v_head, v_row.base,
                                 '{"summary_id": ' || @schema@._json_quote(v_node.msg_id) || '}');
    ELSE
        v_row.head := v_node.parent;
        v_row.depth := v_node.depth - 1;
        PERFORM @schema@._commit(v_row, 'pop', p_writer, p_now, p_expires, v_head, v_row.base,
                                 '{"message_id": ' || @schema@._json_quote(v_node.msg_id) || '}');
    END IF;
    RETURN QUERY SELECT v_node.depth, v_node.body;
END $$;

CREATE OR REPLACE FUNCTION @schema@.summarize(
    p_session bytea, p_through bytea, p_id bytea, p_body text, p_expect bigint,
    p_writer bytea, p_now double precision, p_expires double precision
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_row @schema@.sessions;
    v_stored bigint;
    v_target @schema@.nodes;
    v_steps bigint;
    v_folded bigint;
BEGIN
    v_row := @schema@._lock(p_session, p_now, false);
    IF v_row.sid IS NOT NULL THEN
        SELECT n.node INTO v_stored FROM @schema@.nodes n
        WHERE n.sid = v_row.sid AND n.msg_id = p_id;
        IF v_stored = v_row.summary THEN
            RETURN v_row.version;
        ELSIF v_stored IS NOT NULL THEN
            RAISE EXCEPTION 'message ids already stored' USING ERRCODE = 'MV002',
                DETAIL = '1 ' || encode(p_id, 'hex');
        END IF;
    END IF;
    IF p_expect IS NOT NULL AND p_expect <> coalesce(v_row.version, 0) THEN
        RAISE EXCEPTION 'version conflict' USING ERRCODE = 'MV001',
            DETAIL = coalesce(v_row.version, 0);
    END IF;
    SELECT * INTO v_target FROM @schema@.nodes n
    WHERE n.sid = v_row.sid AND n.msg_id = p_through;
    IF v_row.sid IS NULL OR v_target.sid IS NULL THEN
        RAISE EXCEPTION 'unknown message to summarize through' USING ERRCODE = 'MV006';
    END IF;
    v_steps := v_row.depth - v_target.depth + 1;
    IF v_target.depth <= v_row.base OR v_steps < 1
       OR (SELECT c.node FROM @schema@._chain(v_row.sid, v_row.head, v_row.depth, v_steps) c
           WHERE c.k = v_steps) IS DISTINCT FROM v_target.node THEN
        RAISE EXCEPTION 'message to summarize through is hidden' USING ERRCODE = 'MV007';
    END IF;
    IF v_target.depth <= v_row.through THEN
        RAISE EXCEPTION 'message already summarized' USING ERRCODE = 'MV008';
    END IF;
    v_folded := v_target.depth - greatest(v_row.base, v_row.through);
    INSERT INTO @schema@.nodes (sid, node, parent, depth, msg_id, body)
    VALUES (v_row.sid, v_row.next_node, v_row.summary, v_target.depth, p_id, p_body);
    v_row.summary := v_row.next_node;
    v_row.through := v_target.depth;
    v_row.next_node := v_row.next_node + 1;
    v_row.version := v_row.version + 1;
    PERFORM @schema@._commit(v_row, 'summarize', p_writer, p_now, p_expires, v_row.head,
                             v_row.base, '{"summary_id": ' || @schema@._json_quote(p_id)
                             || ', "through": ' || @schema@._json_quote(p_through)
                             || ', "messages": ' || v_folded || '}');
    RETURN v_row.version;
END $$;

-- Every write ends as pop does: bump, _commit with its own event detail, return.
CREATE OR REPLACE FUNCTION @schema@.trim(
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

CREATE OR REPLACE FUNCTION @schema@.snapshot(
    p_session bytea, p_name bytea, p_writer bytea, p_now double precision,
    p_expires double precision
) RETURNS SETOF @schema@.snapshot_row
LANGUAGE plpgsql AS $$
DECLARE
    v_row @schema@.sessions;
BEGIN
    v_row := @schema@._lock(p_session, p_now, true);
    INSERT INTO @schema@.snapshots (sid, name, head, base, version, length, created_at, auto,
                                    summary, through)
    VALUES (v_row.sid, p_name, v_row.head, v_row.base, v_row.version, v_row.depth - v_row.base,
            p_now, false, v_row.summary, v_row.through)
    ON CONFLICT (sid, name) DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'snapshot exists' USING ERRCODE = 'MV003';
    END IF;
    PERFORM @schema@._commit(v_row, 'snapshot', p_writer, p_now, p_expires, v_row.head,
                             v_row.base, '{"name": ' || @schema@._json_quote(p_name) || '}');
    RETURN QUERY SELECT p_name, v_row.head, v_row.base, v_row.version,
                        v_row.depth - v_row.base, p_now, false, v_row.summary, v_row.through;
END $$;

-- True if the snapshot p_snap of a session whose next node id is p_next has pointers
-- that can be right (model.check_snapshot); else MV013, DETAIL: its name, then its
-- session's name, in hex (compact, store-wide, names the session from it).
CREATE OR REPLACE FUNCTION @schema@._snapshot_ok(p_snap @schema@.snapshots, p_next bigint)
RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF least(p_snap.head, p_snap.base, p_snap.length) < 0 OR p_snap.head >= p_next
       OR (p_snap.head = 0) <> (p_snap.base + p_snap.length = 0) THEN
        RAISE EXCEPTION 'damaged snapshot' USING ERRCODE = 'MV013',
            DETAIL = encode(p_snap.name, 'hex') || ' ' || encode((SELECT s.name FROM
                @schema@.sessions s WHERE s.sid = p_snap.sid), 'hex');
    END IF;
    RETURN true;
END $$;

CREATE OR REPLACE FUNCTION @schema@.snapshots(p_session bytea, p_now double precision)
RETURNS SETOF @schema@.snapshot_row
LANGUAGE sql STABLE AS $$
    SELECT n.name, n.head, n.base, n.version, n.length, n.created_at, n.auto, n.summary,
           n.through
    FROM @schema@.sessions s JOIN @schema@.snapshots n ON n.sid = s.sid
    WHERE s.name = p_session AND (s.expires_at IS NULL OR s.expires_at > p_now)
      AND @schema@._snapshot_ok(n, s.next_node)
    ORDER BY n.id
$$;

CREATE OR REPLACE FUNCTION @schema@.rollback(
    p_session bytea, p_name bytea, p_writer bytea, p_now double precision,
    p_expires double precision
) RETURNS SETOF @schema@.snapshot_row
LANGUAGE plpgsql AS $$
DECLARE
    v_row @schema@.sessions;
    v_old @schema@.sessions;
    v_target @schema@.snapshots;
    v_saved bytea;
BEGIN
    v_row := @schema@._lock(p_session, p_now, false);
    SELECT * INTO v_target FROM @schema@.snapshots s WHERE s.sid = v_row.sid AND s.name = p_name;
    IF v_row.sid IS NULL OR v_target.sid IS NULL THEN
        RAISE EXCEPTION 'snapshot not found' USING ERRCODE = 'MV004';
    END IF;
    PERFORM @schema@._snapshot_ok(v_target, v_row.next_node);
    v_saved := convert_to('auto:pre-rollback@v' || v_row.version, 'UTF8');
    v_old := v_row;
    INSERT INTO @schema@.snapshots (sid, name, head, base, version, length, created_at, auto,
                                    summary, through)
    VALUES (v_row.sid, v_saved, v_old.head, v_old.base, v_old.version, v_old.depth - v_old.base,
            p_now, true, v_old.summary, v_old.through);
    v_row.head := v_target.head;
    v_row.base := v_target.base;
    v_row.depth := v_target.base + v_target.length;
    v_row.summary := v_target.summary;
    v_row.through := v_target.through;
    v_row.version := v_row.version + 1;
    PERFORM @schema@._commit(v_row, 'rollback', p_writer, p_now, p_expires, v_old.head,
                             v_old.base, '{"to": ' || @schema@._json_quote(p_name)
                             || ', "saved": ' || @schema@._json_quote(v_saved) || '}');
    RETURN QUERY SELECT v_saved, v_old.head, v_old.base, v_old.version,
                        v_old.depth - v_old.base, p_now, true, v_old.summary, v_old.through;
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
    v_sum_id bytea;
    v_sum_body text;
    v_sum_through bigint;
    v_sum_depth bigint;
BEGIN
    v_row := @schema@._lock(p_new, p_now, true);
    -- A live session has a version or a snapshot; a row _lock just made has neither.
    IF v_row.version > 0
       OR EXISTS (SELECT 1 FROM @schema@.snapshots s WHERE s.sid = v_row.sid) THEN
        RAISE EXCEPTION 'session exists' USING ERRCODE = 'MV005';
    END IF;
    WITH src AS (
        SELECT s.sid, s.head, s.depth, s.depth - s.base AS length, s.base, s.summary,
               s.through, s.next_node
        FROM @schema@.sessions s
        WHERE s.name = p_session AND (s.expires_at IS NULL OR s.expires_at > p_now)
    ), ptr AS (
        SELECT src.sid, src.head, src.depth, src.length, src.base, src.summary, src.through
        FROM src WHERE p_at IS NULL
        UNION ALL
        SELECT src.sid, n.head, n.base + n.length, n.length, n.base, n.summary, n.through
        FROM src
        JOIN @schema@.snapshots n ON n.sid = src.sid AND n.name = p_at
                                     AND @schema@._snapshot_ok(n, src.next_node)
    ), copied AS (
        INSERT INTO @schema@.nodes (sid, node, parent, depth, msg_id, body)
        SELECT v_row.sid, ptr.length - c.k + 1, ptr.length - c.k, ptr.length - c.k + 1,
               c.msg_id, c.body
        FROM ptr CROSS JOIN LATERAL @schema@._chain(ptr.sid, ptr.head, ptr.depth, ptr.length) c
    )
    SELECT (SELECT count(*) FROM ptr), coalesce((SELECT ptr.length FROM ptr), 0),
           s.msg_id, s.body, s.through, s.depth
    INTO v_found, v_length, v_sum_id, v_sum_body, v_sum_through, v_sum_depth
    FROM (SELECT 1) one LEFT JOIN (
        SELECT n.msg_id, n.body, ptr.through - ptr.base AS through, ptr.through AS depth
        FROM ptr LEFT JOIN @schema@.nodes n ON n.sid = ptr.sid AND n.node = ptr.summary
        WHERE ptr.through > ptr.base
    ) s ON true;
    IF p_at IS NOT NULL AND v_found = 0 THEN
        RAISE EXCEPTION 'snapshot not found' USING ERRCODE = 'MV004';
    END IF;
    IF v_sum_depth IS NOT NULL AND v_sum_id IS NULL THEN  -- the summary is gone
        RAISE EXCEPTION 'broken chain' USING ERRCODE = 'MV010', DETAIL = v_sum_depth;
    END IF;
    v_row.head := v_length;
    v_row.depth := v_length;
    v_row.next_node := v_length + 1;
    IF v_sum_id IS NOT NULL THEN
        INSERT INTO @schema@.nodes (sid, node, parent, depth, msg_id, body)
        VALUES (v_row.sid, v_length + 1, 0, v_sum_through, v_sum_id, v_sum_body);
        v_row.summary := v_length + 1;
        v_row.through := v_sum_through;
        v_row.next_node := v_length + 2;
    END IF;
    v_row.version := v_row.version + 1;
    PERFORM @schema@._commit(v_row, 'fork', p_writer, p_now, p_expires, 0, 0,
                             '{"from": ' || @schema@._json_quote(p_session) || ', "at": '
                             || coalesce(@schema@._json_quote(p_at), 'null') || '}');
END $$;

CREATE OR REPLACE FUNCTION @schema@.log(p_session bytea, p_now double precision)
RETURNS SETOF @schema@.event_row
LANGUAGE sql STABLE AS $$
    SELECT e.version, e.op, e.writer, e.at, e.head_before, e.base_before, e.head_after,
           e.base_after, e.detail
    FROM @schema@.sessions s JOIN @schema@.events e ON e.sid = s.sid
    WHERE s.name = p_session AND (s.expires_at IS NULL OR s.expires_at > p_now)
    ORDER BY e.id
$$;

-- delete() of an expired session removes what is left of it and answers false, as
-- every read already did (Redis, whose keys expire, said false; the others true).
DROP FUNCTION IF EXISTS @schema@.delete(bytea);
CREATE OR REPLACE FUNCTION @schema@.delete(p_session bytea, p_now double precision) RETURNS boolean
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

CREATE OR REPLACE FUNCTION @schema@.sessions(p_now double precision) RETURNS SETOF bytea
LANGUAGE sql STABLE AS $$
    SELECT s.name FROM @schema@.sessions s
    WHERE s.expires_at IS NULL OR s.expires_at > p_now
$$;

-- One page of the live sessions (Store.sessions_page): info and key of at most
-- p_limit sessions after (p_after_key, p_after) in the order p_order (then name),
-- descending if p_desc; names containing p_match. Each order's key is the
-- expression an index of 006_session_pages.sql holds, so the page is one index
-- range scan whatever the statistics say (expired rows and names without p_match
-- are skipped on the way): with sequential scans and sorts off for this function, a
-- table the statistics claim empty is still read through the order's index.
CREATE OR REPLACE FUNCTION @schema@.sessions_page(
    p_order text, p_desc boolean, p_match bytea, p_after_key double precision,
    p_after bytea, p_limit bigint, p_now double precision
) RETURNS TABLE (name bytea, version bigint, length bigint, created_at double precision,
                 updated_at double precision, expires_at double precision,
                 summarized bigint, key double precision)
LANGUAGE plpgsql STABLE SET enable_seqscan = off SET enable_sort = off
    SET enable_bitmapscan = off AS $$
DECLARE
    v_key text := CASE p_order
        WHEN 'id' THEN 'NULL::double precision'
        WHEN 'version' THEN 's.version'
        WHEN 'length' THEN
            '(s.depth - greatest(s.base, s.through) + (s.summary <> 0 AND s.through > s.base)::int)'
        WHEN 'updated' THEN 's.updated_at'
        WHEN 'expires' THEN '(coalesce(s.expires_at, 1e308))' END;
    v_typed text := CASE WHEN p_order IN ('version', 'length') THEN '$1::bigint' ELSE '$1' END;
    v_way text := CASE WHEN p_desc THEN 'DESC' ELSE 'ASC' END;
    v_sign text := CASE WHEN p_desc THEN '<' ELSE '>' END;
    v_where text := '(s.expires_at IS NULL OR s.expires_at > $4)';
BEGIN
    IF v_key IS NULL THEN
        RAISE EXCEPTION 'unknown order %', p_order USING ERRCODE = '22023';
    END IF;
    IF p_match <> ''::bytea THEN
        v_where := v_where || ' AND position($3 in s.name) > 0';
    END IF;
    IF p_after IS NOT NULL THEN
        v_where := v_where || CASE WHEN p_order = 'id' THEN format(' AND s.name %s $2', v_sign)
            ELSE format(' AND (%s, s.name) %s (%s, $2)', v_key, v_sign, v_typed) END;
    END IF;
    RETURN QUERY EXECUTE format(
        'SELECT s.name, s.version, '
        '       s.depth - greatest(s.base, s.through) '
        '           + CASE WHEN s.summary <> 0 AND s.through > s.base THEN 1 ELSE 0 END, '
        '       s.created_at, s.updated_at, s.expires_at, '
        '       CASE WHEN s.summary <> 0 AND s.through > s.base '
        '            THEN s.through - s.base ELSE 0 END, '
        '       %s::double precision '
        'FROM @schema@.sessions s WHERE %s ORDER BY %s LIMIT $5',
        v_key, v_where,
        CASE WHEN p_order = 'id' THEN 's.name ' || v_way
             ELSE format('%s %s, s.name %s', v_key, v_way, v_way) END)
    USING p_after_key, p_after, p_match, p_now, p_limit;
END;
$$;

-- Nodes no pointer reaches. A pointer (head, base) reaches the chain from head
-- while depth > base. A parent's id is always below its child's, so one pass in
-- descending id order hands each reached node's lowest floor to its parent. A
-- reached node above its floor needs its parent one level below it: a parent that
-- is missing, not below it in id order, or at another depth is a broken chain,
-- raised as MV010 (DETAIL: the depth, then the session's name in hex) before
-- anything is deleted, as the engine does: what lies below the break may be wanted.
CREATE OR REPLACE FUNCTION @schema@._garbage(p_row @schema@.sessions) RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
    v_floor bigint[] := array_fill(NULL::bigint, ARRAY[greatest(p_row.next_node, 1)::integer]);
    v_want bigint[] := v_floor;
    v_dead bigint[] := '{}';
    v_kept bigint[];
    v_broken bigint;
    v_ptr record;
    v_node record;
BEGIN
    WITH RECURSIVE ptrs AS (
        SELECT p_row.summary AS node
        UNION SELECT s.summary FROM @schema@.snapshots s WHERE s.sid = p_row.sid
    ), walk (node, parent) AS (
        SELECT n.node, n.parent FROM ptrs
        JOIN @schema@.nodes n ON n.sid = p_row.sid AND n.node = ptrs.node
        UNION
        SELECT n.node, n.parent FROM walk w
        JOIN @schema@.nodes n ON n.sid = p_row.sid AND n.node = w.parent
    )
    SELECT coalesce(array_agg(walk.node), '{}') INTO v_kept FROM walk;
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
        IF v_want[v_node.node] <> v_node.depth THEN
            v_broken := v_want[v_node.node];
            EXIT;
        END IF;
        v_want[v_node.node] := NULL;
        IF v_node.node = ANY (v_kept) THEN
            CONTINUE;
        ELSIF v_floor[v_node.node] < v_node.depth THEN
            IF v_floor[v_node.node] < v_node.depth - 1 THEN
                IF v_node.parent NOT BETWEEN 1 AND v_node.node - 1
                        OR v_want[v_node.parent] <> v_node.depth - 1 THEN
                    v_broken := v_node.depth - 1;
                    EXIT;
                END IF;
                v_want[v_node.parent] := v_node.depth - 1;
            END IF;
            IF v_node.parent > 0 THEN
                v_floor[v_node.parent] := least(v_floor[v_node.parent], v_floor[v_node.node]);
            END IF;
        ELSE
            v_dead := array_append(v_dead, v_node.node);
        END IF;
    END LOOP;
    v_broken := coalesce(v_broken, (SELECT max(w) FROM unnest(v_want) w));
    IF v_broken IS NOT NULL THEN
        RAISE EXCEPTION 'broken chain' USING ERRCODE = 'MV010',
            DETAIL = v_broken || ' ' || encode(p_row.name, 'hex');
    END IF;
    RETURN v_dead;
END $$;

-- compact_step(after, until, limit, budget, keep_events, now): one bounded step of
-- compact, its own transaction. It takes the sessions with after < sid <= until in
-- sid order, locking each row in turn, and stops after `limit` of them or once they
-- held `budget` nodes (next_node - 1 counts each one's nodes, stored or not). Each
-- session is done whole within the step: an expired one purged, events beyond the
-- newest `keep_events` dropped, unreachable nodes deleted. Returns what it removed,
-- how many sessions it took and the last sid (NULL: none was left). Every query in
-- it (and in _garbage) reads one session through an index; the planner's guesses for
-- _garbage's recursive walk run to millions of rows, which made PostgreSQL JIT-compile
-- it for every session (110-540 ms each on a 1M-message store, against ~1 ms of
-- work), so JIT, sequential and bitmap scans and sorts are off inside it.
DROP FUNCTION IF EXISTS @schema@.compact(bigint, double precision);
CREATE OR REPLACE FUNCTION @schema@.compact_step(
    p_after bigint, p_until bigint, p_limit bigint, p_budget bigint, p_keep_events bigint,
    p_now double precision
) RETURNS TABLE (nodes bigint, events bigint, sessions bigint, done bigint, last_sid bigint)
LANGUAGE plpgsql SET jit = off SET enable_seqscan = off SET enable_bitmapscan = off
    SET enable_sort = off AS $$
DECLARE
    v_row @schema@.sessions;
    v_dead bigint[];
    v_count bigint;
    v_budget bigint := p_budget;
BEGIN
    nodes := 0;
    events := 0;
    sessions := 0;
    done := 0;
    FOR v_row IN SELECT * FROM @schema@.sessions s WHERE s.sid > p_after AND s.sid <= p_until
                 ORDER BY s.sid LIMIT p_limit FOR UPDATE LOOP
        EXIT WHEN done > 0 AND v_budget <= 0;
        done := done + 1;
        last_sid := v_row.sid;
        v_budget := v_budget - (v_row.next_node - 1);
        IF v_row.expires_at IS NOT NULL AND v_row.expires_at <= p_now THEN
            nodes := nodes + @schema@._purge(v_row.sid);
            DELETE FROM @schema@.sessions s WHERE s.sid = v_row.sid;
            sessions := sessions + 1;
            CONTINUE;
        END IF;
        -- a snapshot that cannot be right: what it should reach is unknown
        PERFORM @schema@._snapshot_ok(n, v_row.next_node) FROM @schema@.snapshots n
        WHERE n.sid = v_row.sid;
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
            DELETE FROM @schema@.search_postings p
            WHERE p.sid = v_row.sid AND p.node = ANY (v_dead);
            DELETE FROM @schema@.search_docs d WHERE d.sid = v_row.sid AND d.node = ANY (v_dead);
            nodes := nodes + cardinality(v_dead);
        END IF;
    END LOOP;
    RETURN NEXT;
END $$;

-- compact_plan(): what compact_step will walk: the sessions stored now (count) and
-- the highest sid (sessions created later are new: nothing of theirs to compact).
CREATE OR REPLACE FUNCTION @schema@.compact_plan()
RETURNS TABLE (total bigint, until bigint)
LANGUAGE sql STABLE AS $$
    SELECT count(*), coalesce(max(s.sid), 0) FROM @schema@.sessions s
$$;

-- chain(session, head, base, last, now): the messages of the chain ending at node
-- `head` with depth above `base` (the newest `last`; NULL: all), oldest first, like
-- history. Node 0 and a session that is not live give no row; a `head` that is not
-- stored (compacted away) gives the one row (NULL, NULL), which the client reads as
-- "not stored".

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

-- Search vectors (007_vectors.sql). put_vectors keeps a stored key's vector: the
-- same text under the same embedder has the same vector. PL/pgSQL, whose bodies are
-- not checked against the tables when created: a schema migrated up to an older
-- version (before 7) still takes this file.
CREATE OR REPLACE FUNCTION @schema@.vector_space() RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT v.space FROM @schema@.vector_space v LIMIT 1);
END $$;

CREATE OR REPLACE FUNCTION @schema@.set_vector_space(p_space text, p_reset boolean)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF p_reset THEN
        DELETE FROM @schema@.vectors;
    END IF;
    DELETE FROM @schema@.vector_space;
    INSERT INTO @schema@.vector_space (space) VALUES (p_space);
END $$;

CREATE OR REPLACE FUNCTION @schema@.get_vectors(p_keys text[])
RETURNS TABLE (key text, vec bytea) LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY SELECT v.key, v.vec FROM @schema@.vectors v WHERE v.key = ANY (p_keys);
END $$;

CREATE OR REPLACE FUNCTION @schema@.put_vectors(p_keys text[], p_vecs bytea[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO @schema@.vectors AS v (key, vec) SELECT * FROM unnest(p_keys, p_vecs)
    ON CONFLICT (key) DO NOTHING;
END $$;

-- What compact's sweep (memvault.vectors.reclaim) reads and deletes: every stored
-- key, the bodies of every stored node of a live session (hidden ones and summaries
-- too), and the vectors no such body uses any more.
CREATE OR REPLACE FUNCTION @schema@.vector_keys() RETURNS SETOF text
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY SELECT v.key FROM @schema@.vectors v;
END $$;

CREATE OR REPLACE FUNCTION @schema@.drop_vectors(p_keys text[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM @schema@.vectors v WHERE v.key = ANY (p_keys);
END $$;

CREATE OR REPLACE FUNCTION @schema@.node_bodies(p_session bytea, p_now double precision)
RETURNS SETOF text LANGUAGE sql STABLE AS $$
    SELECT n.body FROM @schema@.sessions s JOIN @schema@.nodes n ON n.sid = s.sid
    WHERE s.name = p_session AND (s.expires_at IS NULL OR s.expires_at > p_now)
$$;

-- Search (migration 008). JIT is off in these functions: the planner's estimates
-- for their joins of arrays and CTEs passed jit_above_cost, and compiling took
-- 1.5 s a call (1.1-1.8 s with JIT, load average 17) for sub-millisecond work.
-- search_pending(limit): the nodes above their session's
-- watermark, oldest first, with whether each is a summary (a node some summary
-- pointer, of the session or a snapshot, reaches through summaries' parents; an
-- undone summary nobody points at is indexed as a message: hidden either way) and
-- the session's created_at (a session restarted since has other nodes of these ids).
CREATE OR REPLACE FUNCTION @schema@.search_pending(p_limit bigint)
RETURNS TABLE (sid bigint, node bigint, body text, summary boolean, created double precision)
LANGUAGE plpgsql SET jit = off STABLE AS $$
BEGIN
    -- PL/pgSQL, not SQL: checked when run, so it is created over a schema that
    -- migrations before 008 made (tests pin older versions)
    RETURN QUERY WITH RECURSIVE behind AS (
        SELECT x.sid, x.created_at, coalesce(m.node, 0) AS mark
        FROM @schema@.sessions x LEFT JOIN @schema@.search_marks m ON m.sid = x.sid
        WHERE x.next_node - 1 > coalesce(m.node, 0)
    ), sums(sid, node) AS (
        SELECT p.sid, p.summary FROM (
            SELECT s.sid, s.summary FROM @schema@.sessions s
            UNION SELECT t.sid, t.summary FROM @schema@.snapshots t) p
        JOIN behind b ON b.sid = p.sid WHERE p.summary <> 0
        UNION
        SELECT n.sid, n.parent FROM sums JOIN @schema@.nodes n
            ON n.sid = sums.sid AND n.node = sums.node
        WHERE n.parent <> 0
    )
    SELECT n.sid, n.node, n.body,
           EXISTS (SELECT 1 FROM sums WHERE sums.sid = n.sid AND sums.node = n.node),
           b.created_at
    FROM behind b JOIN @schema@.nodes n ON n.sid = b.sid AND n.node > b.mark
    ORDER BY n.sid, n.node
    LIMIT p_limit;
END $$;

-- search_index: index nodes search_pending returned, their words counted by the
-- client (posting j: word p_terms[j], p_tfs[j] times, in node p_docs[j], an index
-- into the node arrays), and raise their sessions' watermarks. Nodes of a session
-- restarted or deleted since, or compacted away, are skipped; ON CONFLICT: two
-- searchers may index the same nodes.
CREATE OR REPLACE FUNCTION @schema@.search_index(
    p_sids bigint[], p_nodes bigint[], p_summaries boolean[], p_created float8[],
    p_lengths integer[], p_docs integer[], p_terms text[], p_tfs integer[]
) RETURNS void
LANGUAGE plpgsql SET jit = off AS $$
BEGIN
    WITH d AS (
        SELECT d.i, d.sid, d.node, d.summary, d.length
        FROM unnest(p_sids, p_nodes, p_summaries, p_created, p_lengths)
             WITH ORDINALITY AS d(sid, node, summary, created, length, i)
        JOIN @schema@.sessions s ON s.sid = d.sid AND s.created_at = d.created
        JOIN @schema@.nodes n ON n.sid = d.sid AND n.node = d.node
    ), docs AS (
        INSERT INTO @schema@.search_docs (sid, node, summary, length)
        SELECT d.sid, d.node, d.summary, d.length FROM d
        ON CONFLICT DO NOTHING
    ), postings AS (
        INSERT INTO @schema@.search_postings (term, sid, node, tf, length, summary)
        SELECT t.term, d.sid, d.node, t.tf, d.length, d.summary
        FROM unnest(p_docs, p_terms, p_tfs) AS t(i, term, tf) JOIN d ON d.i = t.i
        ON CONFLICT DO NOTHING
    )
    INSERT INTO @schema@.search_marks (sid, node)
    SELECT d.sid, max(d.node) FROM d GROUP BY d.sid
    ON CONFLICT (sid) DO UPDATE
        SET node = greatest(@schema@.search_marks.node, excluded.node);
END $$;

-- search: the p_k best indexed nodes holding any of p_terms (Okapi BM25, k1 1.2,
-- b 0.75, over the whole index's statistics, like SQLite's FTS5) among the live
-- sessions named (NULL: all), best first, with their place in the full view (NULL:
-- hidden; skipped unless p_hidden). Visibility as memvault.backends.engine.lexical decides
-- it: a summary is visible if the session's summary chain reaches it above base; a
-- message if it lies on the chain from head above base (no walk when the session
-- stores exactly depth messages; otherwise one walk of node ids per session, as deep
-- as the hits need). Every posting of the words in the sessions is read and summed:
-- a top-k cut-off was tried (each word's postings in impact order, stopping once the
-- rest could not reach the k-th hit) and read them all anyway on the benchmark, whose
-- 578 best nodes tie.
CREATE OR REPLACE FUNCTION @schema@.search(
    p_sessions bytea[], p_terms text[], p_k integer, p_hidden boolean,
    p_now double precision
) RETURNS TABLE (name bytea, depth bigint, body text, place bigint, score float8)
LANGUAGE plpgsql SET jit = off SET enable_sort = off STABLE AS $$
DECLARE
    v_docs float8;
    v_avg float8;
    v_hit record;
    v_row @schema@.sessions;
    v_sums bigint[];
    v_throughs bigint[];
    v_linear boolean;
    v_walked bigint[];
    v_next bigint;
    v_at bigint;
    v_steps integer;
    v_node bigint;
    v_parent bigint;
    v_depth bigint;
    v_body text;
    v_taken integer := 0;
    v_terms text[];
    v_idfs float8[];
BEGIN
    SELECT count(*), coalesce(avg(d.length), 1) INTO v_docs, v_avg FROM @schema@.search_docs d;
    -- each word's idf first, in its own statement: inside the ranking query the
    -- planner counted a word's postings again for every posting (1.3 s for 2,000)
    SELECT array_agg(t.term), array_agg(ln(1 + (v_docs - c.n + 0.5) / (c.n + 0.5)))
    INTO v_terms, v_idfs
    FROM (SELECT DISTINCT unnest(p_terms) AS term) t
    CROSS JOIN LATERAL (SELECT count(*) AS n FROM @schema@.search_postings p
                        WHERE p.term = t.term) c;
    -- float8 constants throughout (a numeric 0.75 * length cost a numeric product per
    -- posting), and sorts off: the planner, expecting a few postings, grouped them by
    -- sorting (a hash groups 10,000 in half the time); the top p_k still sort
    FOR v_hit IN
        WITH live AS (
            SELECT s.sid FROM @schema@.sessions s
            WHERE (p_sessions IS NULL OR s.name = ANY (p_sessions))
              AND (s.expires_at IS NULL OR s.expires_at > p_now)
        )
        SELECT p.sid, p.node, bool_or(p.summary) AS summary,
               sum(t.idf * p.tf * 2.2::float8 / (p.tf + 1.2::float8 * (0.25::float8
                   + 0.75::float8 * p.length / v_avg))) AS score
        FROM unnest(v_terms, v_idfs) AS t(term, idf)
        JOIN @schema@.search_postings p ON p.term = t.term
        JOIN live l ON l.sid = p.sid
        GROUP BY p.sid, p.node
        ORDER BY score DESC, p.sid, p.node
    LOOP
        EXIT WHEN v_taken >= p_k;
        IF v_row.sid IS DISTINCT FROM v_hit.sid THEN
            SELECT * INTO v_row FROM @schema@.sessions s WHERE s.sid = v_hit.sid;
            v_sums := '{}';
            v_throughs := '{}';
            v_node := v_row.summary;
            WHILE v_node <> 0 LOOP
                SELECT n.depth, n.parent INTO v_depth, v_parent FROM @schema@.nodes n
                WHERE n.sid = v_row.sid AND n.node = v_node;
                IF NOT FOUND THEN
                    RAISE EXCEPTION 'broken chain' USING ERRCODE = 'MV010',
                        DETAIL = v_row.through || ' ' || encode(v_row.name, 'hex');
                END IF;
                EXIT WHEN v_depth <= v_row.base;
                v_sums := v_sums || v_node;
                v_throughs := v_throughs || v_depth;
                v_node := v_parent;
            END LOOP;
            v_linear := NULL;
            v_walked := '{}';
            v_next := v_row.head;
        END IF;
        SELECT n.depth, n.body INTO v_depth, v_body FROM @schema@.nodes n
        WHERE n.sid = v_hit.sid AND n.node = v_hit.node;
        CONTINUE WHEN NOT FOUND;
        place := NULL;
        IF v_hit.node = ANY (v_sums) THEN
            place := v_depth - v_row.base
                     + (SELECT count(*) FROM unnest(v_throughs) x WHERE x <= v_depth);
        ELSIF NOT v_hit.summary AND v_row.base < v_depth AND v_depth <= v_row.depth THEN
            IF v_linear IS NULL THEN
                -- every node ever made (next_node - 1 of them) is a message on the
                -- chain or an indexed summary: no stored message lies off the chain
                -- (nodes made since the index was brought up to date only make this
                -- false); no count at all when no summary or pop ever made a node
                v_linear := v_row.next_node - 1 = v_row.depth
                    OR v_row.next_node - 1 - v_row.depth = (
                        SELECT count(*) FROM @schema@.search_docs d
                        WHERE d.sid = v_row.sid AND d.summary);
            END IF;
            v_steps := v_row.depth - v_depth + 1;
            IF NOT v_linear AND cardinality(v_walked) < v_steps THEN
                -- walk the chain's node ids once per session, down to twice the
                -- depth needed: a later hit is likely deeper still
                WHILE cardinality(v_walked) < least(2 * v_steps, v_row.depth - v_row.base)
                LOOP
                    SELECT n.parent, n.depth INTO v_parent, v_at FROM @schema@.nodes n
                    WHERE n.sid = v_row.sid AND n.node = v_next;
                    IF NOT FOUND OR v_at <> v_row.depth - cardinality(v_walked) THEN
                        RAISE EXCEPTION 'broken chain' USING ERRCODE = 'MV010',
                            DETAIL = v_row.depth - cardinality(v_walked) || ' ' || encode(v_row.name, 'hex');
                    END IF;
                    v_walked := v_walked || v_next;
                    v_next := v_parent;
                END LOOP;
            END IF;
            IF v_linear OR v_walked[v_steps] = v_hit.node THEN
                place := v_depth - v_row.base
                         + (SELECT count(*) FROM unnest(v_throughs) x WHERE x < v_depth);
            END IF;
        END IF;
        CONTINUE WHEN place IS NULL AND NOT p_hidden;
        name := v_row.name;
        depth := v_depth;
        body := v_body;
        score := v_hit.score;
        RETURN NEXT;
        v_taken := v_taken + 1;
    END LOOP;
END $$;
