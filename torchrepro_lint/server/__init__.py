"""The language server (`torchrepro-lint server`, the optional `server` extra: pygls, lsprotocol).

Nothing here is imported by `check` or the flake8 plugin: only `app`, `convert`, `actions`,
`hover` and `notebook_sync` import pygls or lsprotocol; `session`, `memory_cache`, `analyst`
(the analysis thread), `first_findings` and `early_process` need neither.
"""
