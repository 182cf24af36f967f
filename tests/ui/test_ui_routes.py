"""The inspector's routes through Starlette's TestClient, on every backend."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from html import escape
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from starlette.testclient import TestClient

import memvault
from memvault import Message
from memvault.ui import create_app
from tests.support.inspector import HOSTILE, HOSTILE_ID, HOSTILE_LINK, free_port, seed

TOKEN = "test-token-0123456789"


@pytest.fixture
def store(any_store_url: str) -> Iterator[memvault.Store]:
    with memvault.open(any_store_url) as store:
        yield store


def client(store: memvault.Store, *, writes: bool = False) -> TestClient:
    return TestClient(create_app(store, allow_writes=writes, token=TOKEN))


def _ids(html: str) -> list[str]:
    return re.findall(r'class="sid" href="/session\?id=([^"]+)"', html)


def _next(html: str) -> str | None:
    found = re.search(r'<a rel="next" href="([^"]+)"', html)
    return found.group(1).replace("&amp;", "&") if found else None


def test_sessions_list_filters_sorts_and_pages(store: memvault.Store) -> None:
    for i in range(120):
        store.session(f"user-{i:03d}").append(
            [Message.user("hi")] * 1 if i % 2 else [Message.user("a"), Message.user("b")]
        )
    store.session("other").append([Message.user("x")])
    c = client(store)
    first = c.get("/").text
    assert "page 1" in first and 'rel="first"' not in first
    assert _ids(first) == ["other"] + [f"user-{i:03d}" for i in range(49)]
    second = c.get(_next(first) or "").text
    assert "page 2" in second and 'rel="first"' in second
    last = c.get(_next(second) or "").text
    assert "page 3" in last and _next(last) is None
    assert _ids(last) == [f"user-{i:03d}" for i in range(99, 120)]
    assert _ids(c.get("/?q=user-00").text) == [f"user-00{i}" for i in range(10)]
    assert "other" not in c.get("/?q=user").text and _ids(c.get("/?q=USER").text) == []
    desc = c.get("/?order=desc").text
    assert desc.index("user-119") < desc.index("user-118")
    by_length = c.get("/?sort=length&order=desc&q=user-00").text
    # length 2 first, ties by id descending too
    assert _ids(by_length)[:5] == ["user-008", "user-006", "user-004", "user-002", "user-000"]
    edited = c.get("/?sort=version&cursor=not-a-cursor&page=7").text
    assert "page 1" in edited and "no longer applies" in edited and len(_ids(edited)) == 50


def test_sessions_list_reads_one_page_only(
    store: memvault.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neither every id (sessions()) nor one info() per session: one page, read once."""
    for i in range(60):
        store.session(f"s{i:02d}").append([Message.user("hi")])
    pages: list[dict[str, object]] = []
    original = memvault.Store.sessions_page

    def counted(self: memvault.Store, *args: object, **kwargs: object) -> object:
        pages.append(kwargs)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    def refused(*args: object) -> None:
        raise AssertionError("read more than a page")

    monkeypatch.setattr(memvault.Store, "sessions_page", counted)
    monkeypatch.setattr(memvault.Store, "sessions", refused)
    monkeypatch.setattr(memvault.Session, "info", refused)
    c = client(store)
    second = c.get(_next(c.get("/").text) or "").text
    assert _ids(second) == [f"s{i:02d}" for i in range(50, 60)] and len(pages) == 2


def test_sessions_list_sorts_past_two_thousand_sessions(tmp_path: Path) -> None:
    """2,100 sessions (past the 2,000 the list once sorted at most), each key both
    ways: the first page holds the first 50 in that order and the walk ends on the
    last. Failing: sorting falls back to id, or reads a page out of order."""
    with memvault.open(f"sqlite:///{tmp_path}/big.db", durability="normal") as store:
        for i in range(2100):
            messages = [Message.user("m") for _ in range(1 + i * 7 % 13)]
            store.session(f"s{i:04d}").append(messages)
        store.session("s0003").pop()  # version 2, length one less
        c = client(store)
        infos = {sid: store.session(sid).info() for sid in store.sessions()}
        for sort in ("version", "length", "updated", "expires"):
            for desc in (False, True):

                def key(sid: str, sort: str = sort) -> tuple[object, str]:
                    info = infos[sid]
                    assert info is not None
                    value = {
                        "version": info.version,
                        "length": info.length,
                        "updated": info.updated_at,
                        "expires": 0,
                    }[sort]
                    return value, sid

                expected = sorted(infos, key=key, reverse=desc)
                html = c.get(f"/?sort={sort}&order={'desc' if desc else 'asc'}").text
                assert "narrow the filter" not in html
                if sort == "updated":  # equal times to the microsecond tie by id
                    assert [key(i)[0] for i in _ids(html)] == [key(i)[0] for i in expected[:50]]
                else:
                    assert _ids(html) == expected[:50], (sort, desc)
        assert _ids(c.get("/?sort=version&order=desc").text)[0] == "s0003"


