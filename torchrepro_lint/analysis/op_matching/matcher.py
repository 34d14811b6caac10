"""Which op-catalogue entries a call reaches: the catalogue's predicates evaluated on code.

``ops_in(index, version, path, uses)`` matches every call of a module once (cached; TRP401 and
TRP402 share it) against the catalogue as it holds in ``version`` and returns ``OpMatch``
records. A call matches an ``[ops.<id>]`` entry through one of its API records when every
condition of the entry and of the record is *known* to hold here:

- the callee (``calls``): a resolved function or module name (``F.interpolate``,
  ``nn.Upsample``, ``torch.bincount``, also through a project alias in another module), or a
  ``torch.Tensor`` method on a receiver that ``receivers.is_tensor`` shows to be a tensor (never a
  NumPy array), or a method only tensors have on a receiver of unknown type (``assumed``: the
  rules ask for a program on CUDA);
- ``arg`` / ``ctor_arg`` conditions on arguments (``values``), by keyword or position, with
  literal values followed through local constants (``mode = "bilinear"``); an argument with a
  few known values (``"bicubic" if fast else "linear"``, a name assigned in two branches) is
  matched once per value and reported only when every value reaches the rule; an argument that
  ``*args`` / ``**kwargs`` may supply is unknown, except a True/False flag, tried both ways like
  the above; a ``len`` test counts the values of a display (``[left, right, top, bottom]``,
  ``[p] * 4``); a parameter of a module-level function is each literal the project's calls of
  it give (``resize(x, mode="area")``, its default where left out), reported when one matches;
- context conditions from ``tensor_evidence``: ``device``, ``input_ndim``, ``input_dtype``,
  ``input_layout``, ``target_kind`` (class indices unless the target is shown to be floating).
  For a module, the input is the first argument of the calls of the instance that this module
  shows (``self.loss(out, y)`` for ``self.loss = nn.CrossEntropyLoss()``);
- ``requires_grad`` (backward-only entries, ``requires_grad.RequiresGrad``): false where nothing is
  differentiated (``GradContext.no_grad_reason``: no_grad / inference_mode blocks and
  decorators, Datasets, transforms, collate functions, checkpoint-loading code, Lightning
  evaluation steps), where the op's result only reaches non-differentiable uses (``> 0.5``,
  ``.gt_()``, ``.long()``, ``.item()``), in a module-level function that the project only uses
  from such code (``project/uses.py``: ``ProjectUses``), and on the data input of a top-level model's
  ``forward``.

Refinements the catalogue states in words but not as predicates: sums of ones or of integers
(``scatter_add_`` counting degrees) and writes of one constant through duplicate indices give the
same result in any order (``order_independent``), and so do the writes of the entries whose
hazard is duplicate indices through an index that cannot repeat (``torch.nonzero(m).flatten()``,
``torch.arange``, an ``argsort`` permutation: ``distinct_indices``); ``cumsum`` needs a 1-D input.

A call in the branch of a parameter test (``if dims == 3: nn.AvgPool3d(...)`` in a module-level
helper) is matched only where a call in the project selects that branch (``dispatch.py``).

Unknown is not a match (precision before recall), with two exceptions that the catalogue's own
facts make safe: entries of one rule whose only unknown is the input's number of dims and that
together cover every valid number (``interpolate(mode="area")`` raises for 3-, 4- and 5-D input),
and CUDA entries on a tensor of unknown device (CUDA is where the hazard is; a tensor shown to be
on the CPU, or data-pipeline code, is not reported). A call that a ``[not_flagged]`` record
covers is never matched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from torchrepro_lint.analysis import tensor_evidence as te
from torchrepro_lint.analysis.module_index import CallSite, ModuleIndex
from torchrepro_lint.analysis.op_matching.calls import TENSOR_METHOD, ApiCall, as_api
from torchrepro_lint.analysis.op_matching.dispatch import parameter_of, selecting_branch
from torchrepro_lint.analysis.op_matching.gradients import GradContext
from torchrepro_lint.analysis.op_matching.requires_grad import RequiresGrad
from torchrepro_lint.analysis.op_matching.distinct_indices import DistinctIndices
from torchrepro_lint.analysis.op_matching.order_independent import DUPLICATE_INDEX_ENTRIES, EXACT_SUM_ENTRIES, OrderIndependence
from torchrepro_lint.analysis.op_matching.values import ABSENT, UNKNOWN, Values, argument, display_length, passes
from torchrepro_lint.analysis.receivers import is_tensor
from torchrepro_lint.catalog import ApiRecord, OpEntry, Predicate, Version, load_catalog

if TYPE_CHECKING:
    from torchrepro_lint.project.uses import ProjectUses

# Possible input dims of an API, to know when the ndim-gated entries together cover every case.
VALID_NDIMS = {
    "torch.nn.functional.interpolate": frozenset({3, 4, 5}),
    "torch.nn.Upsample": frozenset({3, 4, 5}),
}
# Refinements the catalogue states in words (`condition`) but not as predicates.
ONE_DIMENSIONAL = frozenset({"cumsum"})  # multi-dim cumsums use per-row scans, deterministic anyway
NEVER_NONE = frozenset({"dim"})  # parameters that cannot be None: passing one means it is present


@dataclass(frozen=True)
class OpMatch:
    """A call that reaches catalogue entries (of one rule: several only when they cover one case)."""

    entries: tuple[OpEntry, ...]
    api: ApiRecord
    site: CallSite
    form: str  # "function" | "method" | "module"
    shown: str  # the call, short: "F.interpolate(..., mode='bilinear')"
    evidence: str = ""  # where a context condition was shown, e.g. "its input at line 12 has 4 dims"
    assumed: bool = False  # a tensor-only method on a receiver of unknown type (calls.as_api)
    given: str = ""  # the argument as the project's calls of its function give it: "mode='area'"

    @property
    def entry(self) -> OpEntry:
        return self.entries[0]

    @property
    def rule(self) -> str:
        return self.entries[0].rule

    @property
    def ids(self) -> str:
        return ", ".join(e.id for e in self.entries)


def ops_in(index: ModuleIndex, version: Version, path: str = "", uses: ProjectUses | None = None) -> list[OpMatch]:
    """Every catalogue match in the module (both rules), computed once per index and version.

    With `uses` (the project's), a backward-only op in a module-level function that the project
    only uses from code without gradients is not matched either."""
    per_index = index.derived.setdefault("ops", {})
    key = (version, path)
    if key not in per_index:
        per_index[key] = _Matcher(index, version, path, uses).run()
    return per_index[key]


class _Matcher:
    def __init__(self, index: ModuleIndex, version: Version, path: str, uses: ProjectUses | None = None) -> None:
        self.index = index
        self.version = version
        self._forced: dict = {}
        self._memo: dict = {}
        self._last_evidence = ""
        self.values = Values(index)
        self.grad = GradContext(index, path)
        self.requires_grad = RequiresGrad(index, self.grad, uses)
        self.order = OrderIndependence(index, self.values)
        self.distinct = DistinctIndices(index, self.values)
        catalog = load_catalog()
        self.ops: dict[str, list[tuple[OpEntry, ApiRecord]]] = {}
        for entry in catalog.entries_for(version):
            if not entry.report:
                continue
            for api in entry.apis_for(version):
                if api.report:
                    self.ops.setdefault(api.name, []).append((entry, api))
        self.traps: dict[str, list[ApiRecord]] = {}
        for trap in catalog.not_flagged:
            if trap.holds_in(version):
                for api in trap.apis:
                    if api.holds_in(version):
                        self.traps.setdefault(api.name, []).append(api)
        self.methods = {name[len(TENSOR_METHOD):] for name in self.ops if name.startswith(TENSOR_METHOD)}
        self.last_names = {name.rsplit(".", 1)[-1] for name in self.ops if not name.startswith(TENSOR_METHOD)}

    def run(self) -> list[OpMatch]:
        out: list[OpMatch] = []
        for site in self.index.calls:
            call = as_api(site, self.index, self.ops, self.methods, self._external)
            if call is None or not self._branch_taken(site):
                continue
            out.extend(self._match(call))
        return out

    def _external(self, qualname: str) -> str | None:
        """What a project name bound to a catalogue API stands for (`from .wrappers import
        interpolate`, where `interpolate = F.interpolate`). Asked only of names whose last part
        is an API's, and of no same-module name (the module's own resolution follows those)."""
        uses, module = self.requires_grad.uses, self.requires_grad.module
        if uses is None or module is None or qualname.startswith(("torch.", "@")):
            return None
        if qualname.rsplit(".", 1)[-1] not in self.last_names:
            return None
        return uses.external_name(qualname, module)

    def _branch_taken(self, site: CallSite) -> bool:
        """False for a call built under `if <parameter> == <literal>` of a function that no call
        in the project is shown to take there (dispatch.py)."""
        branch = selecting_branch(self.index, site.node)
        if branch is None:
            return True
        uses, module = self.requires_grad.uses, self.requires_grad.module  # (the project's, and this module)
        return uses is not None and module is not None and uses.branch_selected(module, branch)

    # -- matching ---------------------------------------------------------------------------
    def _match(self, call: ApiCall) -> list[OpMatch]:
        """Match the call; an argument with a few known values (`"bicubic" if fast else "linear"`)
        is matched once per value, and a rule is reported when every value reaches it."""
        name, values, every = self._split_argument(call)
        if not values:
            return self._match_once(call)
        per_rule: dict[str, list[tuple[OpMatch, object]]] = {}
        for value in values:
            self._forced = {name: value}
            try:
                found = self._match_once(call)
            finally:
                self._forced = {}
            rules = {m.rule for m in found}
            for match in found:
                per_rule.setdefault(match.rule, []).append((match, value))
            if not every:
                continue
            for rule in list(per_rule):
                if rule not in rules:
                    per_rule[rule] = []
            if not found:
                return []
        out = []
        for rule, group in sorted(per_rule.items()):
            if not group or every and len(group) < len(values):
                continue
            entries = tuple({e.id: e for m, _ in group for e in m.entries}.values())
            first = group[0][0]
            given = "" if every else " or ".join(f"{name}={v!r}" for v in dict.fromkeys(v for _, v in group))
            out.append(OpMatch(entries, first.api, first.site, first.form, first.shown, first.evidence, first.assumed, given))
        return out

    def _split_argument(self, call: ApiCall):
        """(name, values, every): an argument with a few possible values, each to be matched.
        `every`: the value is one of them, reported when every value reaches the rule (`"bicubic"
        if fast else "linear"`); else they are what the project's calls of the function give its
        parameter (`def resize(x, mode="bilinear")`), reported when one of them reaches it."""
        predicates = [p for entry, api in self.ops.get(call.api_name, ()) for p in (*entry.when, *api.when)]
        names = {p.name: p for p in predicates if p.subject in ("arg", "ctor_arg")}
        for name, p in names.items():
            expr = argument(call.site.node, None if p.keyword_only else p.pos, name)
            if isinstance(expr, (cst.IfExp, cst.Name)):
                values = self.values.of(expr)
                if values is not None and 1 < len(values) <= 4:
                    return name, sorted(values, key=repr), True
        uses, module = self.requires_grad.uses, self.requires_grad.module
        for name, p in names.items() if uses is not None and module is not None else ():
            expr = argument(call.site.node, None if p.keyword_only else p.pos, name)
            parameter = parameter_of(self.index, expr) if isinstance(expr, cst.Name) else None
            if parameter is not None:
                values = uses.passed_values(module, parameter)
                if values:
                    return name, sorted(values, key=repr), False
        # A flag tested only against True/False whose value is not known (`antialias=self.flag`,
        # or absent with `**kwargs` that may pass it) can take just those two values: matched
        # with each, it silences the call only where it changes the verdict.
        for name, p in names.items():
            tests = [q for q in predicates if q.name == name and q.subject == p.subject]
            if not all(q.test == "equals" and isinstance(q.value, bool) for q in tests):
                continue
            expr = argument(call.site.node, None if p.keyword_only else p.pos, name)
            if expr is UNKNOWN or (expr is not ABSENT and self.values.of(expr) is None):
                return name, [False, True], True
        return None, [], True

    def _match_once(self, call: ApiCall) -> list[OpMatch]:
        for trap in self.traps.get(call.api_name, ()):
            if self._holds(call, trap.when, None) is True:
                return []
        by_rule: dict[str, list[tuple[OpEntry, ApiRecord, str]]] = {}
        ndim_only: dict[str, list[tuple[OpEntry, ApiRecord, frozenset]]] = {}
        for entry, api in self.ops.get(call.api_name, ()):
            result, unknown = self._evaluate(call, entry, api)
            if result is True:
                by_rule.setdefault(entry.rule, []).append((entry, api, self._last_evidence))
            elif result is None and unknown and all(map(_ndim_choice, unknown)):
                ndim_only.setdefault(entry.rule, []).append((entry, api, frozenset(v for p in unknown for v in p.value)))
        valid = VALID_NDIMS.get(call.api_name)
        if valid:
            for rule, group in ndim_only.items():
                if rule not in by_rule and valid <= frozenset().union(*(g[2] for g in group)):
                    by_rule[rule] = [(e, a, "") for e, a, _ in group]
        out = []
        for rule, group in sorted(by_rule.items()):
            entries = tuple({e.id: e for e, _, _ in group}.values())
            api = group[0][1]
            evidence = next((ev for _, _, ev in group if ev), "")
            out.append(OpMatch(entries, api, call.site, call.form, self._shown(call, group), evidence, call.assumed))
        return out

    def _evaluate(self, call: ApiCall, entry: OpEntry, api: ApiRecord):
        """(True, []) when the entry is shown to apply, (False, []) when shown not to, else
        (None, the predicates that stayed unknown). Cheap argument tests run first.

        An unknown that no number of dims can settle (`padding_mode` that `**kwargs` may pass)
        ends it there: the entry cannot match (`_match_once` takes only True, or unknowns that
        are all `input_ndim`), so the costly context predicates after it are not asked."""
        self._last_evidence = ""
        evidence = ""
        unknown: list[Predicate] = []
        predicates = (*entry.when, *api.when)
        ordered = [p for p in predicates if p.subject != "context"] + [p for p in predicates if p.subject == "context"]
        for predicate in ordered:
            if predicate.subject == "context":
                key = (id(call.site.node), predicate.name, predicate.test, repr(predicate.value))
                if key not in self._memo:
                    self._last_evidence = ""
                    self._memo[key] = (self._predicate(call, predicate), self._last_evidence)
                value, found = self._memo[key]
                evidence = evidence or found
            else:
                value = self._predicate(call, predicate)
            if value is False:
                return False, []
            if value is None:
                unknown.append(predicate)
                if not _ndim_choice(predicate):
                    return None, unknown
        device = self._device_ok(call, entry)
        if device is False:
            return False, []
        if device is None:
            unknown.append(Predicate("context", "device", "equals", entry.device))
        if entry.id in EXACT_SUM_ENTRIES and self.order.exact_sum(call):
            return False, []
        if entry.id in DUPLICATE_INDEX_ENTRIES and (self.order.constant_written(call) or self.distinct.at(call)):
            return False, []
        if entry.id in ONE_DIMENSIONAL:
            value = self._one_dimensional(call)
            if value is False:
                return False, []
            if value is None:
                unknown.append(Predicate("context", "input_ndim", "equals", 1))
        self._last_evidence = evidence
        return (None, unknown) if unknown else (True, [])

    def _holds(self, call: ApiCall, predicates, entry) -> bool | None:
        result: bool | None = True
        for predicate in predicates:
            value = self._predicate(call, predicate)
            if value is False:
                return False
            if value is None:
                result = None
        return result

    def _device_ok(self, call: ApiCall, entry: OpEntry) -> bool | None:
        if entry.device == "any":
            return True
        if entry.device == "cuda" and self.grad.data_reason(call.site.node):
            return False  # data-pipeline code works on CPU tensors
        kind = self._device_of(call)
        if entry.device == "cuda":
            return kind != te.CPU
        return True if kind == te.CPU else (False if kind == te.CUDA else None)

    # -- predicates -------------------------------------------------------------------------
    def _predicate(self, call: ApiCall, p: Predicate) -> bool | None:
        if p.subject in ("arg", "ctor_arg"):
            return self._arg_predicate(call, p)
        name = p.name
        if name == "requires_grad":
            return self.requires_grad.holds(call) == p.value
        if name in ("det_mode_at_forward", "det_mode_at_backward"):
            return True  # how the deterministic alternative is reached, not whether the op is used
        if name == "torchscript":
            return self.grad.torchscript(call.site.node) == p.value
        if name == "cudnn_ctc_path":
            return p.value is False  # the native path unless int32 targets etc. are shown: assumed
        if name == "index_kind":
            return None
        if name == "device":
            kind = self._device_of(call)
            return None if kind is None else kind == p.value
        if name == "input_ndim":
            dims = f"{p.value} or more" if p.test == "min" else " or ".join(map(str, p.value))
            return self._over_inputs(call, lambda e: _ndim_test(te.ndim_range(e, self.index), p), f"{dims} dims")
        if name == "input_dtype":
            return self._over_inputs(call, lambda e: _dtype_test(te.dtype_kind(e, self.index), p.value), f"{p.value} dtype")
        if name == "input_layout":
            return self._over_inputs(call, lambda e: _layout_test(te.layout_kind(e, self.index), p.value), f"{p.value} layout")
        if name == "target_kind":
            return self._target_kind(call, p.value)
        return None

    def _device_of(self, call: ApiCall) -> str | None:
        key = (id(call.site.node), "device-of")
        if key not in self._memo:
            kinds = {te.device_kind(e, self.index) for e in call.inputs()}
            self._memo[key] = kinds.pop() if len(kinds) == 1 else None
        return self._memo[key]

    def _over_inputs(self, call: ApiCall, test, what: str) -> bool | None:
        inputs = call.inputs()
        results = [(test(e), e) for e in inputs]
        for result, expr in results:
            if result is True:
                if call.form == "module":
                    row = self._row(expr)
                    self._last_evidence = f"called at line {row} on an input with {what}" if row else ""
                return True
        if results and all(r is False for r, _ in results):
            return False
        return None

    def _target_kind(self, call: ApiCall, wanted: str) -> bool | None:
        # Class indices unless the target is shown to be floating (probabilities): the usual case.
        kinds = {te.dtype_kind(t, self.index) for t in call.targets()}
        kind = "probabilities" if kinds == {te.FLOATING} else "class_indices"
        if kinds and te.FLOATING in kinds and len(kinds) > 1:
            return None
        return kind == wanted

    def _one_dimensional(self, call: ApiCall) -> bool | None:
        one = Predicate("context", "input_ndim", "in", (1,))
        return self._over_inputs(call, lambda e: _ndim_test(te.ndim_range(e, self.index), one), "1 dim")

    def _arg_predicate(self, call: ApiCall, p: Predicate) -> bool | None:
        node = call.site.node
        if p.name in self._forced:
            return passes(p, self._forced[p.name])
        expr = argument(node, None if p.keyword_only else p.pos, p.name)
        if expr is UNKNOWN:
            return None
        if expr is ABSENT:
            if p.test == "present":
                return p.value is False
            if p.has_default:
                return passes(p, p.default)
            if p.test == "not_equals":
                return True  # the signature's default (None) differs from any value tested against
            return False
        if p.test == "type":
            if p.value == "Tensor":
                if is_tensor(expr, self.index, node):
                    return True
                values = self.values.of(expr)
                return False if values is not None and all(isinstance(v, (int, float)) for v in values) else None
            if p.value == "Scalar":
                values = self.values.of(expr)
                if values is not None:
                    return all(isinstance(v, (int, float)) for v in values)
                return False if is_tensor(expr, self.index, node) else None
            return None
        if p.test == "len":
            length = display_length(self.values.flow, expr)
            if length is not None:  # `[left, right, top, bottom]`: 4 values whatever they are
                return length == p.value
        values = self.values.of(expr)
        if p.test == "present":
            if values is not None:
                if values == frozenset({None}):
                    return p.value is False
                if None not in values:
                    return p.value is True
                return None
            if p.name in NEVER_NONE or is_tensor(expr, self.index, node):
                return p.value is True
            return None
        if values is None:
            return None
        results = {passes(p, v) for v in values}
        if None in results or len(results) != 1:
            return None
        return results.pop()

    # -- presentation -----------------------------------------------------------------------
    def _row(self, node: cst.CSTNode) -> int | None:
        try:
            return self.index.source.span(node)[0]
        except Exception:  # a node the source cannot place
            return None

    def _shown(self, call: ApiCall, group) -> str:
        """The call as written when it is short, else its callee and the arguments that matter."""
        code = self.index.module.code_for_node
        whole = " ".join(code(call.site.node).split())
        if len(whole) <= 60:
            return whole
        callee = " ".join(code(call.site.node.func).split())
        if len(callee) > 40:
            callee = "..." + callee[-37:]
        shown = []
        for _, api, _ in group:
            for p in api.when:
                if p.subject not in ("arg", "ctor_arg"):
                    continue
                expr = argument(call.site.node, None if p.keyword_only else p.pos, p.name)
                if expr is ABSENT or expr is UNKNOWN or expr is None:
                    continue
                text = " ".join(code(expr).split())
                text = text if len(text) <= 24 else text[:21] + "..."
                item = f"{p.name}={text}"
                if item not in shown:
                    shown.append(item)
        first = [] if call.form != "function" else [a for a in call.site.node.args[:1] if a.keyword is None and not a.star]
        lead = " ".join(code(first[0].value).split()) if first else ""
        lead = lead if 0 < len(lead) <= 30 and not any(item.startswith(lead) for item in shown) else ""
        parts = ([lead] if lead else []) + ["..."] + shown
        return f"{callee}({', '.join(parts)})"


def _ndim_choice(p: Predicate) -> bool:
    """An `input_ndim in (...)` test: unknown ones of a rule's entries may together cover every case."""
    return p.name == "input_ndim" and p.test == "in"


def _ndim_test(found, p: Predicate) -> bool | None:
    if found is None:
        return None
    lo, hi = found
    if p.test == "min":
        if lo >= p.value:
            return True
        return False if hi is not None and hi < p.value else None
    allowed = set(p.value) if p.test == "in" else {p.value}
    if hi is not None and set(range(lo, hi + 1)) <= allowed:
        return True
    if hi is not None and not set(range(lo, hi + 1)) & allowed:
        return False
    if hi is None and lo > max(allowed):
        return False
    return None


def _dtype_test(kind: str | None, wanted: str) -> bool | None:
    if kind is None:
        return None
    if wanted == "floating":
        return kind == te.FLOATING
    if wanted == "floating_or_complex":
        return kind in (te.FLOATING, te.COMPLEX)
    if wanted == "integer":
        return kind == te.INTEGER
    if wanted == "quantized":
        return kind == te.QUANTIZED
    return None


def _layout_test(kind: str | None, wanted: str) -> bool | None:
    return None if kind is None else kind == wanted
