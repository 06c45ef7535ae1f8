"""The store: memory while it loads."""
