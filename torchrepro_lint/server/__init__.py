"""The language server (`torchrepro-lint server`, the optional `server` extra: pygls, lsprotocol).

Nothing here is imported by `check` or the flake8 plugin: only `app`, `convert`, `actions` and
`hover` import pygls or lsprotocol; `session` and `memory_cache` need neither.
"""
