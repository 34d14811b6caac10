"""What turns compiled-kernel autotuning on (TRP207), lowered to `Kind.AUTOTUNE` effects.

Read in torch 2.13.0's sources (the same in 2.14.1):

- `torch.compile(model, mode=...)` hands `list_mode_options(mode)` to Inductor as config patches
  (`torch/__init__.py`: `_TorchCompileInductorWrapper.apply_mode`); "max-autotune" and
  "max-autotune-no-cudagraphs" both set `max_autotune` and `coordinate_descent_tuning`
  (`torch/_inductor/__init__.py`: `list_mode_options`). `options={...}` are the same patches,
  by name (`apply_options`, with `-` read as `_`); `mode` and `options` together raise. Another
  `backend=` gets the mode as a keyword of its own (`_TorchCompileWrapper`): not Inductor's.
- The patches and the global config are read when the compiled code first runs, not when
  `torch.compile` is called (`_TorchCompileInductorWrapper.__call__` -> `compile_fx`), so a
  switch's order around the compile call does not matter.
- `torch._inductor.config.<switch> = v`, and `torch._inductor.config.patch(...)` (a context
  manager or a decorator: `patch(name=v)`, `patch({"name": v})`, `patch("name", v)`).
- `TORCHINDUCTOR_MAX_AUTOTUNE=1` (and `_GEMM`, `TORCHINDUCTOR_COORDINATE_DESCENT_TUNING`) are read
  once, when `torch._inductor.config` is imported (`_inductor/config.py`). `import torch` does
  not import it; `torch._dynamo` does, and so do the libraries that import it (Lightning's
  wrappers). Set in code, such a variable counts only where it is surely set before: at the
  entry module's top level, before it imports anything but a few standard modules
  (`early_environment`; the interpreter checks that the module is the entry).

Effects: `Kind.AUTOTUNE` with detail (source, knob): source "mode" (the value is the mode's,
decided by the interpreter: interpreter/autotune.py), "options" (a compile call's options),
"config", "patch", "env"; knob one of `AUTOTUNE_SWITCHES`. `Kind.INDUCTOR_DETERMINISTIC`:
Inductor's own `deterministic` flag set (for the rule's message only).
"""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.literals import MISSING, literal_value
from torchrepro_lint.analysis.module_index import CallSite, ModuleIndex
from torchrepro_lint.analysis.syntax import arg as _arg
from torchrepro_lint.project import ir
from torchrepro_lint.project.known_apis import (
    AUTOTUNE_MODES,
    AUTOTUNE_SWITCHES,
    COMPILE_CALLS,
    INDUCTOR_CONFIG,
    INDUCTOR_DETERMINISTIC_SWITCH,
    Kind,
)

MODE, OPTIONS, CONFIG, PATCH, ENV = "mode", "options", "config", "patch", "env"
PATCH_CALL = INDUCTOR_CONFIG + ".patch"
_DETERMINISTIC, _DETERMINISTIC_VARIABLE = INDUCTOR_DETERMINISTIC_SWITCH
_VARIABLES = {variable: knob for knob, variable in AUTOTUNE_SWITCHES.items()}
# Standard modules a script imports before it sets a variable, none of which imports torch
_BEFORE_TORCH = frozenset(
    "__future__ os sys typing argparse logging pathlib json re time math random dataclasses warnings functools "
    "itertools collections contextlib shutil subprocess datetime inspect copy io glob platform socket signal "
    "tempfile uuid enum abc".split()
)


def autotune_statements(index: ModuleIndex, site: CallSite, method: str | None, value, ref) -> list[ir.Stmt]:
    """The TRP207 effects of one call (`value`: the lowering's value of an expression; `ref`: the
    ref of a node, asked only for a call that has an effect)."""
    node, q = site.node, site.qualname
    if q in COMPILE_CALLS or (q is None and method == "compile"):
        return compile_effects(node, value, ref)
    if q == PATCH_CALL:
        return _patch_effects(node, value, ref)
    if q == "os.environ.setdefault":
        key, given = _arg(node, 0, "key"), _arg(node, 1, "value")
        return environment_effects(index, site.statement, literal_value(key), given, node, ref)
    return []


