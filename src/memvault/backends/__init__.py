"""Storage backends. Each implements :class:`memvault.backends.base.Backend`."""
