import functools

import pytest

from memvault.testing import StoreContract
from tests.thirdparty.jsonfile import JsonFileBackend


class TestJsonFileBackend(StoreContract):
    @pytest.fixture
    def backend_factory(self, tmp_path):
        return functools.partial(JsonFileBackend, tmp_path / "store.json")
