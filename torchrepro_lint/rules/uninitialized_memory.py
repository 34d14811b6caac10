"""What happens first to freshly allocated memory: written whole, read, or something we cannot
follow (TRP501's analysis).

`Tracker.fate(node)` follows the memory an allocation returns through names, views, `self`
attributes and calls to the first thing that decides it: INIT (a fill, a copy into it, `out=`),
READ (arithmetic, a reduction, a comparison), or STOP (a partial write, a container, a call we
cannot see into); NEUTRAL uses (its shape, its device) are passed over. An attribute's memory
may be initialized in another module: those answer through summaries.
"""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint.analysis.receivers import PARAMETER_CLASSES, is_tensor
from torchrepro_lint.analysis.syntax import arg, int_value, self_attribute, subtree
from torchrepro_lint.project.summaries import summary, summary_kind

INITIALIZING_METHODS = frozenset(
    "zero_ fill_ copy_ uniform_ normal_ random_ bernoulli_ exponential_ geometric_ log_normal_ cauchy_ "
    "set_ resize_as_ load_state_dict".split()
)
PARTIAL_WRITE_METHODS = frozenset(
    "index_fill_ index_copy_ index_add_ index_put_ masked_fill_ masked_scatter_ scatter_ scatter_add_ "
    "scatter_reduce_ fill_diagonal_ put_ narrow select unbind split chunk tril_ triu_ diagonal".split()
)
# Methods whose result is the same values (or a view of them): follow the result. `numpy`
# gives an array sharing the memory: a file read into it or a copy into it fills the tensor.
TRANSPARENT_METHODS = frozenset(
    "to cuda cpu contiguous view reshape float double half bfloat16 long int short bool byte char "
    "type_as detach detach_ requires_grad_ pin_memory share_memory_ t transpose permute unsqueeze "
    "squeeze expand flatten view_as reshape_as expand_as clone as_strided movedim swapaxes numpy".split()
)
# Function forms of those views, given the memory as their input: follow the result too.
TRANSPARENT_FUNCTIONS = frozenset(
    "torch.reshape torch.flatten torch.squeeze torch.unsqueeze torch.t torch.transpose torch.permute "
    "torch.movedim torch.moveaxis torch.swapaxes torch.swapdims torch.detach torch.clone "
    "torch.as_strided torch.view_as_real torch.view_as_complex torch.from_numpy".split()
)
# Function forms of the splitting views (`x.split(...)`, `x.narrow(...)`): each piece is part
# of the memory, so what happens to it says nothing of the whole (as for the methods).
PARTIAL_VIEW_FUNCTIONS = frozenset(
    "torch.split torch.split_with_sizes torch.tensor_split torch.chunk torch.unbind torch.narrow "
    "torch.select torch.diagonal torch.hsplit torch.vsplit torch.dsplit".split()
)
METADATA_METHODS = frozenset(
    "size dim ndimension numel nelement element_size stride is_contiguous data_ptr get_device "
    "is_floating_point is_complex storage_offset untyped_storage".split()
)
METADATA_ATTRIBUTES = frozenset("shape device dtype is_cuda ndim requires_grad layout names is_leaf grad_fn".split())
TRANSPARENT_ATTRIBUTES = frozenset({"data", "T", "mT"})
READING_METHODS = frozenset(
    "abs add sub mul div true_divide floor_divide remainder fmod matmul mm bmm mv dot sum mean std var "
    "prod max min amax amin argmax argmin norm exp log log1p log2 sqrt rsqrt pow clamp clip sigmoid "
    "tanh relu softmax log_softmax item tolist any all eq ne lt le gt ge equal allclose isnan "
    "isinf isfinite nonzero masked_select masked_fill index_select gather cumsum cumprod sort topk "
    "round floor ceil sign neg reciprocal add_ sub_ mul_ div_ pow_ clamp_ clamp_min clamp_max lerp "
    "addcmul addcdiv baddbmm addmm unique bincount histc sin cos exp_ log_ sqrt_ abs_ neg_ "
    "sigmoid_ tanh_ relu_ addcmul_ addcdiv_ lerp_ mul_ maximum minimum where logsumexp".split()
)
NOT_READING_TORCH = frozenset(
    "torch.save torch.load torch.is_tensor torch.numel torch.zeros_like torch.ones_like torch.full_like "
    "torch.empty_like torch.rand_like torch.randn_like torch.randint_like torch.typename torch.is_storage "
    "torch.is_floating_point torch.is_complex torch.manual_seed torch.result_type torch.broadcast_shapes".split()
)
READING_TORCH_PREFIXES = ("torch.nn.functional.", "torch.linalg.", "torch.fft.", "torch.special.")
BETA_FUNCTIONS = frozenset("torch.addmm torch.baddbmm torch.addbmm torch.addmv torch.addr".split())
BETA_METHODS = frozenset("addmm baddbmm addbmm addmv addr".split())
INIT_PREFIX = "torch.nn.init."
METADATA_BUILTINS = frozenset({"builtins.len", "builtins.isinstance", "builtins.type", "builtins.id", "builtins.print"})

