from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint.analysis.op_matching.gradients import GradContext
from torchrepro_lint.analysis.op_matching.values import ABSENT, argument, possible_values
from torchrepro_lint.analysis.syntax import descendants
from torchrepro_lint.rules.base import Example, Rule, last_names
from torchrepro_lint.rules.edits import add_keywords, make_fix, replace

F = "torch.nn.functional."
DROPOUTS = frozenset(F + n for n in ("dropout", "dropout1d", "dropout2d", "dropout3d"))
SDPA = F + "scaled_dot_product_attention"
TRAINING_NAMES = frozenset({"training", "is_training"})
TRAINING_ONLY_METHODS = frozenset({"training_step"})  # Lightning: never runs in eval


class EvalDropout(Rule):
    code = "TRP403"
    name = "eval-dropout"
    summary = (
        "Functional dropout (`F.dropout`, attention's `dropout_p`) in an `nn.Module`, which keeps "
        "dropping after `model.eval()`."
    )
    why = (
        "`F.dropout` (and `dropout1d/2d/3d`) default to `training=True`: unlike `nn.Dropout`, "
        "they do not follow `model.eval()`. The same goes for `F.scaled_dot_product_attention`'s "
        "`dropout_p`. Validation metrics and inference outputs then change from run to run (and "
        "are worse), however carefully everything is seeded."
    )
    fix_safety = "safe"
    fix = (
        "Pass `training=self.training` to the dropout call; give attention "
        "`dropout_p=p if self.training else 0.0` (the fix spells `self` as the method's first "
        "parameter)."
    )
    where_reported = (
        "At the `F.dropout*` or `F.scaled_dot_product_attention` call.",
        "Only inside the methods of an `nn.Module` class, where `model.eval()` is expected to "
        "switch dropout off.",
        "A dropout call without `training=`; an attention call whose `dropout_p` is given and not "
        "shown to be 0.",
    )
    not_reported = (
        "A free function (not a method of an `nn.Module` class): there is no `model.eval()` to follow.",
        "An explicit `training=`, whatever its value, or a `**kwargs` that may carry it.",
        "A `p` / `dropout_p` that is 0 (a literal or a local constant); attention without "
        "`dropout_p`, or with one hidden in `**kwargs` (it defaults to 0.0).",
        "A call gated by `self.training`: an enclosing `if`, a conditional expression, a local "
        "variable assigned from one, or an earlier `if not self.training: return`.",
        "A dropout `p` taken from a parameter of the method that defaults to 0 "
        "(`def step(self, x, jitter_drop=0.0)`): nothing drops unless a caller asks.",
        "A `dropout_p` taken from a parameter of the enclosing function, directly or through a "
        "local copy: the caller decides.",
        "Lightning's `training_step`: it never runs in eval.",
        "`F.alpha_dropout` and `F.feature_alpha_dropout`: they default to `training=False`, so "
        "without `training=` they never drop.",
    )
    decisions = (
        "A class counts as an `nn.Module` when it derives from a `torch.nn` class or a Lightning "
        "module, or defines `forward`.",
        "`training=True` given explicitly is a deliberate choice (Monte Carlo dropout), not a "
        "hazard.",
        "A `p` from a method parameter that defaults to 0 is the caller's opt-in (a sampler's noise "
        "dropout): `training=self.training` would silently undo that choice.",
    )
    reference = (
        ("torch.nn.functional.dropout", "https://pytorch.org/docs/stable/generated/torch.nn.functional.dropout.html"),
        ("torch.nn.functional.scaled_dot_product_attention",
         "https://pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html"),
        ("torch.nn.Module.eval", "https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.eval"),
    )
    # Candidates are calls resolving to the functional dropouts or to SDPA.
    triggers = last_names(DROPOUTS, [SDPA])
    hazards = (
        Example(
            '''import torch.nn as nn
import torch.nn.functional as F

class Block(nn.Module):
    def __init__(self, dim, p=0.1):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.p = p

    def forward(self, x):
        return F.dropout(F.relu(self.fc(x)), p=self.p)  # <-- TRP403
''',
            "`training` left at its default (True)",
            fixed='''import torch.nn as nn
import torch.nn.functional as F

class Block(nn.Module):
    def __init__(self, dim, p=0.1):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.p = p

    def forward(self, x):
        return F.dropout(F.relu(self.fc(x)), p=self.p, training=self.training)
''',
        ),
        Example(
            '''import torch.nn as nn
import torch.nn.functional as F

class SelfAttention(nn.Module):
    def __init__(self, dim, dropout=0.1):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.dropout = dropout

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout, is_causal=True)  # <-- TRP403
''',
            "Attention dropout not switched off in eval",
        ),
        Example(
            '''import torch
from torch import nn
from torch.nn import functional as F

class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)

    def features(self, x):
        return F.dropout2d(torch.relu(self.conv(x)), 0.2)  # <-- TRP403

    def forward(self, x):
        return self.features(x).mean((2, 3))
''',
            "In a helper method of the module",
        ),
    )
    traps = (
        Example(
            '''import torch.nn as nn
import torch.nn.functional as F

class Block(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x, q, k, v):
        x = F.dropout(x, p=self.p, training=self.training)
        drop = self.p if self.training else 0.0
        attn = F.scaled_dot_product_attention(q, k, v, dropout_p=drop)
        return x + F.scaled_dot_product_attention(q, k, v, dropout_p=0.0) + attn
''',
            "Follows `self.training`, or attention dropout 0",
        ),
        Example(
            '''import torch.nn.functional as F

def augment(x, p=0.1):
    return F.dropout(x, p)

def attend(q, k, v, dropout_p):
    return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
''',
            "Free functions: no `model.eval()` to follow; a `dropout_p` the caller decides",
        ),
        Example(
            '''import torch.nn as nn
import torch.nn.functional as F

class Selu(nn.Module):
    def forward(self, x):
        if self.training:
            x = F.dropout(x, 0.1)
        return F.alpha_dropout(F.selu(x), 0.1)
''',
            "Gated by `self.training`; `alpha_dropout` defaults to `training=False`",
        ),
        Example(
            '''import torch
import torch.nn as nn
import torch.nn.functional as F

class Sampler(nn.Module):
    @torch.no_grad()
    def step(self, x, jitter_drop=0.0):
        jitter = torch.randn_like(x)
        if jitter_drop > 0:
            jitter = F.dropout(jitter, p=jitter_drop)
        return x + jitter
''',
            "`p` from a parameter that defaults to 0: dropping only when a caller asks for it",
        ),
    )

    def check_module(self, module, context):
        index = module.index
        grad = GradContext(index)
        for site in index.calls_to(*DROPOUTS):
            call = site.node
            method = self._module_method(index, grad, call)
            if method is None:
                continue
            if argument(call, 2, "training") is not ABSENT:
                continue  # given, or maybe given through **kwargs
            p = argument(call, 1, "p")
            if _zero(possible_values(index, p)) or self._opt_in_parameter(index, p):
                continue
            if self._gated(index, call, method):
                continue
            shown = _short(index, call)
            yield context.report(
                self,
                module,
                call,
                f"`{shown}` in `{_where(index, method)}` defaults to `training=True`, so it keeps dropping "
                f"after `model.eval()` and evaluation outputs are random; pass `training=self.training`",
                fix=_training_fix(module, call, method),
            )
        for site in index.calls_to(SDPA):
            call = site.node
            method = self._module_method(index, grad, call)
            if method is None:
                continue
            p = argument(call, 4, "dropout_p")
            if not isinstance(p, cst.BaseExpression):
                continue  # absent (0.0), or hidden in **kwargs
            if _zero(possible_values(index, p)) or self._gated(index, call, method, p):
                continue
            if self._from_parameter(index, p):
                continue
            text = " ".join(index.module.code_for_node(p).split())
            yield context.report(
                self,
                module,
                call,
                f"`scaled_dot_product_attention(..., dropout_p={text})` in `{_where(index, method)}` keeps "
                f"dropping attention weights after `model.eval()`, so evaluation outputs are random; pass "
                f"`dropout_p={text} if self.training else 0.0`",
                fix=_dropout_p_fix(module, p, method),
            )

    # -- helpers ----------------------------------------------------------------------------
    def _module_method(self, index, grad, call) -> cst.FunctionDef | None:
        """The method of an nn.Module class that (lexically) contains the call."""
        function = None
        for ancestor in index.ancestors(call):
            if isinstance(ancestor, cst.FunctionDef):
                function = ancestor
            elif isinstance(ancestor, cst.ClassDef):
                if function is None or index.parents.get(index.parents.get(function)) is not ancestor:
                    return None
                if function.name.value in TRAINING_ONLY_METHODS or not grad.is_module_class(ancestor):
                    return None
                return function
        return None

    def _gated(self, index, call, method, value=None) -> bool:
        for ancestor in index.ancestors(call):
            if ancestor is method:
                break
            if isinstance(ancestor, (cst.If, cst.IfExp, cst.While)) and _mentions_training(ancestor.test):
                return True
        if value is not None and self._value_mentions_training(index, value, 0):
            return True
        # An earlier `if not self.training: return ...` in the method.
        fl = flow(index)
        here = fl.pos(call)
        for node in descendants(method):
            if isinstance(node, cst.If) and fl.pos(node) < here and not fl.inside(call, node) and _mentions_training(node.test):
                body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
                if body and _returns(body[-1]):
                    return True
        return False

    def _value_mentions_training(self, index, value, depth) -> bool:
        if depth > 4:
            return False
        if _mentions_training(value):
            return True
        fl = flow(index)
        for node in descendants(value):
            if isinstance(node, cst.Name) and fl.is_load(node) and fl.parameter(node) is None:
                reaching = fl.reaching_value(node)
                if reaching is not None and self._value_mentions_training(index, reaching, depth + 1):
                    return True
        return False

    def _opt_in_parameter(self, index, value) -> bool:
        """`p=noise_dropout` where `noise_dropout` is a parameter of the method that defaults to 0:
        nothing drops unless a caller asks for it, so the dropping is the caller's choice (a
        sampler's noise dropout), and `training=self.training` would silently undo it."""
        param = _parameter_behind(index, value)
        return param is not None and param.default is not None and _zero(possible_values(index, param.default))

    def _from_parameter(self, index, value) -> bool:
        """`dropout_p=dropout_p` (or a local copy of it) where it is a parameter: the caller decides."""
        param = _parameter_behind(index, value)
        return param is not None and param.name.value != "self"


