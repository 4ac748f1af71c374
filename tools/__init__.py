"""Build and measurement scripts (run from the repository root)."""
