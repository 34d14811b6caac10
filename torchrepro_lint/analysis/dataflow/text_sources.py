"""Strings that come from outside the program, for `Elements` (hash order): what reading a
text file returns, and the keys of a parsed JSON document.

A file opened in text mode reads as `str` (`read`, `readline`; its characters when iterated),
and the JSON grammar only has string object keys (`json.loads('{"1": 0}')` keys `"1"`), so the
keys of every object in a document that `json.load` / `json.loads` returned are strings.
"""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.syntax import arg, method_name, string_value

OPENERS = frozenset({"builtins.open", "io.open", "codecs.open"})
JSON_READERS = frozenset({"json.load", "json.loads"})
_READING = frozenset({"read", "readline"})
_JSON_PASSING = frozenset({"get", "pop", "copy", "setdefault"})  # still a part of the document


def opened_file(elements, expr: cst.BaseExpression, depth: int = 0) -> str | None:
    """"text" or "binary" when `expr` is a file `open(...)` returned (`open(p)`, a name bound to
    it, `with open(p) as f`); None when unknown (a mode that is not a literal, anything else)."""
    if depth > 4:
        return None
    if isinstance(expr, cst.Call):
        if elements.qualname(expr) not in OPENERS:
            return None
        mode = arg(expr, 1, "mode")
        if mode is None:
            return "text"
        text = string_value(mode)
        if text is None:
            return None
        return "binary" if "b" in text else "text"
    if isinstance(expr, cst.Name):
        flow = elements.flow
        value = flow.reaching_value(expr)
        if value is not None:
            return opened_file(elements, value, depth + 1)
        item = _with_item(flow, expr)
        return opened_file(elements, item.item, depth + 1) if item is not None else None
    return None


def _with_item(flow, name: cst.Name) -> cst.WithItem | None:
    """The `with ... as name` item that last binds `name` before it, in its function."""
    here = flow.pos(name)
    best = None
    for statement, _ in flow.bindings(name.value, flow.owner(name)):
        if flow.pos(statement) < here and (isinstance(statement, cst.With) or not flow.inside(name, statement)):
            best = statement  # a name read in the body of the `with` that binds it
    if not isinstance(best, cst.With):
        return None
    for item in best.items:
        target = item.asname.name if item.asname is not None else None
        if isinstance(target, cst.Name) and target.value == name.value:
            return item
    return None


def reads_text(elements, call: cst.Call) -> bool:
    """`f.read()` / `f.readline()` of a text-mode file, `path.read_text()`: a `str`."""
    method = method_name(call)
    if method == "read_text":
        return True  # pathlib.Path.read_text (and zipfile.Path's): decoded text
    return method in _READING and opened_file(elements, call.func.value) == "text"


def json_document(elements, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """`expr` is a document `json.load` / `json.loads` parsed, or a part of one (`doc["a"]`,
    `doc.get("a")`, a name bound to either)."""
    if depth > 6:
        return False
    if isinstance(expr, cst.Call):
        if elements.qualname(expr) in JSON_READERS:
            return True
        return method_name(expr) in _JSON_PASSING and json_document(elements, expr.func.value, depth + 1)
    if isinstance(expr, cst.Subscript):
        return json_document(elements, expr.value, depth + 1)
    if isinstance(expr, cst.Name):
        value = elements.flow.reaching_value(expr)
        return value is not None and json_document(elements, value, depth + 1)
    return False