def test_timeline_shows_events_roles_tools_and_hidden_messages(store: memvault.Store) -> None:
    seed(store)
    page = client(store).get("/session?id=agent-1")
    assert page.status_code == 200
    html = page.text
    for version, op in [
        (1, "append"),
        (2, "append"),
        (2, "snapshot"),
        (3, "append"),
        (4, "rollback"),
        (5, "append"),
        (6, "pop"),
        (7, "trim"),
    ]:
        assert re.search(
            rf'<span class="ver">v{version}</span> <span class="op">{op}</span>', html
        ), (version, op)
    ver = '<span class="ver">v{}</span>'.format
    assert html.index(ver(3)) < html.index(ver(4)) < html.index(ver(7))
    assert 'class="msg role-tool"' in html and 'class="msg role-assistant"' in html
    anchor = "call-" + b"call_1".hex()
    assert f'id="{anchor}"' in html and f'href="#{anchor}"' in html
    assert "&#34;city&#34;: &#34;Paris&#34;" in html  # pretty-printed, indented JSON
    hidden = re.findall(r'class="msg role-(\w+) hidden"', html)
    assert sorted(hidden) == ["assistant", "system", "user", "user"]  # rolled back, trimmed, popped
    assert "auto:pre-rollback@v3" in html and "snapshot good" in html


def test_content_is_escaped_and_the_policy_forbids_inline_script(store: memvault.Store) -> None:
    seed(store)
    store.session(HOSTILE_ID).append([Message.user(HOSTILE)])
    c = client(store)
    for path in (
        "/session?id=agent-1",
        "/",
        f"/session?id={quote(HOSTILE_ID, safe='')}",
        "/diff?id=agent-1&a=v2&b=v3",
    ):
        response = c.get(path)
        assert response.status_code == 200, path
        assert "<script>document" not in response.text and "<img src=x" not in response.text
        assert "<b>sion</b>" not in response.text
        assert "script-src 'self'" in response.headers["content-security-policy"]
    html = c.get("/session?id=agent-1").text
    assert "&lt;script&gt;document.title=" in html
    assert f'href="{HOSTILE_LINK}' not in html and HOSTILE_LINK in html


def test_diff_between_versions_and_snapshots(store: memvault.Store) -> None:
    seed(store)
    c = client(store)
    html = c.get("/diff?id=agent-1&a=v2&b=v3").text
    assert re.search(r'id="added-count">2<', html) and re.search(r'id="hidden-count">0<', html)
    back = c.get("/diff?id=agent-1&a=auto%3Apre-rollback%40v3&b=good").text
    assert re.search(r'id="added-count">0<', back) and re.search(r'id="hidden-count">2<', back)
    assert "&lt;script&gt;" in back
    now = c.get("/diff?id=agent-1&a=good&b=v7").text  # trimmed the system turn, added the answer
    assert re.search(r'id="added-count">1<', now) and re.search(r'id="hidden-count">1<', now)
    missing = c.get("/diff?id=agent-1&a=v1&b=v99")
    assert missing.status_code == 400 and "VersionNotFoundError" in missing.text


def test_unknown_session_is_404(store: memvault.Store) -> None:
    assert client(store).get("/session?id=nope").status_code == 404


def test_writes_are_refused_unless_allowed(store: memvault.Store) -> None:
    seed(store)
    c = client(store)
    assert 'name="token"' not in c.get("/session?id=agent-1").text
    response = c.post("/do/rollback", data={"id": "agent-1", "token": TOKEN, "name": "good"})
    assert response.status_code == 403 and "--allow-writes" in response.text
    assert store.session("agent-1").info().version == 7


@pytest.mark.parametrize(
    "headers, token",
    [
        ({}, "wrong"),
        ({}, ""),
        ({"origin": "http://evil.example"}, TOKEN),
        ({"origin": "null"}, TOKEN),
        ({"sec-fetch-site": "cross-site"}, TOKEN),
    ],
)
def test_cross_site_or_tokenless_writes_are_refused(
    store: memvault.Store, headers: dict[str, str], token: str
) -> None:
    seed(store)
    c = client(store, writes=True)
    response = c.post(
        "/do/rollback", data={"id": "agent-1", "token": token, "name": "good"}, headers=headers
    )
    assert response.status_code == 403
    assert store.session("agent-1").info().version == 7


