"""Worked examples shipped with memvault: code meant to be read and copied.

:mod:`memvault.examples.jsonfile` is a third-party backend as another package would
write it, reached by URL (``jsonfile:///path/store.json``) through the
``memvault.backends`` entry point memvault's own package declares for it.
"""
