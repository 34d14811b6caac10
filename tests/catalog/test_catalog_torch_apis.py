"""Every API the catalogue names exists in the installed torch, with the arguments its
predicates point at (name, position, keyword-only, default)."""

from __future__ import annotations

import importlib
import inspect

import pytest

from torchrepro_lint.catalog import ApiRecord, Predicate, load_catalog

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:Failed to initialize NumPy")

CAT = load_catalog()
OP_APIS = [a for e in CAT.entries for a in e.apis]
TRAP_APIS = [a for n in CAT.not_flagged for a in n.apis]
SPECIAL_NAMES = sorted({name for s in CAT.special for name in s.apis} |
                       {name for s in CAT.special for name in (s.raw or {}).get("traced_apis", ())})  # fmt: skip


def resolve(name: str):
    """Resolve a dotted name, importing submodules on the way (torch.nn.attention.flex_attention...)."""
    parts = name.split(".")
    obj = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], start=1):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            obj = importlib.import_module(".".join(parts[: i + 1]))
    return obj


def test_resolve_rejects_missing_names():
    with pytest.raises((AttributeError, ModuleNotFoundError)):
        resolve("torch.nn.NoSuchModule")
    with pytest.raises((AttributeError, ModuleNotFoundError)):
        resolve("torch.Tensor.no_such_method_")


@pytest.mark.parametrize("api", OP_APIS + TRAP_APIS, ids=lambda a: f"{a.entry_id}:{a.name}")
def test_api_exists_with_its_kind(api: ApiRecord):
    obj = resolve(api.name)
    if api.kind == "module":
        assert inspect.isclass(obj) and issubclass(obj, torch.nn.Module), api.name
    elif api.kind == "method":
        owner = resolve(api.name.rsplit(".", 1)[0])
        assert inspect.isclass(owner) and api.name.rsplit(".", 1)[1] in dir(owner), api.name
    else:
        assert callable(obj) and not inspect.isclass(obj), api.name


@pytest.mark.parametrize("name", SPECIAL_NAMES)
def test_compile_and_environment_apis_exist(name):
    assert callable(resolve(name))


# ----------------------------------------------------------------------------- signatures


def _python_params(api: ApiRecord, pred: Predicate):
    """Parameters of the Python-level signature, or None for builtins."""
    obj = resolve(api.name)
    if pred.subject == "ctor_arg":
        params = list(inspect.signature(obj.__init__).parameters.values())[1:]
        return [params]
    from torch._jit_internal import boolean_dispatched

    if obj in boolean_dispatched:  # F.max_pool3d & co: both implementations must agree
        d = boolean_dispatched[obj]
        return [list(inspect.signature(d[k]).parameters.values()) for k in ("if_true", "if_false")]
    try:
        params = list(inspect.signature(obj).parameters.values())
    except (TypeError, ValueError):
        return None
    if params and params[0].kind is params[0].VAR_POSITIONAL:
        return None
    return [params]


def _schema_params(api: ApiRecord):
    """ATen schemas of a builtin: [(name, kwarg_only, default)] per overload, self dropped for methods."""
    op = api.name.rsplit(".", 1)[1]
    schemas = torch._C._jit_get_schemas_for_operator(f"aten::{op}")
    assert schemas, f"no aten schema for {api.name}"
    out = []
    for s in schemas:
        args = [(a.name, a.kwarg_only, a.default_value) for a in s.arguments if a.name != "out"]
        out.append(args[1:] if api.kind == "method" else args)
    return out


def _check_python(params, pred: Predicate) -> str | None:
    names = [p.name for p in params]
    if pred.name not in names:
        return f"no parameter {pred.name!r} in {names}"
    i = names.index(pred.name)
    p = params[i]
    if pred.keyword_only:
        if p.kind is not p.KEYWORD_ONLY:
            return f"{pred.name} is not keyword-only"
    elif i != pred.pos or p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
        return f"{pred.name} is at position {i} ({p.kind}), catalogue says {pred.pos}"
    if pred.has_default and p.default is not p.empty and p.default != pred.default:
        return f"default of {pred.name} is {p.default!r}, catalogue says {pred.default!r}"
    return None


def _check_schema(overloads, pred: Predicate) -> str | None:
    matches, problems = 0, []
    for args in overloads:
        names = [a[0] for a in args]
        if pred.name not in names:
            continue
        i = names.index(pred.name)
        _, kwarg_only, default = args[i]
        if pred.keyword_only != kwarg_only or (not pred.keyword_only and i != pred.pos):
            problems.append(f"{pred.name} at {i} kwarg_only={kwarg_only}")
        elif pred.has_default and default is not None and default != pred.default:
            problems.append(f"default {default!r}")
        else:
            matches += 1
    if not matches:
        return f"no overload matches: {problems or 'argument absent'}"
    return None


PRED_CASES = [
    (api, pred)
    for api in OP_APIS + TRAP_APIS
    for pred in api.when
    if pred.subject in ("arg", "ctor_arg")
]


@pytest.mark.parametrize(
    ("api", "pred"), PRED_CASES, ids=[f"{a.entry_id}:{a.name}:{p.name}" for a, p in PRED_CASES]
)
def test_predicate_argument_matches_signature(api: ApiRecord, pred: Predicate):
    assert pred.keyword_only or pred.pos is not None, "a positional argument needs pos"
    signatures = _python_params(api, pred)
    if signatures is None:
        problem = _check_schema(_schema_params(api), pred)
    else:
        problem = next((p for p in (_check_python(s, pred) for s in signatures) if p), None)
    assert problem is None, f"{api.name}: {problem}"


def test_signature_check_catches_a_wrong_position():
    # The research file puts EmbeddingBag.from_pretrained's mode at position 4; it is 5.
    api = ApiRecord("torch.nn.EmbeddingBag.from_pretrained", "function", "x")
    wrong = Predicate("arg", "mode", "equals", "max", pos=4)
    right = Predicate("arg", "mode", "equals", "max", pos=5, default="mean")
    assert _check_python(_python_params(api, wrong)[0], wrong) is not None
    assert _check_python(_python_params(api, right)[0], right) is None
    builtin = ApiRecord("torch.Tensor.put_", "method", "x")
    assert _check_schema(_schema_params(builtin), Predicate("arg", "accumulate", "equals", True, pos=3)) is not None
    assert _check_schema(_schema_params(builtin), Predicate("arg", "accumulate", "equals", True, pos=2)) is None