def test_rollback_shows_the_saved_state_and_undo_restores_it(store: memvault.Store) -> None:
    s = seed(store)
    before = s.history()
    c = client(store, writes=True)
    assert f'value="{TOKEN}"' in c.get("/session?id=agent-1").text
    done = c.post(
        "/do/rollback",
        data={"id": "agent-1", "token": TOKEN, "name": "good"},
        headers={"origin": "http://testserver", "sec-fetch-site": "same-origin"},
    )
    assert done.status_code == 200 and "auto:pre-rollback@v7" in done.text
    saved = re.search(r'id="compare-saved" href="([^"]+)"', done.text)
    assert saved
    diff = c.get(saved.group(1).replace("&amp;", "&")).text
    assert re.search(r'id="hidden-count">1<', diff)  # the answer the rollback hid
    assert re.search(r'id="added-count">1<', diff)  # the system turn trim had hidden
    assert len(s.history()) == 4
    undo = c.post(
        "/do/rollback", data={"id": "agent-1", "token": TOKEN, "name": "auto:pre-rollback@v7"}
    )
    assert undo.status_code == 200
    assert s.history() == before


def test_snapshot_and_fork_with_undo(store: memvault.Store) -> None:
    s = seed(store)
    c = client(store, writes=True)
    snap = c.post("/do/snapshot", data={"id": "agent-1", "token": TOKEN, "name": "checked"})
    assert "saved snapshot" in snap.text and [x.name for x in s.snapshots()][-1] == "checked"
    fork = c.post(
        "/do/fork", data={"id": "agent-1", "token": TOKEN, "new_id": "retry", "at": "good"}
    )
    assert fork.status_code == 200 and "forked from" in fork.text
    assert [m.content for m in store.session("retry").history()][-1] == "18 C, sunny"
    assert 'action="/do/delete-fork"' in fork.text and 'name="id" value="retry"' in fork.text
    gone = c.post("/do/delete-fork", data={"id": "retry", "token": TOKEN})
    assert gone.status_code == 200 and store.session("retry").info() is None
    store.session("retry2").append([Message.user("mine")])
    kept = c.post("/do/delete-fork", data={"id": "retry2", "token": TOKEN})
    assert kept.status_code == 400 and store.session("retry2").info() is not None
    taken = c.post("/do/fork", data={"id": "agent-1", "token": TOKEN, "new_id": "retry2"})
    assert taken.status_code == 400 and "ConflictError" in taken.text


def test_store_password_never_appears() -> None:
    with memvault.open("memory://") as store:
        object.__setattr__(store.options, "url", "redis://user:s3cret-pw@db.example:6379/0")
        seed(store)
        c = client(store)
        for path in ("/", "/session?id=agent-1", "/diff?id=agent-1&a=v1&b=v2", "/session?id=nope"):
            text = c.get(path).text
            assert "s3cret-pw" not in text and "user:***@db.example" in text


def test_timeline_pages_a_long_session(store: memvault.Store) -> None:
    """Newest page first; following 'older' links shows every message exactly once."""
    s = store.session("long")
    for i in range(30):
        s.append([Message.user(f"turn {i}-{j}") for j in range(10)])
    c = client(store)
    path: str | None = "/session?id=long"
    seen: list[str] = []
    pages = 0
    while path:
        html = c.get(path).text
        pages += 1
        seen = re.findall(r"turn \d+-\d+", html) + seen
        older = re.search(r'id="older" href="([^"]+)"', html)
        path = older.group(1).replace("&amp;", "&") if older else None
        assert pages == 1 or 'id="newer"' in html
    assert pages >= 3
    assert seen == [f"turn {i}-{j}" for i in range(30) for j in range(10)]
    # ...and 'newer' links from the oldest page lead back, missing nothing.
    path = re.search(r'id="newer" href="([^"]+)"', html)
    forward = set(re.findall(r"turn \d+-\d+", html))
    while path:
        html = c.get(path.group(1).replace("&amp;", "&")).text
        forward |= set(re.findall(r"turn \d+-\d+", html))
        path = re.search(r'id="newer" href="([^"]+)"', html)
    assert forward == set(seen)


def test_only_the_given_host_names_are_served() -> None:
    """DNS rebinding: behind a loopback bind, another Host name gets 400, no data."""
    with memvault.open("memory://") as store:
        seed(store)
        c = TestClient(
            create_app(store, allowed_hosts=["127.0.0.1", "localhost"]),
            base_url="http://127.0.0.1:8737",
        )
        assert c.get("/session?id=agent-1").status_code == 200
        evil = c.get("/session?id=agent-1", headers={"host": "evil.example:8737"})
        assert evil.status_code == 400 and "Paris" not in evil.text


def test_a_missing_ui_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.delitem(sys.modules, "memvault.ui.app", raising=False)
    monkeypatch.setitem(sys.modules, "jinja2", None)  # as if the extra were not installed
    with (
        memvault.open("memory://") as store,
        pytest.raises(memvault.ConfigurationError, match=r"memvault\[ui\]"),
    ):
        create_app(store)


