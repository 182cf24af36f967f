"""Fixtures shared by our own tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.backends import BACKENDS

pytest_plugins = ["pytester"]


@pytest.fixture(params=sorted(BACKENDS))
def any_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty, isolated store URL, once per registered backend."""
    return BACKENDS[request.param](request, tmp_path)
