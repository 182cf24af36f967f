import pytest

from memvault.testing import StoreContract


class TestJsonFileBackend(StoreContract):
    @pytest.fixture
    def store_url(self, tmp_path):
        return f"jsonfile://{tmp_path}/store.json"
