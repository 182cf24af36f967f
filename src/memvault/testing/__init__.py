"""memvault's pytest toolkit: the contract suite any backend can subclass.

>>> from memvault.testing import StoreContract
>>> class TestMyBackend(StoreContract):
...     url = "sqlite:///{tmp}/x.db"
"""
