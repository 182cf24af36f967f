"""``memvault mcp`` through the MCP SDK's own client: one server subprocess on a SQLite
file, talked to over stdio as a desktop client does, for the whole module.

Every tool is listed with its schema, description and annotations, and called; hostile
text in every field round-trips exactly; wrong types and bad values are tool errors
that say what is wrong, with nothing written (the store's state, read by this process
from the same file, is unchanged). Each test works in sessions of its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memvault
from memvault.integrations.mcp import history_uri
from memvault.paging import ORDERS
from memvault.testing import dump_state
from tests.support.mcp_clients import Client, stdio

WRITES = {"append_messages", "summarize", "save_snapshot", "rollback"}
READS = {"read_history", "search_messages", "list_snapshots", "list_sessions", "show_log"}

HOSTILE = {
    "unicode": "用户 Ünïcødé 🧠",
    "nul": "a\x00b\x00",
    "rtl": "\u202eevil\u202c \u200f",
    "quotes": "'\"`; DROP TABLE sessions; --",
    "path": "../../etc/passwd/%2F?x=1#y",
    "template": "{session_id}",
    # The SDK reads some string arguments as JSON; these must stay text.
    "json null": "null",
    "json list": "[1, 2]",
    "json object": '{"a": 1}',
    "whitespace": " \t\n\r ",
    "long": "x" * 249 + " word",  # ids and names hold up to 256 characters
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Client, str, Path]]:
    folder = tmp_path_factory.mktemp("mcp")
    url = f"sqlite:///{folder}/mcp.db"
    log = folder / "server.log"
    with stdio("--url", url, stderr=log) as client:
        yield client, url, log


@pytest.fixture
def client(served: tuple[Client, str, Path]) -> Client:
    return served[0]


@pytest.fixture
def store(served: tuple[Client, str, Path]) -> Iterator[memvault.Store]:
    """The server's store, opened by this process."""
    with memvault.open(served[1]) as opened:
        yield opened


def sid(request: pytest.FixtureRequest, suffix: str = "") -> str:
    """A session id of this test's own."""
    return f"{request.node.name}{suffix}"


def msg(content: Any, role: str = "user", **fields: Any) -> dict[str, Any]:
    return {"role": role, "content": content, **fields}


# -- the listing ---------------------------------------------------------------------


def test_the_server_says_what_it_is_and_how_to_use_it(client: Client) -> None:
    init = client.session.initialize_result
    assert init is not None
    assert init.server_info.name == "memvault"
    assert init.server_info.version == memvault.__version__
    instructions = init.instructions or ""
    for tool in WRITES | READS:
        assert tool in instructions, tool


def test_every_tool_is_listed_with_its_schema_description_and_annotations(
    client: Client,
) -> None:
    tools = client.tools()
    assert set(tools) == WRITES | READS
    hints = {
        name: (
            t.annotations.read_only_hint,
            t.annotations.destructive_hint,
            t.annotations.idempotent_hint,
            t.annotations.open_world_hint,
        )
        for name, t in tools.items()
        if t.annotations
    }
    assert hints == {
        **{name: (True, False, True, False) for name in READS},
        "append_messages": (False, False, True, False),
        "summarize": (False, False, True, False),
        "save_snapshot": (False, False, True, False),
        "rollback": (False, True, False, False),
    }
    params = {
        name: (sorted(t.input_schema["properties"]), sorted(t.input_schema.get("required", [])))
        for name, t in tools.items()
    }
    assert params == {
        "append_messages": (
            ["expect_version", "messages", "session_id"],
            ["messages", "session_id"],
        ),
        "read_history": (["full", "last", "session_id"], ["session_id"]),
        "search_messages": (["include_hidden", "k", "query", "session_id"], ["query"]),
        "summarize": (
            ["expect_version", "session_id", "summary", "summary_id", "through"],
            ["session_id", "summary", "through"],
        ),
        "save_snapshot": (["name", "session_id"], ["name", "session_id"]),
        "list_snapshots": (["session_id"], ["session_id"]),
        "rollback": (["name", "session_id"], ["name", "session_id"]),
        "list_sessions": (["cursor", "descending", "limit", "match", "order"], []),
        "show_log": (["last", "session_id"], ["session_id"]),
    }
    for name, tool in tools.items():
        assert tool.title and len(tool.description or "") > 80, name
        assert "\n" not in (tool.description or ""), name
        assert tool.output_schema and tool.output_schema["type"] == "object", name
        for field, schema in tool.input_schema["properties"].items():
            assert len(schema.get("description", "")) > 15, (name, field)
    append = tools["append_messages"].input_schema
    message = append["$defs"]["Message"]
    assert message["properties"]["role"]["enum"] == [
        "system",
        "developer",
        "user",
        "assistant",
        "tool",
    ]
    assert message["required"] == ["role"] and message["additionalProperties"] is False
    assert append["properties"]["session_id"]["type"] == "string"
    order = tools["list_sessions"].input_schema["properties"]["order"]
    assert tuple(order["enum"]) == ORDERS


