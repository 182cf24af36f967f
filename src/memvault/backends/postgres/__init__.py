"""PostgreSQL: each operation is one call of a server-side function (``sql/``),
built and decoded without I/O in :mod:`.calls`; :mod:`.backend` runs them on psycopg 3's
sync and async pools; :mod:`.migrations` creates and upgrades the schema."""
