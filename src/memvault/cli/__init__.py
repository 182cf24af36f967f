"""The command line: the ``memvault`` command (:mod:`.app`) and the helpers it is built
from, which the library and the toolkit use too: terminal output (:mod:`.terminal`),
JSONL export and import (:mod:`.transfer`, planned by :mod:`.replay`), search vectors
for a store that lacks them (:mod:`.reindex`) and the scripted demo (:mod:`.demo`).

Nothing here imports :mod:`.app`, so importing a helper never loads the commands."""
