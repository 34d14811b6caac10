"""Small questions about CST nodes that many modules ask."""

from __future__ import annotations

import libcst as cst


def arg(call: cst.Call, position: int | None, keyword: str | None) -> cst.BaseExpression | None:
    """The argument bound to a parameter, by keyword or by position (before any *args)."""
    if keyword is not None:
        for a in call.args:
            if a.keyword is not None and a.keyword.value == keyword:
                return a.value
    if position is None:
        return None
    positional = []
    for a in call.args:
        if a.keyword is not None:
            break
        if a.star:
            return None
        positional.append(a.value)
    return positional[position] if position < len(positional) else None
