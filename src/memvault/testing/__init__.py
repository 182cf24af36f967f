"""memvault's pytest toolkit: the contract suite any backend can subclass.

Example::

    from memvault.testing import StoreContract

    class TestMyStore(StoreContract):
        @pytest.fixture
        def store_url(self, tmp_path):
            return f"sqlite:///{tmp_path}/memory.db"
"""

from memvault.testing.contract import AsyncStoreContract, StoreContract
from memvault.testing.opener import Opener

__all__ = ["AsyncStoreContract", "Opener", "StoreContract"]
