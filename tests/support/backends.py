"""The registry of backends our cross-backend tests run on.

Each entry makes a URL naming an empty, isolated store for one test and cleans
it up afterwards. A backend module adds itself here with one line.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.postgres import postgres_url
from tests.support.redis import redis_url

UrlMaker = Callable[[pytest.FixtureRequest, Path], str]


def memory_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://"


def sqlite_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/memvault.db"


BACKENDS: dict[str, UrlMaker] = {
    "memory": memory_url,
    "sqlite": sqlite_url,
    "postgres": postgres_url,
    "redis": redis_url,
}