# -- every tool ----------------------------------------------------------------------


def test_append_then_read_returns_every_field_exactly(
    client: Client, store: memvault.Store, request: pytest.FixtureRequest
) -> None:
    s = sid(request)
    batch = [
        msg("Book a table for two, 用户 \x00 \u202e", id="u1", name="wang", metadata={"k": [1]}),
        msg(
            None,
            "assistant",
            id="a1",
            tool_calls=[{"id": "c1", "name": "book", "arguments": '{"seats": 2}'}],
        ),
        msg([{"type": "text", "text": "no table"}], "tool", id="t1", tool_call_id="c1"),
        msg("at 8?", "assistant", created_at="2026-01-02T03:04:05.123456Z"),
    ]
    appended = client.ok("append_messages", session_id=s, messages=batch)
    assert appended["version"] == 1 and appended["ids"][:3] == ["u1", "a1", "t1"]
    stored = store.session(s).history()
    assert [m.id for m in stored] == appended["ids"]
    read = client.ok("read_history", session_id=s)
    assert read["messages"] == [m.model_dump(mode="json") for m in stored]
    assert (read["exists"], read["version"], read["length"]) == (True, 1, 4)
    assert stored[0].content == batch[0]["content"] and stored[0].metadata == {"k": [1]}
    assert stored[1].tool_calls[0].arguments == '{"seats": 2}'
    assert stored[3].created_at.isoformat() == "2026-01-02T03:04:05.123456+00:00"
    newest = client.ok("read_history", session_id=s, last=1)
    assert newest == {**read, "messages": read["messages"][-1:]}  # the same version and length


def test_append_is_idempotent_by_message_id(
    client: Client, store: memvault.Store, request: pytest.FixtureRequest
) -> None:
    s = sid(request)
    batch = [msg("one", id="m1"), msg("two", id="m2")]
    assert client.ok("append_messages", session_id=s, messages=batch)["version"] == 1
    again = client.ok("append_messages", session_id=s, messages=batch)  # a retry
    assert again == {"session_id": s, "version": 1, "ids": ["m1", "m2"]}
    before = dump_state(store, [s])
    text = client.error("append_messages", session_id=s, messages=[msg("x", id="m2"), msg("y")])
    assert "DuplicateMessageError" in text and "Nothing was written" in text
    assert dump_state(store, [s]) == before
    assert [m.content for m in store.session(s).history()] == ["one", "two"]


def test_expect_version_makes_append_compare_and_set(
    client: Client, store: memvault.Store, request: pytest.FixtureRequest
) -> None:
    s = sid(request)
    assert client.ok("append_messages", session_id=s, messages=[msg("a")], expect_version=0)
    version = client.ok("read_history", session_id=s)["version"]
    client.ok("append_messages", session_id=s, messages=[msg("b")])  # another writer
    before = dump_state(store, [s])
    text = client.error(
        "append_messages", session_id=s, messages=[msg("c")], expect_version=version
    )
    assert "ConflictError" in text and "version 2, expected 1" in text
    assert "Nothing was written" in text
    assert dump_state(store, [s]) == before