INIT, READ, NEUTRAL, STOP = "init", "read", "neutral", "stop"  # STOP: partial, escaped or unknown


def _identity_test(node, parent, parents) -> bool:
    """`node is None`, `None is not node`: every comparison `node` takes part in is `is`/`is not`."""
    if isinstance(parent, cst.Comparison) and parent.left is node:
        operators = [parent.comparisons[0].operator]
    elif isinstance(parent, cst.ComparisonTarget) and parent.comparator is node:
        chain = parents.get(parent).comparisons
        position = next(i for i, target in enumerate(chain) if target is parent)
        operators = [target.operator for target in chain[position : position + 2]]
    else:
        return False
    return all(isinstance(operator, (cst.Is, cst.IsNot)) for operator in operators)


class Tracker:
    """What happens first to freshly allocated memory."""

    def __init__(self, index, data, context, module) -> None:
        self.index = index
        self.data = data
        self.context = context
        self.module = module
        self.origin: cst.CSTNode | None = None

    def fate(self, node: cst.CSTNode, depth: int = 0) -> tuple[str, cst.CSTNode]:
        if depth > 10:
            return STOP, node
        parents = self.data.parents
        parent = parents.get(node)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            call = parents.get(parent)
            name = parent.attr.value
            if isinstance(call, cst.Call) and call.func is parent:
                if name in INITIALIZING_METHODS:
                    return INIT, call
                if name in TRANSPARENT_METHODS:
                    return self.fate(call, depth + 1)
                if name in METADATA_METHODS:
                    return NEUTRAL, call
                if name in BETA_METHODS and self._beta_zero(call):
                    return NEUTRAL, call
                if name in READING_METHODS:
                    return READ, call
                return STOP, call
            if name in METADATA_ATTRIBUTES:
                return NEUTRAL, parent
            if name in TRANSPARENT_ATTRIBUTES:
                return self.fate(parent, depth + 1)
            return STOP, parent
        if isinstance(parent, cst.Arg):
            return self._argument(node, parent, depth)
        if _identity_test(node, parent, parents):
            return NEUTRAL, parent  # `buf is not None` compares the object, not its memory
        if isinstance(parent, (cst.BinaryOperation, cst.Comparison, cst.ComparisonTarget, cst.UnaryOperation)):
            if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not):
                return STOP, parent
            return READ, parent
        if isinstance(parent, cst.AugAssign):
            return READ, parent
        if isinstance(parent, cst.Subscript) and parent.value is node:
            if self.data._is_store(parent):
                return (INIT if _whole(parent) else STOP), parent
            fate, where = self.fate(parent, depth + 1)
            return (READ, where) if fate == READ else (STOP, where)
        if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is node:
            targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
            if len(targets) != 1:
                return STOP, parent
            target = targets[0]
            if isinstance(target, cst.Name):
                return self._name(target.value, parent)
            attr = self_attribute(target)
            if attr is not None:
                return self._attribute(attr, parent)
            return STOP, parent
        if isinstance(parent, cst.IfExp) and parent.test is not node:
            return self.fate(parent, depth + 1)
        return STOP, node  # returned, yielded, stored in a container, discarded, ...

    def _argument(self, node, arg_node: cst.Arg, depth: int) -> tuple[str, cst.CSTNode]:
        call = self.data.parents.get(arg_node)
        if not isinstance(call, cst.Call):
            return STOP, node
        if arg_node.keyword is not None and arg_node.keyword.value == "out":
            return INIT, call
        func = call.func
        qualname = self.index.resolve(func, call) if isinstance(func, (cst.Name, cst.Attribute)) else None
        if qualname in PARAMETER_CLASSES:
            return self.fate(call, depth + 1)
        if qualname in METADATA_BUILTINS or qualname in NOT_READING_TORCH:
            return NEUTRAL, call
        if qualname and qualname.startswith(INIT_PREFIX):
            first = call.args[0] if call.args else None
            return (INIT if first is arg_node else STOP), call
        if qualname in BETA_FUNCTIONS and call.args and call.args[0] is arg_node and self._beta_zero(call):
            return NEUTRAL, call
        if qualname == "torch.broadcast_tensors" and _view_discarded(self.data.parents, call, arg_node):
            return NEUTRAL, call  # its shape only: `t, _ = torch.broadcast_tensors(t, torch.empty(shape))`
        if qualname in TRANSPARENT_FUNCTIONS and _is_input(call, arg_node):
            return self.fate(call, depth + 1)  # `torch.reshape(x, s)` as `x.reshape(s)`
        if qualname in PARTIAL_VIEW_FUNCTIONS and _is_input(call, arg_node):
            return STOP, call  # `torch.split(x, n)` as `x.split(n)`: pieces of the memory
        if qualname and _reading_torch(qualname):
            return READ, call
        if isinstance(func, cst.Attribute) and not (qualname or "").startswith(("torch.", "@.", "builtins.")):
            method = func.attr.value  # a method of another object, given our memory
            if method.endswith("_as"):
                return NEUTRAL, call  # `y.type_as(x)`, `y.view_as(x)`: only x's metadata
            if (method == "copy_" or method in READING_METHODS) and is_tensor(func.value, self.index, call):
                return READ, call
        return STOP, call

    def _beta_zero(self, call: cst.Call) -> bool:
        """`beta=0`, or `beta=b` where the last binding of `b` on the allocation's path is 0:
        `if mask is None: x = torch.empty(...); b = 0` / `else: x = mask; b = 1`, then
        `torch.baddbmm(x, q, k, beta=b)` (diffusers' attention scores)."""
        beta = arg(call, None, "beta")
        if beta is None:
            return False
        if _zero(beta):
            return True
        origin, data = self.origin, self.data
        if not isinstance(beta, cst.Name) or origin is None:
            return False
        here = data.pos(call)
        before = [
            (s, v) for s, v in data.bindings(beta.value, data.owner(call))
            if data.pos(s) < here and not data.other_branch(s, origin)
        ]
        if not before:
            return False
        _, value = max(before, key=lambda binding: data.pos(binding[0]))
        return value is not None and _zero(value)

    def _name(self, name: str, statement: cst.CSTNode) -> tuple[str, cst.CSTNode]:
        self.origin = statement  # (the allocation's statement: which bindings share its path)
        data = self.data
        owner = data.owner(statement)
        uses = data.name_uses(name, owner, statement)
        # The memory is this name's value up to the first rebinding on a path from here (one in
        # the `else` of the allocation's `if` is another path); its value may still read it.
        rebinds = [
            s for s, _ in data.bindings(name, owner)
            if data.pos(s) > data.pos(statement) and s is not statement and not data.other_branch(s, statement)
        ]
        if rebinds:
            first = min(rebinds, key=data.pos)
            uses = [u for u in uses if data.pos(u) < data.pos(first) or data.inside(u, first)]
        if data.used_in_nested(name, owner):
            return STOP, statement  # a closure may write it
        for use in sorted(uses, key=lambda u: self._order(u)):
            fate, where = self.fate(use)
            if fate == NEUTRAL:
                continue
            return fate, where
        return STOP, statement

    def _order(self, use: cst.CSTNode) -> tuple[int, int, int]:
        """Evaluation order: statement by statement, an assignment's value before its target."""
        data = self.data
        statement = data.statement(use)
        in_target = isinstance(statement, (cst.Assign, cst.AugAssign, cst.AnnAssign)) and any(
            data.inside(use, t) for t in _targets(statement)
        )
        return (data.pos(statement), 1 if in_target else 0, data.pos(use))

    def _attribute(self, attr: str, statement: cst.CSTNode) -> tuple[str, cst.CSTNode]:
        data = self.data
        klass = data.enclosing_class(statement)
        if klass is None:
            return STOP, statement
        if any(store is not _target_of(statement) for store in data.self_attr_stores(klass, attr)):
            return STOP, statement
        read = None
        for use in data.self_attr_uses(klass, attr):
            fate, where = self.fate(use)
            if fate == READ:
                read = read or (fate, where)
            elif fate != NEUTRAL:
                return STOP, use
        if read is None or self._initialized_elsewhere(attr):
            return STOP, statement
        return read

    def _initialized_elsewhere(self, attr: str) -> bool:
        """Anywhere in the project: `<x>.<attr>` written, initialized or handed to a function
        (an `apply(init_fn)` function, a `glorot(m.weight)` helper), or parameters initialized
        in a loop over `.parameters()`. Other modules answer through summaries, and only those
        whose text could: a project-wide scan must not parse the project."""
        if self.context is None:
            return True  # inside another module's summary, which must not depend on the project: assume so
        project = self.context.project
        if self.initializes(attr, own_module=True) or _parameter_loop_init(self.index, self.data):
            return True
        for other in project.modules_mentioning(attr):
            if other is not self.module and summary(other, "initializes attribute", attr):
                return True
        return any(
            other is not self.module and summary(other, "initializes parameters in a loop")
            for other in project.modules_mentioning("parameters")
        )

    def initializes(self, attr: str, *, own_module: bool) -> bool:
        """`<x>.<attr>` is written or initialized in this module. In the module being checked,
        the class's own `self.<attr>` uses were judged already, and are skipped."""
        data = self.data
        for node in data.attribute_names.get(attr, ()):
            if own_module and self_attribute(node) is not None and data.enclosing_class(node) is not None:
                continue
            if data._is_store(node):
                return True
            fate, _ = self.fate(node)
            if fate in (INIT, STOP):
                return True
        return False


