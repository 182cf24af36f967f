-- memvault PostgreSQL schema, version 4: chain, a read of any state the event log
-- points to (Session.history(at_version=N) and audits).
--
-- chain(session, head, base, last, now): the messages of the chain ending at node
-- `head` with depth above `base` (the newest `last`; NULL: all), oldest first, like
-- history. Node 0 and a session that is not live give no row; a `head` that is not
-- stored (compacted away) gives the one row (NULL, NULL), which the client reads as
-- "not stored".

CREATE FUNCTION @schema@.chain(
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
        FROM @schema@._chain(v_sid, p_head,
                             greatest(0, least(coalesce(p_last, v_depth - p_base),
                                               v_depth - p_base))) c
        ORDER BY c.depth;
END $$;
