"""`memvault sessions` a page at a time: --limit, --cursor, --order, --desc, --match;
JSON Lines end with the next page's cursor; a bad cursor is one line on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memvault
from memvault import Message
from tests.cli.test_cli_output import SHARED, assert_one_line_error, cli
from tests.support.backends import BACKENDS


@pytest.fixture(params=SHARED)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    url = BACKENDS[request.param](request, tmp_path)
    with memvault.open(url) as store:
        for i, sid in enumerate(["b", "a", "d", "c", "e"]):
            store.session(sid).append([Message.user(f"{sid}{k}") for k in range(i + 1)])
    return url


def test_json_pages_walk_every_session_by_length(url: str) -> None:
    seen, cursor = [], None
    for _ in range(5):
        args = ["--url", url, "sessions", "--json", "--limit", "2", "--order", "length", "--desc"]
        done = cli(*args, *(["--cursor", cursor] if cursor else []))
        assert done.exit_code == 0, done.stderr
        *rows, last = [json.loads(x) for x in done.stdout.splitlines()]
        assert len(rows) <= 2 and set(last) == {"cursor"}
        seen += [(r["session_id"], r["length"]) for r in rows]
        cursor = last["cursor"]
        if cursor is None:
            break
    assert seen == [("e", 5), ("c", 4), ("d", 3), ("a", 2), ("b", 1)]


def test_text_page_says_how_to_go_on(url: str) -> None:
    done = cli("--url", url, "sessions", "--limit", "3", "--match", "a")
    assert done.exit_code == 0 and "a " in done.stdout and "(last page)" in done.stdout
    first = cli("--url", url, "sessions", "--limit", "3").stdout.splitlines()
    assert [line.split()[0] for line in first[1:4]] == ["a", "b", "c"]
    assert first[-1].startswith("next page: --cursor ")
    cursor = first[-1].split()[-1]
    rest = cli("--url", url, "sessions", "--limit", "3", "--cursor", cursor).stdout.splitlines()
    assert [line.split()[0] for line in rest[1:-1]] == ["d", "e"]
    whole = cli("--url", url, "sessions", "--desc").stdout.splitlines()
    assert [line.split()[0] for line in whole[1:]] == ["e", "d", "c", "b", "a"]


def test_bad_cursor_or_order_is_one_line(url: str) -> None:
    assert_one_line_error(
        cli("--url", url, "sessions", "--limit", "2", "--cursor", "junk"),
        "InvalidArgumentError",
        "cursor",
    )
    cursor = json.loads(
        cli("--url", url, "sessions", "--json", "--limit", "1").stdout.splitlines()[-1]
    )["cursor"]
    assert_one_line_error(
        cli("--url", url, "sessions", "--limit", "2", "--cursor", cursor, "--order", "version"),
        "same order",
    )
    assert_one_line_error(cli("--url", url, "sessions", "--order", "name"), "order")