def _parameter_behind(index, value) -> cst.Param | None:
    """The parameter a name holds, directly or through up to two local copies of it."""
    fl = flow(index)
    for _ in range(3):
        if not isinstance(value, cst.Name):
            return None
        param = fl.parameter(value)
        if param is not None:
            return param
        value = fl.reaching_value(value)
    return None

def _mentions_training(expr: cst.CSTNode) -> bool:
    for node in descendants(expr):
        if isinstance(node, cst.Attribute) and node.attr.value in TRAINING_NAMES:
            return True
        if isinstance(node, cst.Name) and node.value in TRAINING_NAMES:
            return True
    return False


def _returns(statement: cst.CSTNode) -> bool:
    if isinstance(statement, cst.SimpleStatementLine):
        return any(isinstance(s, (cst.Return, cst.Raise)) for s in statement.body)
    return False


def _zero(values) -> bool:
    return values is not None and all(isinstance(v, (int, float)) and not isinstance(v, bool) and v == 0 for v in values)


def _short(index, call: cst.Call) -> str:
    text = " ".join(index.module.code_for_node(call).split())
    return text if len(text) <= 60 else " ".join(index.module.code_for_node(call.func).split()) + "(...)"


def _where(index, method: cst.FunctionDef) -> str:
    klass = index.enclosing(method, cst.ClassDef)
    return f"{klass.name.value}.{method.name.value}" if klass is not None else method.name.value


def _self_name(method) -> str | None:
    params = getattr(method, "params", None)
    return params.params[0].name.value if params is not None and params.params else None


def _training_fix(module, call: cst.Call, method):
    """Add `training=self.training` (spelled with the method's own first parameter)."""
    owner = _self_name(method)
    if owner is None:
        return None
    return make_fix("safe", f"Pass `training={owner}.training`", [add_keywords(module, call, [("training", f"{owner}.training")])])

def _dropout_p_fix(module, p: cst.BaseExpression, method):
    """`dropout_p=p` -> `dropout_p=p if self.training else 0.0`."""
    owner = _self_name(method)
    if owner is None:
        return None
    text = module.index.module.code_for_node(p)
    if isinstance(p, (cst.IfExp, cst.Lambda)):
        text = f"({text})"
    return make_fix("safe", "Drop attention weights only in training", [replace(module, p, f"{text} if {owner}.training else 0.0")])

