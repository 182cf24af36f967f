"""The inspector end to end: `memvault ui` as a real process, driven by Debian's
chromium through Playwright (no browser download). Without /usr/bin/chromium these
tests fail, they never skip: `apt-get install -y chromium` (.ci/run does it)."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

import memvault
from tests.support.inspector import HOSTILE_LINK, free_port, seed

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium chromium-driver")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'ui.db'}"
    with memvault.open(url) as store:
        seed(store)
    return url


@pytest.fixture
def inspector(store_url: str) -> Iterator[str]:
    """`memvault ui --allow-writes` on a free port; yields its address."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memvault",
            "ui",
            "--url",
            store_url,
            "--port",
            str(port),
            "--allow-writes",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert f"http://127.0.0.1:{port}/" in line, line
        assert "writes allowed" in line
        for _ in range(200):  # the line is printed just before the server binds
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                threading.Event().wait(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.accept()))
    page.dialogs = dialogs  # type: ignore[attr-defined]
    yield page
    context.close()


def test_sessions_timeline_diff_rollback_undo(
    inspector: str, page: Page, store_url: str, tmp_path: Path
) -> None:
    page.goto(inspector)
    expect(page.locator("h1")).to_contain_text("Sessions")
    page.screenshot(path=str(tmp_path / "sessions.png"))
    page.get_by_role("link", name="agent-1").click()

    expect(page.locator("#version")).to_have_text("7")
    hidden = page.locator(".msg.hidden")
    expect(hidden).to_have_count(4)
    assert float(hidden.first.evaluate("e => getComputedStyle(e).opacity")) < 1
    page.get_by_role("link", name="call_1").click()
    assert page.url.endswith("#call-" + b"call_1".hex())
    expect(page.locator(".call:target .tool")).to_have_text("get_weather")
    page.screenshot(path=str(tmp_path / "timeline.png"), full_page=True)

    page.fill("input[name=a]", "v2")
    page.fill("input[name=b]", "v3")
    page.click("#diff")
    expect(page.locator("#added-count")).to_have_text("2")
    expect(page.locator("#hidden-count")).to_have_text("0")
    expect(page.locator(".added .msg").first).to_contain_text("<script>")
    page.screenshot(path=str(tmp_path / "diff.png"), full_page=True)
    page.go_back()

    with memvault.open(store_url) as store:
        before = store.session("agent-1").history()
    page.select_option("form.confirm select[name=name]", "good")
    page.click("#rollback")
    expect(page.locator("#done")).to_contain_text("auto:pre-rollback@v7")
    assert page.dialogs == ["Roll back? The current state is saved first."]  # type: ignore[attr-defined]
    expect(page.locator("#version")).to_have_text("8")
    page.screenshot(path=str(tmp_path / "rolled-back.png"), full_page=True)
    page.click("#undo")
    expect(page.locator("#version")).to_have_text("9")
    with memvault.open(store_url) as store:
        assert store.session("agent-1").history() == before


def test_hostile_content_renders_as_text(inspector: str, page: Page) -> None:
    page.goto(f"{inspector}/session?id=agent-1")
    assert page.title() == "agent-1 · memvault inspector"  # the stored <script> did not run
    assert page.dialogs == []  # type: ignore[attr-defined]
    expect(page.locator("img")).to_have_count(0)
    expect(page.locator('a[href^="javascript:"]')).to_have_count(0)
    expect(page.get_by_text(HOSTILE_LINK)).to_have_count(1)
    expect(page.get_by_text('<script>document.title="pwned"</script>', exact=False)).to_have_count(
        1
    )


class _Evil(http.server.BaseHTTPRequestHandler):
    """Another site: its page posts a rollback to the inspector on load."""

    target = ""

    def do_GET(self) -> None:
        body = (
            f'<form id="f" method="post" action="{self.target}/do/rollback">'
            '<input name="token" value="guessed"><input name="name" value="good">'
            '<input name="id" value="agent-1"></form>'
            '<script>document.getElementById("f").submit()</script>'
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_cross_site_request_cannot_roll_back(inspector: str, page: Page, store_url: str) -> None:
    _Evil.target = inspector
    evil = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), _Evil)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    try:
        page.goto(f"http://127.0.0.1:{evil.server_address[1]}/")
        page.wait_for_url(f"{inspector}/**")
        expect(page.locator("#error")).to_contain_text("refused")
    finally:
        evil.shutdown()
    with memvault.open(store_url) as store:
        assert store.session("agent-1").info().version == 7
