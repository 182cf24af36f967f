"""Redis and Redis Cluster: each operation is one call of a Lua script (``lua/``),
built and decoded without I/O in :mod:`.ops`; :mod:`.backend` sends them with redis-py's
sync and async clients, and :mod:`.wait` waits for replicas (``WAIT``)."""