@summary_kind("initializes attribute")
def _initializes_attribute(module, attr: str) -> bool:
    """Another module writes or initializes `<x>.<attr>` (TRP501's project-wide question)."""
    index = module.index
    return Tracker(index, flow(index), None, module).initializes(attr, own_module=False)


@summary_kind("initializes parameters in a loop")
def _initializes_parameters(module, _argument: str = "") -> bool:
    index = module.index
    return _parameter_loop_init(index, flow(index))


def _targets(statement) -> list[cst.CSTNode]:
    if isinstance(statement, cst.Assign):
        return [t.target for t in statement.targets]
    return [statement.target]


def _target_of(statement) -> cst.CSTNode | None:
    targets = _targets(statement) if isinstance(statement, (cst.Assign, cst.AnnAssign)) else []
    return targets[0] if targets else None


def _whole(subscript: cst.Subscript) -> bool:
    """`x[...]`, `x[:]`, `x[:, :]`: every element."""
    for element in subscript.slice:
        inner = element.slice
        if isinstance(inner, cst.Slice):
            if inner.lower is not None or inner.upper is not None or inner.step is not None:
                return False
        elif not (isinstance(inner, cst.Index) and isinstance(inner.value, cst.Ellipsis)):
            return False
    return True


def _view_discarded(parents, call: cst.Call, arg_node: cst.Arg) -> bool:
    """`broadcast_tensors` gives a view of each argument: the one of `arg_node` is unpacked into
    `_`, so only the argument's shape was used (EDM broadcasts a constant to a shape this way)."""
    if any(arg.star for arg in call.args):
        return False
    position = next(i for i, arg in enumerate(call.args) if arg is arg_node)
    statement = parents.get(call)
    if not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
        return False
    target = statement.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) != len(call.args):
        return False
    element = target.elements[position]
    return isinstance(element, cst.Element) and isinstance(element.value, cst.Name) and element.value.value == "_"


