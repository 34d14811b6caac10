from __future__ import annotations

import difflib

import libcst as cst

from torchrepro_lint.analysis.names import dotted
from torchrepro_lint.findings import Severity
from torchrepro_lint.rules.base import Example, Rule, last_names
from torchrepro_lint.rules.edits import make_fix, replace

CUDNN = "torch.backends.cudnn."
# Attributes torch.backends.cudnn really has (its module class's properties and functions).
CUDNN_FLAGS = frozenset({"enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32", "fp32_precision", "conv", "rnn", "depthwise_kernel"})
CUDNN_OTHER = frozenset({"version", "is_available", "is_acceptable", "set_flags", "flags", "CUDNN_TENSOR_DTYPES"})
REBOUND_FUNCTIONS = {
    "torch.use_deterministic_algorithms": "torch.use_deterministic_algorithms({value})",
    "torch.set_deterministic_debug_mode": "torch.set_deterministic_debug_mode({value})",
}
COMPARED_SWITCHES = frozenset({CUDNN + "deterministic", CUDNN + "benchmark", CUDNN + "enabled"})


class NoOpDeterminismSwitch(Rule):
    code = "TRP206"
    name = "no-op-determinism-switch"
    summary = "A determinism switch that PyTorch silently ignores: a typo, a rebound function, a comparison."
    why = (
        "`torch.backends.cudnn` accepts any attribute, so `cudnn.determinstic = True` creates a new "
        "attribute and changes nothing; `torch.use_deterministic_algorithms = True` replaces the "
        "function instead of calling it; `cudnn.deterministic == True` compares and throws the "
        "result away. The code reads as if determinism were on."
    )
    severity = Severity.ERROR
    fix_safety = "safe"
    fix = (
        "Use the intended spelling or call: `cudnn.deterministic = True`, "
        "`torch.use_deterministic_algorithms(True)`. The fix renames a misspelt flag to the "
        "closest real one (only when one is close), turns `f = value` into `f(value)`, and `==` "
        "into `=`; it leaves augmented and annotated assignments alone."
    )
    not_reported = (
        "Real cuDNN flags and functions: `enabled`, `benchmark`, `benchmark_limit`, "
        "`deterministic`, `allow_tf32`, `fp32_precision`, `conv`, `rnn`, `depthwise_kernel`, "
        "`version`, `is_available`, `is_acceptable`, `flags`, `set_flags`, `CUDNN_TENSOR_DTYPES`.",
        "A comparison whose result is used: `assert cudnn.deterministic == True`, "
        "`ok = cudnn.benchmark == False`.",
        "A user object that happens to be called `cudnn` (names are resolved, not matched as text).",
    )
    where_reported = (
        "At an assignment to an attribute of `torch.backends.cudnn` (any alias) that is not one of "
        "its real flags or functions; the message names the closest real flag when one is near.",
        "At an assignment to `torch.use_deterministic_algorithms` or "
        "`torch.set_deterministic_debug_mode`.",
        "At a statement that is only a comparison `==` of `cudnn.deterministic`, "
        "`cudnn.benchmark` or `cudnn.enabled`.",
    )
    decisions = (
        "Reported in unreachable code too: the statement is wrong in any context, and whoever "
        "calls it later gets no determinism.",
    )
    reference = (
        ("torch.backends.cudnn", "https://pytorch.org/docs/stable/backends.html#module-torch.backends.cudnn"),
        ("torch.use_deterministic_algorithms", "https://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html"),
        ("torch.set_deterministic_debug_mode", "https://pytorch.org/docs/stable/generated/torch.set_deterministic_debug_mode.html"),
    )
    # Candidates are assignments to (or comparisons of) a name resolving under
    # torch.backends.cudnn, whose text spells `cudnn`, or to one of REBOUND_FUNCTIONS.
    triggers = ("cudnn", *last_names(REBOUND_FUNCTIONS))
    hazards = (
        Example(
            '''import torch

torch.backends.cudnn.determinstic = True  # <-- TRP206
torch.backends.cudnn.benchmarks = False  # <-- TRP206
''',
            "Misspelt flags",
            fixed='''import torch

torch.backends.cudnn.deterministic = True
torch.backends.cudnn.benchmark = False
''',
        ),
        Example(
            '''import torch

torch.use_deterministic_algorithms = True  # <-- TRP206
''',
            "Rebinding the function",
        ),
        Example(
            '''from torch.backends import cudnn

def setup():
    cudnn.deterministic == True  # <-- TRP206
''',
            "A comparison as a statement",
        ),
    )
    traps = (
        Example(
            '''import torch

torch.backends.cudnn.deterministic = True
torch.backends.cudnn.benchmark = False
torch.backends.cudnn.allow_tf32 = False
''',
            "Real flags",
        ),
        Example(
            '''import torch

assert torch.backends.cudnn.deterministic == True
ok = torch.backends.cudnn.benchmark == False
''',
            "Comparisons whose result is used",
        ),
        Example(
            '''class Settings:
    pass

cudnn = Settings()
cudnn.determinstic = True
''',
            "A user object that happens to be called cudnn",
        ),
    )

    def check_module(self, module, context):
        index = module.index
        for node in index.nodes_of(cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Expr):  # in source order
            if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                for target in targets:
                    message = self._assignment_problem(index, target, node)
                    if message:
                        fix = self._assignment_fix(module, target, node)
                        yield context.report(self, module, node, message, fix=fix)
            elif isinstance(node, cst.Expr) and isinstance(node.value, cst.Comparison):
                comparison = node.value
                if len(comparison.comparisons) == 1 and isinstance(comparison.comparisons[0].operator, cst.Equal):
                    left = index.resolve(comparison.left, node) if isinstance(comparison.left, (cst.Name, cst.Attribute)) else None
                    if left in COMPARED_SWITCHES:
                        text = dotted(comparison.left)
                        code = module.index.module.code_for_node
                        fix = make_fix(
                            "safe",
                            "Assign instead of comparing",
                            [replace(module, comparison, f"{code(comparison.left)} = {code(comparison.comparisons[0].comparator)}")],
                        )
                        yield context.report(
                            self, module, node,
                            f"`{text} == ...` compares and discards the result, so the flag is unchanged; use `=`",
                            fix=fix,
                        )

    def _assignment_fix(self, module, target, node):
        qualname = module.index.resolve(target, node) if isinstance(target, cst.Attribute) else None
        if qualname is None or not isinstance(node, cst.Assign) or len(node.targets) != 1:
            return None
        code = module.index.module.code_for_node
        if qualname in REBOUND_FUNCTIONS:
            call = f"{code(target)}({code(node.value)})"
            return make_fix("safe", f"Call `{qualname}` instead of replacing it", [replace(module, node, call)])
        close = difflib.get_close_matches(qualname[len(CUDNN):], sorted(CUDNN_FLAGS), n=1, cutoff=0.7)
        if close:
            return make_fix("safe", f"Use `cudnn.{close[0]}`", [replace(module, target.attr, close[0])])
        return None

    def _assignment_problem(self, index, target, at) -> str | None:
        if not isinstance(target, (cst.Attribute, cst.Name)):
            return None
        qualname = index.resolve(target, at) if isinstance(target, cst.Attribute) else None
        if qualname is None:
            return None
        if qualname in REBOUND_FUNCTIONS:
            return (
                f"this replaces `{qualname}` with a value instead of calling it, so determinism is never "
                f"enabled; call `{REBOUND_FUNCTIONS[qualname].format(value='True')}`"
            )
        if qualname.startswith(CUDNN) and qualname.count(".") == 3:
            attribute = qualname[len(CUDNN):]
            if attribute in CUDNN_FLAGS or attribute in CUDNN_OTHER:
                return None
            close = difflib.get_close_matches(attribute, sorted(CUDNN_FLAGS), n=1, cutoff=0.7)
            hint = f"; did you mean `cudnn.{close[0]}`?" if close else ""
            return (
                f"`cudnn.{attribute}` is not a cuDNN flag: PyTorch accepts the assignment and ignores "
                f"it{hint}"
            )
        return None
