"""LibCST nodes hashed by CPython's identity hash, computed in C.

LibCST defines equality of nodes as identity, and `__hash__` as `return id(self)`: a Python
function that every dict or set operation keyed by a node calls. The index keys its parent map,
scopes and memos by node, about 40,000 insertions and as many lookups each time a large model
file is indexed (the language server does it on every edit). `object.__hash__` is the same
identity hash computed in C, so nothing compares or hashes differently in kind (equal nodes are
the same object, and hash alike), and those operations take about 40% of the time.

Every node class carries LibCST's function in its own `__dict__`, so each one is set, once per
process, before the first tree is parsed.
"""

from __future__ import annotations

_DONE: list[bool] = []


def use_identity_hash() -> None:
    if _DONE:
        return
    from libcst._nodes.base import CSTNode

    python_hash = CSTNode.__dict__["__hash__"]
    pending = [CSTNode]
    while pending:
        cls = pending.pop()
        if cls.__dict__.get("__hash__") is python_hash:
            cls.__hash__ = object.__hash__
        pending.extend(cls.__subclasses__())
    _DONE.append(True)