def compile_effects(node: cst.Call, value, ref) -> list[ir.Stmt]:
    """`torch.compile(model, mode="max-autotune")`, `model.compile(options={"max_autotune": True})`,
    also as a decorator: a compile that asks Inductor to tune. Silent where it cannot tell (a mode
    or options it cannot read, another backend, `disable=True`, both `mode` and `options`), and
    for options that also turn Inductor's deterministic mode on for this compile
    (`"deterministic": True`: its patches apply to the forward and the backward compile)."""
    backend = _arg(node, None, "backend")
    if backend is not None and literal_value(backend) != "inductor":
        return []
    if literal_value(_arg(node, None, "disable")) is True:
        return []
    mode, options = _arg(node, None, "mode"), _arg(node, None, "options")
    mode = None if mode is not None and literal_value(mode, MISSING) is None else mode  # (`mode=None`: none)
    if mode is not None and options is not None:
        return []  # torch.compile raises
    if mode is not None:
        literal = literal_value(mode, MISSING)
        if literal is MISSING:  # the interpreter decides, where the value is known (a bound literal)
            return [ir.Effect(Kind.AUTOTUNE, ref(node), value(mode), (MODE, ""))]
        if literal in AUTOTUNE_MODES:
            return [ir.Effect(Kind.AUTOTUNE, ref(node), ir.TRUE, (MODE, literal))]
        return []
    entries = _dict_entries(options) if options is not None else None
    if not entries:
        return []
    deterministic = entries.get(_DETERMINISTIC)
    if deterministic is not None and literal_value(deterministic, MISSING) is not False:
        return []  # deterministic for this compile (or maybe, where the value is not a literal: silent)
    return [
        ir.Effect(Kind.AUTOTUNE, ref(node), value(given), (OPTIONS, knob))
        for knob, given in entries.items()
        if knob in AUTOTUNE_SWITCHES and literal_value(given, MISSING) is not False
    ]


def config_assignment(qualname: str | None, given: cst.BaseExpression, node: cst.CSTNode, value, ref) -> list[ir.Stmt] | None:
    """`torch._inductor.config.<switch> = v` (any import form): its effect, or None where the
    target is not one of the switches."""
    if not qualname or not qualname.startswith(INDUCTOR_CONFIG + "."):
        return None
    name = qualname[len(INDUCTOR_CONFIG) + 1 :]
    if name in AUTOTUNE_SWITCHES:
        return [ir.Effect(Kind.AUTOTUNE, ref(node), value(given), (CONFIG, name))]
    if name == _DETERMINISTIC:
        return [ir.Effect(Kind.INDUCTOR_DETERMINISTIC, ref(node), value(given))]
    return None


def environment_effects(index: ModuleIndex, statement, key, given, node: cst.CSTNode, ref) -> list[ir.Stmt]:
    """`os.environ["TORCHINDUCTOR_MAX_AUTOTUNE"] = "1"` (or `setdefault`): a tuner switched on
    where the variable is set early enough to be read (`early_environment`); Inductor's
    `deterministic` variable, wherever it is set (for the message)."""
    if not isinstance(key, str) or literal_value(given) != "1":
        return []  # (config.py compares with "1")
    if key == _DETERMINISTIC_VARIABLE:
        return [ir.Effect(Kind.INDUCTOR_DETERMINISTIC, ref(node), ir.TRUE, (ENV,))]
    knob = _VARIABLES.get(key)
    if knob is None or id(statement) not in early_environment(index):
        return []
    return [ir.Effect(Kind.AUTOTUNE, ref(node), ir.TRUE, (ENV, knob))]


def decorator_effects(index: ModuleIndex, function: cst.FunctionDef, value, ref, *, in_body: bool) -> list[ir.Stmt]:
    """The effects of a function's decorators where the `def` runs (`@torch.compile(mode=...)`
    compiles at the definition), or, `in_body`, where each call of the function starts
    (`@torch._inductor.config.patch(...)` patches each call)."""
    out: list[ir.Stmt] = []
    for decorator in function.decorators:
        call = decorator.decorator
        if not isinstance(call, cst.Call):
            continue
        site = index.call_site(call)
        q = site.qualname if site is not None else index.resolve(call.func, call)
        if q in COMPILE_CALLS and not in_body:
            out += compile_effects(call, value, ref)
        elif q == PATCH_CALL and in_body:
            out += _patch_effects(call, value, ref)
    return out


