"""How fast the inspector's first views open on big stores.

Timeline: "big", 10,000 visible messages (101 appends of 100, a pop, a trim to
10,000 and a snapshot), and "turns", 10,000 appends of one message (so 10,000
events); first view = GET /session?id=<id> (the newest page). Sessions list: 100,000
sessions, GET / (first page) and GET /?q=<filter>. Each request goes through
Starlette's TestClient (in-process ASGI: no network, the whole app and store).

    pip install -e ".[dev]"
    python benchmarks/bench_inspector.py --url sqlite:///tmp/bench-ui.db --runs 20

Prints p50 and max of the timed requests (after 2 untimed ones) for each view.
With ``--browser``, also the page load in Debian's chromium (Playwright) from the
real server (uvicorn on a free loopback port): navigation start to the load event.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import threading
import time

from starlette.testclient import TestClient

import memvault
from memvault import Message
from memvault.ui import create_app


def build(store: memvault.Store, sessions: int) -> None:
    s = store.session("big")
    if s.info() is None:
        for i in range(101):
            s.append([Message.user(f"turn {i}.{j} " + "lorem ipsum " * 10) for j in range(100)])
        s.pop()
        s.trim(keep_last=10_000)
        s.snapshot("checked")
    turns = store.session("turns")
    if turns.info() is None:
        for i in range(10_000):
            turns.append([Message.assistant(f"turn {i} " + "lorem ipsum " * 10)])
    have = len(store.sessions())
    for i in range(have - 2, sessions):
        store.session(f"user-{i:06d}").append([Message.user("hi")])


def timed(client: TestClient, path: str, runs: int) -> str:
    for _ in range(2):
        assert client.get(path).status_code == 200
    took = []
    for _ in range(runs):
        start = time.perf_counter()
        response = client.get(path)
        took.append(time.perf_counter() - start)
        assert response.status_code == 200
    p50, worst = 1000 * statistics.median(took), 1000 * max(took)
    return f"{path:<28} p50 {p50:7.1f} ms   max {worst:7.1f} ms"


def browser_loads(store: memvault.Store, paths: list[str], runs: int) -> None:
    import uvicorn
    from playwright.sync_api import sync_playwright

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(store), port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium")
        page = browser.new_page()
        for path in paths:
            took = []
            for i in range(runs + 2):
                page.goto(f"http://127.0.0.1:{port}{path}")
                if i >= 2:
                    took.append(
                        page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
                    )
            print(
                f"chromium {path:<19} p50 {statistics.median(took):7.1f} ms   "
                f"max {max(took):7.1f} ms"
            )
        browser.close()
    server.should_exit = True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="sqlite:///bench-ui.db")
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--browser", action="store_true", help="also time chromium page loads")
    args = parser.parse_args()
    with memvault.open(
        args.url, **({"durability": "normal"} if args.url.startswith("sqlite") else {})
    ) as store:
        build(store, args.sessions)
        client = TestClient(create_app(store))
        print(
            f"{memvault.urls.redact(args.url)}: {len(store.sessions()):,} sessions, "
            f"'big' has {store.session('big').info().length:,} visible messages"
        )  # type: ignore[union-attr]
        for path in ("/session?id=big", "/session?id=turns", "/", "/?q=user-0999", "/?page=1000"):
            print(timed(client, path, args.runs))
        if args.browser:
            browser_loads(store, ["/session?id=big", "/session?id=turns", "/"], args.runs)


if __name__ == "__main__":
    main()
