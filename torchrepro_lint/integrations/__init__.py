"""Integrations with other tools: the flake8 plugin and the caches it needs."""
