"""``python -m memvault``: the same as the ``memvault`` command."""

from memvault.cli import app

app(prog_name="memvault")