def test_a_session_that_does_not_exist_reads_as_empty(
    client: Client, store: memvault.Store, request: pytest.FixtureRequest
) -> None:
    s = sid(request)
    assert client.ok("read_history", session_id=s) == {
        "session_id": s,
        "exists": False,
        "version": 0,
        "length": 0,
        "summarized": 0,
        "messages": [],
    }
    assert client.ok("list_snapshots", session_id=s)["snapshots"] == []
    assert client.ok("show_log", session_id=s)["events"] == []
    assert store.session(s).info() is None  # reading made nothing


def test_search_one_session_or_all(client: Client, request: pytest.FixtureRequest) -> None:
    a, b = sid(request, "-a"), sid(request, "-b")
    word = f"zebra{abs(hash(a))}"
    client.ok("append_messages", session_id=a, messages=[msg(f"a {word}"), msg("nothing")])
    client.ok("append_messages", session_id=b, messages=[msg(f"b {word} {word}")])
    both = client.ok("search_messages", query=word)["hits"]
    assert {(h["session_id"], h["message"]["content"]) for h in both} == {
        (a, f"a {word}"),
        (b, f"b {word} {word}"),
    }
    one = client.ok("search_messages", query=word, session_id=a)["hits"]
    assert [(h["session_id"], h["position"], h["hidden"]) for h in one] == [(a, 1, False)]
    assert len(client.ok("search_messages", query=word, k=1)["hits"]) == 1
    assert client.ok("search_messages", query=word, k=0)["hits"] == []


def test_summarize_keeps_the_originals_and_is_idempotent_by_summary_id(
    client: Client, store: memvault.Store, request: pytest.FixtureRequest
) -> None:
    s = sid(request)
    client.ok("append_messages", session_id=s, messages=[msg(str(i), id=f"m{i}") for i in range(4)])
    done = client.ok("summarize", session_id=s, summary="0 to 2", through="m2", summary_id="s1")
    assert done == {"session_id": s, "version": 2, "summary_id": "s1"}
    again = client.ok("summarize", session_id=s, summary="0 to 2", through="m2", summary_id="s1")
    assert again["version"] == 2
    read = client.ok("read_history", session_id=s)
    assert [m["content"] for m in read["messages"]] == ["0 to 2", "3"]
    assert read["messages"][0]["role"] == "system"
    assert (read["length"], read["summarized"]) == (2, 3)
    full = client.ok("read_history", session_id=s, full=True)
    assert [m["content"] for m in full["messages"]] == ["0", "1", "2", "0 to 2", "3"]
    assert [e.op for e in store.session(s).log()] == ["append", "summarize"]
    fresh = client.ok("summarize", session_id=s, summary="all", through="m3")
    assert fresh["summary_id"] and fresh["summary_id"] != "s1"


def test_snapshot_rollback_and_its_undo(
    client: Client, store: memvault.Store, request: pytest.FixtureRequest
) -> None:
    s = sid(request)
    client.ok("append_messages", session_id=s, messages=[msg("kept")])
    snap = client.ok("save_snapshot", session_id=s, name="before-tool")
    assert (snap["name"], snap["version"], snap["length"], snap["auto"]) == (
        "before-tool",
        1,
        1,
        False,
    )
    client.ok(
        "append_messages", session_id=s, messages=[msg("<garbage>", "tool", tool_call_id="c")]
    )
    done = client.ok("rollback", session_id=s, name="before-tool")
    assert done["restored"] == "before-tool"
    assert done["saved"]["name"] == "auto:pre-rollback@v2" and done["saved"]["auto"] is True
    assert [m.content for m in store.session(s).history()] == ["kept"]
    names = [x["name"] for x in client.ok("list_snapshots", session_id=s)["snapshots"]]
    assert names == ["before-tool", "auto:pre-rollback@v2"]
    client.ok("rollback", session_id=s, name=done["saved"]["name"])  # the undo
    assert [m.content for m in store.session(s).history()] == ["kept", "<garbage>"]
    before = dump_state(store, [s])
    text = client.error("save_snapshot", session_id=s, name="before-tool")
    assert "SnapshotExistsError" in text and "Nothing was written" in text
    text = client.error("rollback", session_id=s, name="never-saved")
    assert "SnapshotNotFoundError" in text and "Nothing was written" in text
    assert dump_state(store, [s]) == before


