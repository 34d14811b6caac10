"""Per-file analysis: name resolution and the index every rule reads from."""
