"""Redis URLs and options: what is accepted, what is refused, what is never shown."""

from __future__ import annotations

import math
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import memvault
from memvault.backends.redis.backend import settings
from memvault.backends.redis.ops import Layout
from memvault.checks.opener import Opener
from memvault.errors import BackendUnavailableError, ConfigurationError
from memvault.messages import Message
from tests.support.redis import RedisServer, flushed, free_port, raw_client


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis")
    yield server
    server.kill()


@pytest.mark.parametrize(
    ("url", "options", "complaint"),
    [
        ("redis://localhost/0", {"colour": "blue"}, "colour"),
        ("redis://localhost/0?retry_on_timeout=true", {}, "retry_on_timeout"),
        ("redis://localhost/0?cluster=maybe", {}, "cluster"),
        ("redis://localhost/0", {"prefix": "a{b}"}, "braces"),
        ("redis://localhost/0", {"prefix": ""}, "prefix"),
        ("redis://localhost/0", {"socket_timeout": 0}, "socket_timeout"),
        ("redis://localhost/0", {"socket_timeout": float("inf")}, "socket_timeout"),
        ("redis://localhost/0?socket_connect_timeout=nan", {}, "socket_connect_timeout"),
        ("redis://localhost/0", {"max_connections": 0}, "max_connections"),
        ("redis://localhost/9?cluster=true", {}, "database 0"),
        ("redis+unix:///tmp/r.sock", {"cluster": True}, "TCP"),
    ],
)
def test_bad_urls_and_options_are_refused(
    url: str, options: dict[str, object], complaint: str
) -> None:
    """Unknown options, retry settings that could apply a command twice, bad
    values: ConfigurationError naming the problem, before any connection."""
    with pytest.raises(ConfigurationError, match=complaint):
        memvault.open(url, **options)


def test_options_come_from_the_url_or_keywords() -> None:
    """memvault's own query parameters are read and removed; keywords win; the
    driver's parameters pass through."""
    got = settings("redis://h:1/3?prefix=app&socket_timeout=2.5&client_name=me", socket_timeout=4)
    assert (got.prefix, got.cluster, got.client["socket_timeout"]) == ("app", False, 4)
    assert got.url == "redis://h:1/3?client_name=me"
    assert settings("redis+unix:///run/r.sock?db=2").url == "unix:///run/r.sock?db=2"
    assert settings("redis://h/0?cluster=yes").cluster is True


def test_password_is_never_shown() -> None:
    """Neither repr nor an error message shows the password."""
    url = f"redis://user:s3cret-pw@127.0.0.1:{free_port()}/0"
    with memvault.open(url) as store:
        assert "s3cret-pw" not in repr(store) and "s3cret-pw" not in repr(store.backend)
        with pytest.raises(BackendUnavailableError) as err:
            store.session("s").append([Message.user("x")])
        assert "s3cret-pw" not in str(err.value) and "***" in str(err.value)


@pytest.mark.parametrize("face", ["sync", "async"])
def test_unix_socket(server: RedisServer, face: str) -> None:
    """redis+unix:// reaches a server through its socket file, database in the query."""
    store = Opener(f"redis+unix://{server.socket}?db=2", face)()  # type: ignore[arg-type]
    try:
        store.session("s").append([Message.user("over the socket")])
        assert store.session("s").history()[0].content == "over the socket"
        assert store.sessions() == ["s"]
    finally:
        store.close()
    # every key of the session but the unused snapshots, and the five of the session index
    assert server.client(db=2).dbsize() == 6 - 1 + 5


def test_prefixes_keep_apps_apart() -> None:
    """Two prefixes on one database: neither sees, compacts or deletes the other's."""
    url = flushed()
    with memvault.open(url, prefix="app-a") as a, memvault.open(url, prefix="app:b*") as b:
        a.session("s").append([Message.user("a")])
        b.session("s").append([Message.user("b")])
        b.session("t").append([Message.user("b")])
        assert a.sessions() == ["s"] and b.sessions() == ["s", "t"]
        assert a.compact(keep_events=0).events == 1
        assert [m.content for m in b.session("s").history()] == ["b"]
        assert len(b.session("s").log()) == 1


def test_every_key_of_a_session_gets_the_same_expiry() -> None:
    """Each write gives all of a session's keys one expiry (PEXPIREAT), so no key
    outlives another; a write without ttl makes them all persistent again."""
    url = flushed()
    keys = Layout("memvault").keys("s")
    client = raw_client(url)
    try:
        with memvault.open(url, ttl=300) as store:
            s = store.session("s")
            s.append([Message.user("a"), Message.user("b")])
            s.snapshot("cp")
            s.pop()
            expires = s.info().expires_at.timestamp()
        assert [client.pexpiretime(k) for k in keys] == [math.ceil(expires * 1000)] * 6
        with memvault.open(url) as store:
            store.session("s").append([Message.user("c")])
        assert [client.pexpiretime(k) for k in keys] == [-1] * 6
    finally:
        client.close()


def test_wrong_password_is_unavailable_and_not_shown(tmp_path: Path) -> None:
    """A refused AUTH means nothing was applied; the password stays out of the error."""
    server = RedisServer(tmp_path / "redis", "--requirepass", "right-pw", password="right-pw")
    try:
        url = f"redis://:wrong-pw@127.0.0.1:{server.port}/0"
        with memvault.open(url) as store:
            with pytest.raises(BackendUnavailableError) as err:
                store.session("s").history()
            assert "wrong-pw" not in str(err.value)
        with memvault.open(f"redis://:right-pw@127.0.0.1:{server.port}/0") as store:
            assert store.session("s").history() == []
    finally:
        server.kill()


def _certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1."""
    folder.mkdir()
    ca, ca_key = folder / "ca.pem", folder / "ca.key"
    cert, key, csr = folder / "server.pem", folder / "server.key", folder / "server.csr"
    ext = folder / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")
    for args in (
        [
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            ca_key,
            "-out",
            ca,
            "-days",
            "2",
            "-subj",
            "/CN=memvault test CA",
        ],
        [
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            key,
            "-out",
            csr,
            "-subj",
            "/CN=127.0.0.1",
        ],
        [
            "x509",
            "-req",
            "-in",
            csr,
            "-CA",
            ca,
            "-CAkey",
            ca_key,
            "-CAcreateserial",
            "-out",
            cert,
            "-days",
            "2",
            "-extfile",
            ext,
        ],
    ):
        subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)
    return ca, cert, key


@pytest.mark.parametrize("face", ["sync", "async"])
def test_rediss_over_tls(tmp_path: Path, face: str) -> None:
    """rediss:// talks TLS, verifying the server against ssl_ca_certs; a server the
    CA did not sign is refused before anything is sent."""
    ca, cert, key = _certificates(tmp_path / "tls")
    tls_port = free_port()
    server = RedisServer(
        tmp_path / "redis",
        "--tls-port",
        str(tls_port),
        "--tls-cert-file",
        str(cert),
        "--tls-key-file",
        str(key),
        "--tls-ca-cert-file",
        str(ca),
        "--tls-auth-clients",
        "no",
    )
    try:
        url = f"rediss://127.0.0.1:{tls_port}/0"
        store = Opener(f"{url}?ssl_ca_certs={ca}", face)()  # type: ignore[arg-type]
        try:
            store.session("s").append([Message.user("encrypted")])
            assert store.session("s").history()[0].content == "encrypted"
        finally:
            store.close()
        untrusted = Opener(url, face)()  # type: ignore[arg-type]
        try:
            with pytest.raises(BackendUnavailableError):
                untrusted.session("s").history()
        finally:
            untrusted.close()
    finally:
        server.kill()