def test_list_sessions_pages_with_the_cursor(
    client: Client, request: pytest.FixtureRequest
) -> None:
    prefix = sid(request, "-")
    ids = [f"{prefix}{i}" for i in range(5)]
    for i, s in enumerate(ids):
        client.ok("append_messages", session_id=s, messages=[msg(str(j)) for j in range(i + 1)])
    seen: list[str] = []
    cursor = ""
    for _ in range(5):
        page = client.ok("list_sessions", limit=2, cursor=cursor, match=prefix)
        seen += [info["session_id"] for info in page["sessions"]]
        if page["cursor"] is None:
            break
        cursor = page["cursor"]
    assert seen == ids
    longest = client.ok("list_sessions", limit=1, order="length", descending=True, match=prefix)
    assert [(i["session_id"], i["length"]) for i in longest["sessions"]] == [(ids[4], 5)]


def test_show_log_says_who_changed_what(
    client: Client, store: memvault.Store, request: pytest.FixtureRequest
) -> None:
    s = sid(request)
    client.ok("append_messages", session_id=s, messages=[msg("a")])
    client.ok("save_snapshot", session_id=s, name="x")
    client.ok("rollback", session_id=s, name="x")
    events = client.ok("show_log", session_id=s)["events"]
    assert [(e["version"], e["op"]) for e in events] == [
        (1, "append"),
        (1, "snapshot"),
        (2, "rollback"),
    ]
    assert events[2]["detail"] == {"to": "x", "saved": "auto:pre-rollback@v1"}
    assert {e["writer"] for e in events} == {e.writer for e in store.session(s).log()}
    assert client.ok("show_log", session_id=s, last=1)["events"] == events[-1:]
    assert client.ok("show_log", session_id=s, last=0)["events"] == []


# -- resources -----------------------------------------------------------------------


def test_a_session_history_is_a_resource_for_any_id(
    client: Client, request: pytest.FixtureRequest
) -> None:
    templates = client.portal.call(client.session.list_resource_templates).resource_templates
    assert [t.uri_template for t in templates] == ["memvault://sessions/{session_id}/history"]
    hostile = [sid(request, suffix) for suffix in ("/../x", "%2F", "\x00", " ?#", "\u202e用户")]
    for s in hostile:
        client.ok("append_messages", session_id=s, messages=[msg(f"in {s}")])
    for s in hostile:
        read = json.loads(client.read(history_uri(s)))
        assert read == client.ok("read_history", session_id=s)
        assert [m["content"] for m in read["messages"]] == [f"in {s}"]
    listed = {
        r.name: str(r.uri) for r in client.portal.call(client.session.list_resources).resources
    }
    for s in hostile:
        assert listed[s] == history_uri(s)
    with pytest.raises(Exception, match="no session"):
        client.read(history_uri(sid(request, "-missing")))


# -- hostile input -------------------------------------------------------------------


