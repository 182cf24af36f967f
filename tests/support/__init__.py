"""Per-backend helpers for our own tests: each makes an isolated, empty store URL."""
