"""``python -m memvault``: the same as the ``memvault`` command."""

from memvault.cli.app import main

main()