@pytest.mark.parametrize("value", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_text_round_trips_in_every_field(
    client: Client, store: memvault.Store, value: str
) -> None:
    # Top-level arguments (session_id, summary_id, name, match...) are the value itself:
    # the SDK reads some string arguments as JSON, and "null" must stay a session id.
    s = value
    tag = f"hostile{len(value)}x{abs(hash(value))}"
    message = msg(
        f"{value} {tag}",
        "assistant",
        id=f"m{value}",
        name=value,
        tool_calls=[{"id": value, "name": value, "arguments": value}],
        metadata={value: value},
    )
    client.ok("append_messages", session_id=s, messages=[message])
    client.ok("append_messages", session_id=s, messages=[msg(value, "tool", tool_call_id=value)])
    (stored, answer) = store.session(s).history()
    assert (stored.id, stored.content, stored.name, stored.metadata) == (
        f"m{value}",
        f"{value} {tag}",
        value,
        {value: value},
    )
    assert (stored.tool_calls[0].id, stored.tool_calls[0].arguments) == (value, value)
    assert (answer.content, answer.tool_call_id) == (value, value)
    read = client.ok("read_history", session_id=s)["messages"]
    assert read == [stored.model_dump(mode="json"), answer.model_dump(mode="json")]
    assert json.loads(client.read(history_uri(s)))["messages"] == read
    hits = client.ok("search_messages", query=f"{value} {tag}", session_id=s)["hits"]
    assert [h["session_id"] for h in hits] == [s, s][: len(hits)] and hits
    assert hits[0]["message"]["id"] == f"m{value}"
    summary = client.ok(
        "summarize", session_id=s, summary=value, through=f"m{value}", summary_id=value
    )
    assert summary["summary_id"] == value
    assert (store.session(s).history()[0].id, store.session(s).history()[0].content) == (
        value,
        value,
    )
    client.ok("save_snapshot", session_id=s, name=value)
    snapshots = client.ok("list_snapshots", session_id=s)["snapshots"]
    assert [x["name"] for x in snapshots] == [value]
    client.ok("rollback", session_id=s, name=value)
    listed = [i["session_id"] for i in client.ok("list_sessions", match=s)["sessions"]]
    assert s in listed and all(s in i for i in listed)
    events = client.ok("show_log", session_id=s)["events"]
    assert events[-1]["detail"]["to"] == value
    assert [e.op for e in store.session(s).log()] == [
        "append",
        "append",
        "summarize",
        "snapshot",
        "rollback",
    ]


def test_huge_text_round_trips_up_to_the_limit_and_is_refused_past_it(
    client: Client, store: memvault.Store, request: pytest.FixtureRequest
) -> None:
    s = sid(request)
    big = "\U0001f600\x00é" * 300_000  # 2.1 MiB of UTF-8, escapes in JSON
    client.ok("append_messages", session_id=s, messages=[msg(big, id="big")])
    assert store.session(s).history()[0].content == big
    assert client.ok("read_history", session_id=s)["messages"][0]["content"] == big
    before = dump_state(store)
    text = client.error("append_messages", session_id=s, messages=[msg("y" * (4 * 2**20))])
    assert "InvalidMessageError" in text and "the limit is 4194304" in text
    text = client.error("append_messages", session_id="s" * 513, messages=[msg("x")])
    assert "session id is 513 characters; the limit is 512" in text
    text = client.error("save_snapshot", session_id=s, name="n" * 257)
    assert "snapshot name is 257 characters; the limit is 256" in text
    text = client.error("append_messages", session_id=s, messages=[msg("x")] * 1001)
    assert "at most 1000 messages" in text
    assert dump_state(store) == before


BAD_VALUES: list[tuple[str, dict[str, Any], str]] = [
    ("append_messages", {"session_id": "", "messages": [msg("x")]}, "must not be empty"),
    ("append_messages", {"messages": [msg("x")]}, "session_id"),
    ("append_messages", {"session_id": "s", "messages": []}, "at least one message"),
    ("append_messages", {"session_id": "s", "messages": [msg("x", "robot")]}, "role"),
    ("append_messages", {"session_id": "s", "messages": [{"content": "x"}]}, "role"),
    ("append_messages", {"session_id": "s", "messages": [msg("x", contnet="y")]}, "contnet"),
    ("append_messages", {"session_id": "s", "messages": [msg("x", id="")]}, "id"),
    ("append_messages", {"session_id": "s", "messages": [msg("x", id="i" * 257)]}, "id"),
    ("append_messages", {"session_id": "s", "messages": [msg(5)]}, "content"),
    ("append_messages", {"session_id": "s", "messages": [msg("x", metadata=[1])]}, "metadata"),
    (
        "append_messages",
        {"session_id": "s", "messages": [msg("x", created_at="soon")]},
        "created_at",
    ),
    (
        "append_messages",
        {"session_id": "s", "messages": [msg("x")], "expect_version": -1},
        "expect_version",
    ),
    (
        "append_messages",
        {"session_id": "s", "messages": [msg("x", id="d"), msg("y", id="d")]},
        "DuplicateMessageError",
    ),
    ("read_history", {"session_id": "s", "last": -1}, "last must be an integer"),
    ("search_messages", {"query": "  \"' -- * "}, "no word to search for"),
    ("search_messages", {"query": "x", "k": -1}, "k must be an integer"),
    ("summarize", {"session_id": "s", "summary": "x", "through": ""}, "through"),
    ("summarize", {"session_id": "s", "summary": "x", "through": "nope"}, "nope"),
    (
        "summarize",
        {"session_id": "s", "summary": "x", "through": "m", "summary_id": "i" * 257},
        "id",
    ),
    ("save_snapshot", {"session_id": "s", "name": ""}, "must not be empty"),
    ("save_snapshot", {"session_id": "s", "name": "auto:mine"}, "reserved"),
    ("rollback", {"session_id": "s", "name": ""}, "must not be empty"),
    ("list_sessions", {"limit": 0}, "limit"),
    ("list_sessions", {"limit": 10_001}, "limit"),
    ("list_sessions", {"cursor": "not a cursor"}, "cursor"),
    ("list_sessions", {"order": "size"}, "order"),
    ("show_log", {"session_id": "s", "last": -1}, "last must be an integer"),
]


@pytest.mark.parametrize(
    ("tool", "arguments", "says"),
    BAD_VALUES,
    ids=[f"{t}-{i}" for i, (t, _, _) in enumerate(BAD_VALUES)],
)
def test_bad_values_are_tool_errors_that_say_what_is_wrong(
    client: Client, store: memvault.Store, tool: str, arguments: dict[str, Any], says: str
) -> None:
    client.ok("append_messages", session_id="s", messages=[msg("there", id="m")])
    before = dump_state(store)
    text = client.error(tool, **arguments)
    assert says in text
    if tool in WRITES:
        assert "validation error" in text or "Nothing was written" in text
    assert dump_state(store) == before


WRONG_TYPES = {
    "append_messages": {
        "session_id": [5, None, ["s"], {"s": 1}],
        "messages": ["not a list", 5, [5], {"role": "user"}],
        "expect_version": ["1", True, 1.5],
    },
    "read_history": {"session_id": [5], "last": ["2", True, 1.5], "full": ["yes", 1]},
    "search_messages": {
        "query": [5, None],
        "session_id": [5],
        "k": ["3", False],
        "include_hidden": [1],
    },
    "summarize": {
        "session_id": [5],
        "summary": [None, 5],
        "through": [5],
        "summary_id": [5],
        "expect_version": ["0"],
    },
    "save_snapshot": {"session_id": [5], "name": [5, None]},
    "list_snapshots": {"session_id": [None, 1.5]},
    "rollback": {"session_id": [5], "name": [True]},
    "list_sessions": {
        "limit": ["10", True],
        "cursor": [5],
        "order": [5],
        "descending": ["true"],
        "match": [5],
    },
    "show_log": {"session_id": [5], "last": ["1"]},
}
VALID = {
    "append_messages": {"session_id": "s", "messages": [msg("new")]},
    "read_history": {"session_id": "s"},
    "search_messages": {"query": "there"},
    "summarize": {"session_id": "s", "summary": "sum", "through": "m"},
    "save_snapshot": {"session_id": "s", "name": "fresh"},
    "list_snapshots": {"session_id": "s"},
    "rollback": {"session_id": "s", "name": "fresh"},
    "list_sessions": {},
    "show_log": {"session_id": "s"},
}


@pytest.mark.parametrize(
    ("tool", "field", "value"),
    [
        (tool, field, value)
        for tool, fields in WRONG_TYPES.items()
        for field, values in fields.items()
        for value in values
    ],
)
def test_a_wrong_type_in_any_field_is_a_tool_error_naming_it(
    client: Client, store: memvault.Store, tool: str, field: str, value: Any
) -> None:
    assert set(WRONG_TYPES[tool]) == set(client.tools()[tool].input_schema["properties"])
    client.ok("append_messages", session_id="s", messages=[msg("there", id="m")])
    before = dump_state(store)
    text = client.error(tool, **{**VALID[tool], field: value})
    assert "validation error" in text and field in text
    assert dump_state(store) == before
