"""Backends other packages register: the ``memvault.backends`` entry points.

A package is "installed" here as pip would leave it: a ``*.dist-info`` folder with an
``entry_points.txt``, in a folder on ``sys.path`` (worker processes inherit it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import memvault
from memvault import ConfigurationError, Message
from memvault.testing import StoreContract
from memvault.urls import schemes


def install(site: Path, entry_points: str) -> None:
    """Install a distribution whose only content is its ``memvault.backends`` entry points."""
    dist = site / "memvault_thirdparty_demo-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: memvault-thirdparty-demo\nVersion: 1.0\n", "utf-8"
    )
    (dist / "entry_points.txt").write_text(f"[memvault.backends]\n{entry_points}", "utf-8")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "site"
    install(
        folder,
        "thirdjson = memvault.examples.jsonfile\n"
        "brokenjson = memvault_no_such_module\n"
        "sqlite = memvault.examples.jsonfile\n",
    )
    monkeypatch.syspath_prepend(str(folder))
    return folder


class TestInstalledThirdPartyBackend(StoreContract):
    """The whole contract suite, through the URL scheme an installed package registers."""

    @pytest.fixture
    def store_url(self, site: Path, tmp_path: Path) -> str:
        return f"thirdjson://{tmp_path}/store.json"


async def test_a_registered_scheme_opens_by_url(site: Path, tmp_path: Path) -> None:
    """Both faces; the async one runs the sync backend on worker threads."""
    with memvault.open(f"thirdjson://{tmp_path}/s.json") as store:
        store.session("s").append([Message.user("hello")])
    assert (tmp_path / "s.json").exists()
    async with memvault.open_async(f"thirdjson://{tmp_path}/s.json") as astore:
        assert [m.content for m in await astore.session("s").history()] == ["hello"]


def test_the_registry_lists_every_scheme(site: Path) -> None:
    """memvault's own schemes and the registered ones sit in one table; a package
    cannot take over one of memvault's own schemes."""
    table = schemes()
    assert {"memory", "sqlite", "redis", "postgresql", "thirdjson", "jsonfile"} <= set(table)
    assert table["sqlite"].value == "memvault.backends.sqlite.backend"
    with pytest.raises(ConfigurationError, match=r"the schemes are .*thirdjson://"):
        memvault.open("nosuch://x")


def test_a_registered_backend_that_cannot_be_imported_says_which(site: Path) -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"brokenjson:// needs .*'memvault_no_such_module' cannot be imported",
    ):
        memvault.open("brokenjson://x.json")


def test_the_shipped_example_is_registered(tmp_path: Path) -> None:
    """``pip install memvault`` registers jsonfile:// (memvault's own entry point)."""
    url = f"jsonfile://{tmp_path}/store.json"
    with memvault.open(url) as store:
        store.session("s").append([Message.user("hi")])
    with memvault.open(url) as store:
        assert [m.content for m in store.session("s").history()] == ["hi"]
    for bad in ("jsonfile://", f"{url}#x"):
        with pytest.raises(ConfigurationError, match=r"jsonfile:///abs/path\.json"):
            memvault.open(bad)
    with pytest.raises(ConfigurationError, match="unsupported option 'colour'"):
        memvault.open(f"{url}?colour=blue")


def test_memvaults_own_schemes_open_without_reading_entry_points(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Reading every installed package's metadata costs milliseconds: an open of a
    built-in scheme must not pay it (only an unknown scheme looks there)."""
    import memvault.urls

    def no_scan(**kwargs: object) -> None:
        raise AssertionError("entry points read for a built-in scheme")

    monkeypatch.setattr(memvault.urls, "entry_points", no_scan)
    memvault.open("memory://").close()
    memvault.open(f"sqlite:///{tmp_path}/x.db").close()
    with pytest.raises(AssertionError, match="entry points read"):
        memvault.open("thirdjson://x.json")