def test_a_compacted_log_says_where_it_starts(store: memvault.Store) -> None:
    seed(store)
    store.compact(keep_events=3)
    html = client(store).get("/session?id=agent-1").text
    assert "events before version 5 were dropped by compact" in html
    earlier = html[
        html.index('<section class="earlier">') : html.index("</section>", html.index('"earlier"'))
    ]
    assert "the history just before version 5" in earlier
    assert re.findall(r'class="msg role-(\w+)( hidden)?"', earlier) == [
        ("system", " hidden"),
        ("user", ""),
        ("assistant", ""),
        ("tool", ""),
    ]
    assert ">v4<" not in html and ">v7<" in html
    assert "VersionNotFoundError" in client(store).get("/diff?id=agent-1&a=v2&b=v7").text


def test_memvault_ui_takes_the_global_url_and_prints_its_address(tmp_path: Path) -> None:
    import subprocess
    import sys

    url, port = f"sqlite:///{tmp_path / 'g.db'}", free_port()
    with memvault.open(url) as store:
        seed(store)
    proc = subprocess.Popen(
        [sys.executable, "-m", "memvault", "--url", url, "ui", "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(
            f"memvault inspector on http://127.0.0.1:{port}/ (read-only)"
        )
        for _ in range(100):  # the line is printed just before the server binds
            try:
                page = httpx.get(f"http://127.0.0.1:{port}/session?id=agent-1", timeout=5)
                break
            except httpx.ConnectError:
                time.sleep(0.05)
        assert page.status_code == 200 and "Weather in Paris?" in page.text  # read-only store
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_forged_done_or_undo_link_shows_nothing(store: memvault.Store) -> None:
    """Only a write of this run reports itself: a crafted link cannot show a fake
    'done' banner or an undo button that would roll back somewhere else."""
    seed(store)
    c = client(store, writes=True)
    forged = c.get("/session?id=agent-1&done=rolled+back&undo=rollback%3Agood&sig=00").text
    assert 'id="done"' not in forged and 'id="undo"' not in forged
    real = c.post("/do/rollback", data={"id": "agent-1", "token": TOKEN, "name": "good"})
    assert 'id="undo"' in real.text


def test_any_session_id_reaches_its_own_pages(store: memvault.Store) -> None:
    """Ids with slashes, dots, '?', '#' or '&' are query values, never routes."""
    ids = ["a/diff", "b/do/rollback", "../c", "d?before=1#x&id=e", "f/checkpoints", " "]
    for i, sid in enumerate(ids):
        s = store.session(sid)
        s.append([Message.user(f"text {i}")])
        s.snapshot("cp")
    c = client(store, writes=True)
    listing = c.get("/").text
    for i, sid in enumerate(ids):
        link = re.search(rf'href="(/session\?id=[^"]+)">{re.escape(escape(sid))}<', listing)
        assert link, sid
        page = c.get(link.group(1).replace("&amp;", "&")).text
        assert f"text {i}" in page and all(f"text {j}" not in page for j in range(6) if j != i)
        done = c.post("/do/rollback", data={"id": sid, "token": TOKEN, "name": "cp"})
        assert done.status_code == 200 and store.session(sid).info().version == 2
        assert f"text {i}" in c.get(f"/diff?id={quote(sid, safe='')}&a=v0&b=v2").text


def test_a_fork_shows_what_it_copied_then_its_own_turns(store: memvault.Store) -> None:
    s = store.session("src")
    s.append([Message.user("copied 1"), Message.assistant("copied 2")])
    s.fork("child").append([Message.user("own")])
    html = client(store).get("/session?id=child").text
    fork = html[html.index('<span class="op">fork</span>') : html.index(">v2<")]
    assert "copied 1" in fork and "copied 2" in fork
    assert "own" in html[html.index(">v2<") :]


def test_summaries_show_their_range_and_summarized_messages_stay_visible(
    store: memvault.Store,
) -> None:
    s = store.session("sum")
    s.append([Message.user(f"turn {i}") for i in range(4)])
    through = s.history()[1].id
    s.summarize(Message.assistant("SUMMARY of turns 0-1"), through=through)
    s.append([Message.user("after")])
    html = client(store).get("/session?id=sum").text
    assert re.findall(r'class="msg role-\w+ hidden"', html) == []  # summarizing hides nothing
    summarized = re.findall(r'class="msg role-user summarized"', html)
    assert len(summarized) == 2
    start = html.index('<span class="op">summarize</span>')
    event = html[start : html.index('<span class="ver">v3</span>')]
    assert "SUMMARY of turns 0-1" in event and "2 messages" in event and through in event