def _is_input(call: cst.Call, arg_node: cst.Arg) -> bool:
    """`arg_node` is the tensor a view function works on: its first argument, or `input=`."""
    if arg_node.keyword is not None:
        return arg_node.keyword.value == "input"
    return bool(call.args) and call.args[0] is arg_node and not arg_node.star


def _zero(value: cst.BaseExpression) -> bool:
    return int_value(value) == 0 or isinstance(value, cst.Float) and float(value.value) == 0.0


def _reading_torch(qualname: str) -> bool:
    if qualname in NOT_READING_TORCH:
        return False
    if qualname.startswith(READING_TORCH_PREFIXES):
        return True
    parts = qualname.split(".")
    return len(parts) == 2 and parts[0] == "torch" and parts[1][:1].islower()


def _parameter_loop_init(index, data) -> bool:
    """`for p in model.parameters(): nn.init.xavier_uniform_(p)` (or `p.data.normal_()`)."""
    for node in index.nodes_of(cst.For):  # in source order
        source = node.iter
        while isinstance(source, cst.Call) and not (
            isinstance(source.func, cst.Attribute) and source.func.attr.value in ("parameters", "named_parameters")
        ):
            source = source.args[0].value if source.args else None
        if not isinstance(source, cst.Call):
            continue
        for inner in subtree(node.body):
            if isinstance(inner, cst.Call):
                qualname = index.resolve(inner.func, inner) if isinstance(inner.func, (cst.Name, cst.Attribute)) else None
                if (qualname or "").startswith(INIT_PREFIX):
                    return True
                if isinstance(inner.func, cst.Attribute) and inner.func.attr.value in INITIALIZING_METHODS:
                    return True
    return False
