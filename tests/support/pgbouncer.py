"""A private PgBouncer in front of the test PostgreSQL server (``$MEMVAULT_TEST_POSTGRES``).

Transaction pooling with few server connections (``pool_size``, default 2), so that
the clients of a test share them and each transaction may run on another one: what
production poolers do, and what breaks prepared statements before PgBouncer 1.21.
Trust authentication between the tests and PgBouncer; PgBouncer logs in to the
server as the test URL's user (with its password, if the URL has one).

The ``pgbouncer`` binary (Debian package ``pgbouncer``; ``.ci/run`` installs it) is
required: a test that needs it FAILS when it is missing, it is never skipped. As
root, PgBouncer runs as the ``postgres`` user (it refuses root). It is killed, and its
folder removed, when the ``pgbouncer()`` context ends, whatever the tests did.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from memvault.torture import servers
from tests.support.postgres import SERVER, admin, url_for


def _binary() -> str:
    found = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/sbin")
    if found is None:
        pytest.fail(
            "the PgBouncer tests need the pgbouncer binary (Debian package "
            "'pgbouncer': apt-get install pgbouncer; .ci/run installs it)",
            pytrace=False,
        )
    return found


def _setting(value: object) -> str:
    """A value in PgBouncer's connection string or auth file, quoted."""
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


class PgBouncer(servers._Single):
    """A PgBouncer on a free local port, pooling connections to the test server.

    Args:
        folder: its configuration and log (made the ``postgres`` user's when root).
        pool_mode: ``transaction`` (the one that breaks session state) or ``session``.
        pool_size: server connections per database and user (``default_pool_size``).
    """

    kind = "pgbouncer"
    log_name = "pgbouncer.log"

    def __init__(self, folder: Path, pool_mode: str = "transaction", pool_size: int = 2) -> None:
        self.binary = _binary()
        super().__init__(folder)
        self.run_as = servers.run_as_postgres(folder, "PgBouncer")
        server = conninfo_to_dict(SERVER)
        self.user, self.dbname = str(server.get("user", "postgres")), str(server["dbname"])
        target = " ".join(f"{k}={_setting(server[k])}" for k in ("host", "port") if k in server)
        (folder / "users.txt").write_text(f'"{self.user}" "{server.get("password", "")}"\n')
        (folder / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"* = {target}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {folder / 'users.txt'}\n"
            f"admin_users = {self.user}\n"
            f"pool_mode = {pool_mode}\ndefault_pool_size = {pool_size}\n"
            "reserve_pool_size = 0\nmax_client_conn = 500\n"
        )
        # No server_lifetime (it was 10 s, against the schema caches of a server
        # connection's hundreds of tests): PgBouncer 1.18 exits, "FATAL ...
        # disconnect_server(): bad server state: 11", when it retires a server
        # connection that a cancel request is being sent for, which the cancellation
        # contract's storm made happen (docs/postgres.md, "Behind PgBouncer").
        self.start()  # the files are readable by all, in a folder the server's user owns

    @property
    def url(self) -> str:
        """The test database, through PgBouncer."""
        return f"postgresql://{quote(self.user)}@127.0.0.1:{self.port}/{quote(self.dbname)}"

    def store_url(self, schema: str, **params: str) -> str:
        """The store URL of ``schema`` through PgBouncer, with other ``params``."""
        return url_for(schema, server=self.url, **params)

    def command(self) -> list[str]:
        return [self.binary, str(self.folder / "pgbouncer.ini")]

    def ready(self) -> bool:
        return servers.accepts_connections(self.url)

    def show(self, what: str) -> list[dict[str, object]]:
        """The admin console's ``SHOW <what>`` (SERVERS, CLIENTS, POOLS), as dicts."""
        url = f"postgresql://{quote(self.user)}@127.0.0.1:{self.port}/pgbouncer"
        with psycopg.connect(url, autocommit=True) as conn:
            cur = conn.execute(f"SHOW {what}")
            names = [c.name for c in cur.description or ()]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


@contextmanager
def pgbouncer(pool_mode: str = "transaction", pool_size: int = 2) -> Iterator[PgBouncer]:
    """A private PgBouncer for the ``with`` block; killed at its end, however it ends."""
    admin().close()  # fail now, clearly, if the server itself is down
    folder = Path(tempfile.mkdtemp(prefix="memvault-pgbouncer-"))  # one postgres can own
    try:
        bouncer = PgBouncer(folder, pool_mode, pool_size)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    try:
        yield bouncer
    finally:
        bouncer.close()