def _patch_effects(node: cst.Call, value, ref) -> list[ir.Stmt]:
    first, second = _arg(node, 0, None), _arg(node, 1, None)
    if first is not None and second is not None:
        name = literal_value(first)
        entries = {name.replace("-", "_"): second} if isinstance(name, str) else {}
    elif first is not None:
        entries = _dict_entries(first) or {}
    else:
        entries = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
    out: list[ir.Stmt] = [
        ir.Effect(Kind.AUTOTUNE, ref(node), value(given), (PATCH, knob)) for knob, given in entries.items() if knob in AUTOTUNE_SWITCHES
    ]
    if _DETERMINISTIC in entries:
        out.append(ir.Effect(Kind.INDUCTOR_DETERMINISTIC, ref(node), value(entries[_DETERMINISTIC]), (PATCH,)))
    return out


def _dict_entries(expr: cst.BaseExpression) -> dict[str, cst.BaseExpression] | None:
    """A dict display with string keys, or `dict(name=value, ...)`, as {key: value expression}
    (`-` read as `_`, as torch.compile reads its options). None where it cannot be read whole
    (a variable, `**` unpacking, a key that is not a literal string)."""
    entries: dict[str, cst.BaseExpression] = {}
    if isinstance(expr, cst.Dict):
        for element in expr.elements:
            key = literal_value(element.key) if isinstance(element, cst.DictElement) else None
            if not isinstance(key, str):
                return None
            entries[key.replace("-", "_")] = element.value
        return entries
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "dict":
        for a in expr.args:
            if a.keyword is None:
                return None
            entries[a.keyword.value] = a.value
        return entries
    return None


def early_environment(index: ModuleIndex) -> frozenset:
    """The ids of the module's top-level small statements that run before it imports anything
    but a few standard modules (`_BEFORE_TORCH`), in source order. Kept on the index."""
    found = index.derived.get("trp207_early_environment")
    if found is None:
        early: list[int] = []
        _walk_early(index.module.body, early)
        found = index.derived["trp207_early_environment"] = frozenset(early)
    return found


def _walk_early(statements, early: list[int]) -> bool:
    """Adds the small statements before the first import of another module; False from there."""
    for statement in statements:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            for small in statement.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)) and not _standard_import(small):
                    return False
                early.append(id(small))
            continue
        for block in _blocks(statement):
            if not _walk_early(block, early):
                return False
    return True


def _blocks(statement: cst.CSTNode):
    """The bodies of a compound statement, in source order (a one-line suite is a body of one)."""
    parts = []
    if isinstance(statement, cst.If):
        parts = [statement.body, statement.orelse]
    elif isinstance(statement, (cst.Try, cst.TryStar)):
        parts = [statement.body, *statement.handlers, statement.orelse, statement.finalbody]
    elif isinstance(statement, (cst.For, cst.While)):
        parts = [statement.body, statement.orelse]
    elif isinstance(statement, cst.With):
        parts = [statement.body]
    elif isinstance(statement, cst.Match):
        parts = list(statement.cases)
    for part in parts:
        if part is None:
            continue
        if isinstance(part, cst.If):  # elif
            yield from _blocks(part)
        elif isinstance(part, cst.IndentedBlock):
            yield part.body
        elif isinstance(part, cst.SimpleStatementSuite):
            yield (part,)
        else:  # else, except, finally, case: a clause around a body
            yield from _blocks_of_clause(part.body)


def _blocks_of_clause(body):
    if isinstance(body, cst.IndentedBlock):
        yield body.body
    elif isinstance(body, cst.SimpleStatementSuite):
        yield (body,)


def _standard_import(node: cst.Import | cst.ImportFrom) -> bool:
    if isinstance(node, cst.ImportFrom):
        if node.relative or node.module is None:
            return False
        return _root(node.module) in _BEFORE_TORCH
    return all(_root(alias.name) in _BEFORE_TORCH for alias in node.names)


def _root(name: cst.BaseExpression) -> str:
    while isinstance(name, cst.Attribute):
        name = name.value
    return name.value if isinstance(name, cst.Name) else ""
