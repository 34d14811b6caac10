"""Autofix: edits that rules attach to findings, applied safely (see apply.py, runner.py)."""
