"""TRP207 compile-autotune-with-determinism: beyond the rule's own examples, what asks for tuning
(compile modes and options, config switches, patches, environment variables), what stops it
(deterministic mode, not Inductor's flag alone), branches and helpers as TRP201 reads them, the
fix, and the language server's kept calls carrying a tuner."""

from __future__ import annotations

import pytest

from conftest import lint_project, reported, write_project
from session_checks import analysed_like_fresh
from torchrepro_lint.config import load_config
from torchrepro_lint.fixes.runner import fix_sources
from torchrepro_lint.server.session import Workspace

MAIN = """import torch
{imports}

def main(args):
    {claim}
    model = torch.nn.Linear(64, 64)
    {compile}
    {after}

if __name__ == "__main__":
    main(None)
"""
COMPILE_ROW = 7  # the row of `{compile}` in MAIN


def rows(tmp_path, files, code="TRP207"):
    tmp_path.mkdir(parents=True, exist_ok=True)
    result = lint_project(tmp_path, files, {"select": [code]})
    assert not result.errors, result.errors
    return sorted((name, row) for name, row, _ in reported(result, tmp_path, code))


def messages(tmp_path, files):
    tmp_path.mkdir(parents=True, exist_ok=True)
    result = lint_project(tmp_path, files, {"select": ["TRP207"]})
    return [f.message for f in result.findings if f.code == "TRP207"]


def script(claim="torch.backends.cudnn.deterministic = True", compile='model = torch.compile(model, mode="max-autotune")',
           after="pass", imports=""):
    return MAIN.format(claim=claim, compile=compile, after=after, imports=imports)


# -- what asks for tuning -----------------------------------------------------------------
@pytest.mark.parametrize(
    "call",
    [
        'model = torch.compile(model, mode="max-autotune")',
        'model = torch.compile(model, mode="max-autotune-no-cudagraphs", fullgraph=True)',
        'model = torch.compile(model, backend="inductor", mode="max-autotune")',
        'model = torch.compile(model, options={"max_autotune": True})',
        'model = torch.compile(model, options={"max-autotune": True, "epilogue_fusion": True})',
        'model = torch.compile(model, options={"coordinate_descent_tuning": True})',
        'model = torch.compile(model, options={"max_autotune_gemm": True})',
        "model = torch.compile(model, options=dict(max_autotune=True))",
        'model = torch.compile(model, mode=None, options={"max_autotune": True})',
        'model.compile(mode="max-autotune")',
    ],
)
def test_compile_calls_that_tune_are_reported(tmp_path, call):
    assert rows(tmp_path, {"train.py": script(compile=call)}) == [("train.py", COMPILE_ROW)]


@pytest.mark.parametrize(
    "call",
    [
        "model = torch.compile(model)",
        'model = torch.compile(model, mode="default")',
        'model = torch.compile(model, mode="reduce-overhead")',
        'model = torch.compile(model, options={"max_autotune": False})',
        'model = torch.compile(model, options={"max_autotune_pointwise": True})',
        'model = torch.compile(model, options={"triton.cudagraphs": True})',
        'model = torch.compile(model, options={"max_autotune": True, "deterministic": True})',
        'model = torch.compile(model, options={"max_autotune": True, "deterministic": args.det})',
        'model = torch.compile(model, options={"max_autotune": True, **args.extra})',
        "model = torch.compile(model, options=args.options)",
        "model = torch.compile(model, mode=args.mode)",
        'model = torch.compile(model, backend="aot_eager", mode="max-autotune")',
        'model = torch.compile(model, backend=args.backend, mode="max-autotune")',
        'model = torch.compile(model, mode="max-autotune", disable=True)',
        'model = torch.compile(model, mode="max-autotune", options={"max_autotune": True})',  # raises
        'pattern = re.compile("max-autotune")',
    ],
)
def test_compile_calls_that_do_not_tune_or_cannot_be_read_are_not(tmp_path, call):
    assert rows(tmp_path, {"train.py": script(compile=call, imports="import re")}) == []


def test_a_mode_bound_to_a_literal_is_read(tmp_path):
    local = 'mode = "max-autotune"\n    model = torch.compile(model, mode=mode)'
    assert rows(tmp_path / "a", {"train.py": script(compile=local)}) == [("train.py", COMPILE_ROW + 1)]
    helper = """import torch

def build(model, mode):
    return torch.compile(model, mode=mode)

def main():
    torch.backends.cudnn.deterministic = True
    build(torch.nn.Linear(8, 8), "max-autotune-no-cudagraphs")
    build(torch.nn.Linear(8, 8), "reduce-overhead")

if __name__ == "__main__":
    main()
"""
    assert rows(tmp_path / "b", {"train.py": helper}) == [("train.py", 4)]
    message = messages(tmp_path / "c", {"train.py": helper})[0]
    assert '`mode="max-autotune-no-cudagraphs"`' in message
    other = helper.replace('"max-autotune-no-cudagraphs"', '"default"')
    assert rows(tmp_path / "d", {"train.py": other}) == []


def test_a_compile_decorator_is_reported_where_it_is(tmp_path):
    source = """import torch

@torch.compile(mode="max-autotune")
def step(x):
    return x @ x

if __name__ == "__main__":
    torch.backends.cudnn.deterministic = True
    step(torch.ones(4, 4))
"""
    assert rows(tmp_path / "a", {"train.py": source}) == [("train.py", 3)]
    plain = source.replace('@torch.compile(mode="max-autotune")', "@torch.compile")
    assert rows(tmp_path / "b", {"train.py": plain}) == []


@pytest.mark.parametrize(
    "imports,switch",
    [
        ("import torch._inductor.config", "torch._inductor.config.max_autotune = True"),
        ("from torch._inductor import config", "config.max_autotune_gemm = True"),
        ("import torch._inductor.config as inductor_config", "inductor_config.coordinate_descent_tuning = True"),
        ("from torch._inductor import config as ic", "ic.max_autotune = args.tune"),
    ],
)
def test_config_switches_are_reported_at_the_assignment(tmp_path, imports, switch):
    source = script(compile="model = torch.compile(model)", after=switch, imports=imports)
    assert rows(tmp_path, {"train.py": source}) == [("train.py", COMPILE_ROW + 1)]


@pytest.mark.parametrize(
    "switch",
    [
        "torch._inductor.config.max_autotune_pointwise = True",
        "torch._inductor.config.max_autotune = False",
        "torch._inductor.config.max_autotune = True\n    torch._inductor.config.max_autotune = False",
        "torch._inductor.config.deterministic = True",
        "torch._inductor.config.triton.cudagraphs = True",
    ],
)
def test_switches_that_do_not_tune_or_are_turned_off_are_not(tmp_path, switch):
    source = script(compile="model = torch.compile(model)", after=switch, imports="import torch._inductor.config")
    assert rows(tmp_path, {"train.py": source}) == []


def test_one_switch_off_leaves_the_other_on(tmp_path):
    after = (
        "torch._inductor.config.max_autotune = True\n"
        "    torch._inductor.config.coordinate_descent_tuning = True\n"
        "    torch._inductor.config.max_autotune = False"
    )
    source = script(compile="model = torch.compile(model)", after=after, imports="import torch._inductor.config")
    assert rows(tmp_path, {"train.py": source}) == [("train.py", COMPILE_ROW + 2)]


def test_every_place_is_reported_once(tmp_path):
    after = 'loss_fn = torch.compile(torch.nn.MSELoss(), mode="max-autotune")'
    source = script(after=after)
    assert rows(tmp_path, {"train.py": source}) == [("train.py", COMPILE_ROW), ("train.py", COMPILE_ROW + 1)]


# -- config.patch ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "patch",
    [
        "torch._inductor.config.patch(max_autotune=True)",
        'torch._inductor.config.patch({"coordinate_descent_tuning": True})',
        'torch._inductor.config.patch("max_autotune_gemm", True)',
    ],
)
def test_a_patch_around_the_first_call_is_reported(tmp_path, patch):
    after = f"with {patch}:\n        model(torch.ones(2, 64))"
    source = script(compile="model = torch.compile(model)", after=after, imports="import torch._inductor.config")
    assert rows(tmp_path, {"train.py": source}) == [("train.py", COMPILE_ROW + 1)]


def test_a_patch_that_tunes_nothing_is_not(tmp_path):
    after = 'with torch._inductor.config.patch(max_autotune=False, epilogue_fusion=True):\n        model(torch.ones(2, 64))'
    source = script(compile="model = torch.compile(model)", after=after, imports="import torch._inductor.config")
    assert rows(tmp_path, {"train.py": source}) == []


def test_a_patch_decorator_counts_where_the_function_is_called(tmp_path):
    source = """import torch
import torch._inductor.config

model = torch.compile(torch.nn.Linear(8, 8))

@torch._inductor.config.patch(coordinate_descent_tuning=True)
def step(x):
    return model(x)

if __name__ == "__main__":
    torch.backends.cudnn.deterministic = True
    {call}
"""
    assert rows(tmp_path / "a", {"train.py": source.format(call="step(torch.ones(2, 8))")}) == [("train.py", 6)]
    assert rows(tmp_path / "b", {"train.py": source.format(call="pass")}) == []


# -- environment variables --------------------------------------------------------------------
ENV_SCRIPT = """import os
{early}
import torch
{late}

def main():
    torch.backends.cudnn.deterministic = True
    model = torch.compile(torch.nn.Linear(8, 8))

if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize(
    "setting",
    [
        'os.environ["TORCHINDUCTOR_MAX_AUTOTUNE"] = "1"',
        'os.environ["TORCHINDUCTOR_MAX_AUTOTUNE_GEMM"] = "1"',
        'os.environ.setdefault("TORCHINDUCTOR_COORDINATE_DESCENT_TUNING", "1")',
    ],
)
def test_a_variable_set_before_torch_is_imported_is_reported(tmp_path, setting):
    assert rows(tmp_path, {"train.py": ENV_SCRIPT.format(early=setting, late="")}) == [("train.py", 2)]


@pytest.mark.parametrize(
    "early,late",
    [
        ("", 'os.environ["TORCHINDUCTOR_MAX_AUTOTUNE"] = "1"'),  # maybe too late: not surely read
        ('os.environ["TORCHINDUCTOR_MAX_AUTOTUNE"] = "0"', ""),
        ('os.environ["TORCHINDUCTOR_MAX_AUTOTUNE_POINTWISE"] = "1"', ""),
        ('os.putenv("TORCHINDUCTOR_MAX_AUTOTUNE", "1")', ""),  # not in os.environ: config.py never sees it
        ("import numpy\nos.environ[\"TORCHINDUCTOR_MAX_AUTOTUNE\"] = \"1\"", ""),
    ],
)
def test_a_variable_that_may_not_be_read_is_not(tmp_path, early, late):
    assert rows(tmp_path, {"train.py": ENV_SCRIPT.format(early=early, late=late)}) == []


def test_a_variable_set_in_an_imported_module_is_not(tmp_path):
    # (Lightning imports torch._dynamo, which reads Inductor's config before `settings` runs)
    files = {
        "train.py": ENV_SCRIPT.format(early="import lightning\nimport settings", late=""),
        "settings.py": 'import os\nos.environ["TORCHINDUCTOR_MAX_AUTOTUNE"] = "1"\n',
    }
    assert rows(tmp_path, files) == []


# -- what stops the tuning, and what does not ---------------------------------------------------
@pytest.mark.parametrize(
    "claim",
    [
        "torch.use_deterministic_algorithms(True)",
        "torch.use_deterministic_algorithms(True, warn_only=True)",
        "torch.backends.cudnn.deterministic = True\n    torch.use_deterministic_algorithms(True)",
        'torch.set_deterministic_debug_mode("error")',
    ],
)
def test_deterministic_mode_is_not_reported(tmp_path, claim):
    assert rows(tmp_path, {"train.py": script(claim=claim)}) == []


def test_deterministic_mode_after_the_compile_still_counts(tmp_path):
    # Inductor reads its config when the compiled model first runs
    source = script(after="torch.use_deterministic_algorithms(True)")
    assert rows(tmp_path, {"train.py": source}) == []


@pytest.mark.parametrize(
    "setting",
    [
        "torch._inductor.config.deterministic = True",
        "with torch._inductor.config.patch(deterministic=True):\n        model(torch.ones(2, 64))",
    ],
)
def test_inductor_flag_alone_before_or_after_the_compile_is_reported_and_explained(tmp_path, setting):
    for name, (claim, after) in {"before": (f"torch.backends.cudnn.deterministic = True\n    {setting}", "pass"),
                                 "after": ("torch.backends.cudnn.deterministic = True", setting)}.items():
        source = script(claim=claim, after=after, imports="import torch._inductor.config")
        found = rows(tmp_path / name, {"train.py": source})
        assert len(found) == 1
        [message] = messages(tmp_path / (name + "-m"), {"train.py": source})
        assert "does not last" in message


def test_without_a_claim_nothing_is_reported(tmp_path):
    assert rows(tmp_path, {"train.py": script(claim="torch.manual_seed(0)")}) == []
    assert messages(tmp_path / "b", {"train.py": script()})[0].count("does not last") == 0


@pytest.mark.parametrize(
    "claim,expected",
    [
        ("from mmcv.runner import set_random_seed\n    set_random_seed(0, deterministic=True)", [("train.py", COMPILE_ROW + 1)]),
        ('import lightning as L\n    L.Trainer(deterministic=True)', []),
        ("from transformers import enable_full_determinism\n    enable_full_determinism(0)", []),
        ("from transformers import set_seed\n    set_seed(0, deterministic=True)", []),
    ],
)
def test_framework_helpers_claim_as_for_trp201(tmp_path, claim, expected):
    assert rows(tmp_path, {"train.py": script(claim=claim)}) == expected


# -- branches and helpers, as TRP201 ---------------------------------------------------------------
def test_a_tuner_under_a_condition_with_an_unconditional_claim_is_reported(tmp_path):
    compile = 'if args.fast:\n        model = torch.compile(model, mode="max-autotune")'
    assert rows(tmp_path, {"train.py": script(compile=compile)}) == [("train.py", COMPILE_ROW + 1)]


def test_independent_runtime_flags_are_not_reported(tmp_path):
    claim = "if args.deterministic:\n        torch.backends.cudnn.deterministic = True"
    compile = 'if args.fast:\n        model = torch.compile(model, mode="max-autotune")'
    assert rows(tmp_path, {"train.py": script(claim=claim, compile=compile)}) == []


def test_a_tuner_on_the_other_arm_of_the_claim_is_not_reported(tmp_path):
    claim = (
        "if args.deterministic:\n        torch.backends.cudnn.deterministic = True\n"
        '    else:\n        model = torch.compile(torch.nn.Linear(8, 8), mode="max-autotune")'
    )
    assert rows(tmp_path, {"train.py": script(claim=claim, compile="pass")}) == []


HELPERS = """import torch
import torch._inductor.config


def make_deterministic(cfg):
    torch.backends.cudnn.deterministic = True
    if cfg.strict:
        torch.use_deterministic_algorithms(True)


def fast_kernels():
    torch._inductor.config.coordinate_descent_tuning = True


def setup(cfg):
    torch._inductor.config.deterministic = True
"""

TRAIN = """import torch
import helpers


def main(cfg):
    helpers.make_deterministic(cfg)
    {setup}
    helpers.fast_kernels()
    model = torch.compile(torch.nn.Linear(8, 8))


if __name__ == "__main__":
    main(None)
"""


def test_helpers_claim_and_tune_across_modules(tmp_path):
    files = {"helpers.py": HELPERS, "train.py": TRAIN.format(setup="pass")}
    # reported where `cfg.strict` is false: that path claims without deterministic mode
    assert rows(tmp_path / "a", files) == [("helpers.py", 12)]
    files = {"helpers.py": HELPERS, "train.py": TRAIN.format(setup="helpers.setup(cfg)")}
    assert rows(tmp_path / "b", files) == [("helpers.py", 12)]
    [message] = messages(tmp_path / "c", files)
    assert "does not last" in message and "helpers.py:6" in message


def test_a_spawned_process_is_a_run_of_its_own(tmp_path):
    source = """import torch
import torch.multiprocessing as mp


def worker(rank):
    torch.backends.cudnn.deterministic = True
    model = torch.compile(torch.nn.Linear(8, 8), mode="max-autotune")


if __name__ == "__main__":
    torch.use_deterministic_algorithms(True)
    mp.spawn(worker, nprocs=2)
"""
    assert rows(tmp_path, {"train.py": source}) == [("train.py", 7)]


# -- the fix -------------------------------------------------------------------------------------
def fixed(tmp_path, files, select):
    write_project(tmp_path, files, {"select": select})
    sources = {tmp_path / name: text for name, text in files.items()}
    outcome = fix_sources(sources, load_config([tmp_path]), unsafe=True)
    return {p.relative_to(tmp_path).as_posix(): t for p, t in outcome.fixed.items()}, outcome.result


def test_the_fix_and_trp202s_add_one_line(tmp_path):
    source = script()
    after, result = fixed(tmp_path, {"train.py": source}, ["TRP202", "TRP207"])
    assert after["train.py"].count("use_deterministic_algorithms(True)") == 1
    assert not [f for f in result.findings if f.code in ("TRP202", "TRP207")]


def test_the_fix_goes_before_the_compile_where_the_claim_is_elsewhere(tmp_path):
    files = {
        "train.py": 'import torch as T\nimport helpers\n\nif __name__ == "__main__":\n    helpers.claim()\n'
        '    model = T.compile(T.nn.Linear(8, 8), mode="max-autotune")\n',
        "helpers.py": "import torch\n\ndef claim():\n    torch.backends.cudnn.deterministic = True\n",
    }
    after, result = fixed(tmp_path, files, ["TRP207"])
    assert after == {
        "train.py": 'import torch as T\nimport helpers\n\nif __name__ == "__main__":\n    helpers.claim()\n'
        '    T.use_deterministic_algorithms(True)\n    model = T.compile(T.nn.Linear(8, 8), mode="max-autotune")\n'
    }
    assert not [f for f in result.findings if f.code == "TRP207"]


def test_no_fix_for_a_decorator_or_a_with_item_where_no_claim_is_before(tmp_path):
    source = """import torch
import torch._inductor.config

@torch.compile(mode="max-autotune")
def step(x):
    return x

def main():
    with torch._inductor.config.patch(max_autotune=True):
        step(torch.ones(2))
    torch.backends.cudnn.deterministic = True

if __name__ == "__main__":
    main()
"""
    result = lint_project(tmp_path, {"train.py": source}, {"select": ["TRP207"]})
    found = [f for f in result.findings if f.code == "TRP207"]
    assert [f.row for f in found] == [4, 9]
    assert all(f.fix is None for f in found)


# -- the language server: a tuner carried through kept calls ----------------------------------------
SERVER_HELPERS = """import torch
import torch._inductor.config


def tune():
    torch._inductor.config.max_autotune = True
"""

SERVER_MAIN = """import torch
import helpers


def main(args):
    torch.backends.cudnn.deterministic = True
    model = torch.nn.Linear(8, 8)
    helpers.tune()
    model = torch.compile(model)


if __name__ == "__main__":
    main(None)
"""


def test_an_edited_session_reports_the_tuner_where_a_fresh_one_does(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.torchrepro-lint]\nselect = ["TRP207"]\n')
    workspace = Workspace(tmp_path, persistent=False)
    paths = {}
    for name, text in {"helpers.py": SERVER_HELPERS, "train.py": SERVER_MAIN}.items():
        path = paths[name] = (tmp_path / name).resolve()
        path.write_text(text)
        session = workspace.open(path, text)
    train, helpers = paths["train.py"], paths["helpers.py"]
    deterministic = SERVER_MAIN.replace("    model = torch.compile", "    torch.use_deterministic_algorithms(True)\n    model = torch.compile")
    steps = [
        (train, SERVER_MAIN),
        (train, SERVER_MAIN.replace("    model = torch.nn", "    x = 1\n    model = torch.nn")),
        (train, deterministic),
        (train, SERVER_MAIN + "# edit\n"),
        (helpers, SERVER_HELPERS.replace("= True", "= False")),
        (helpers, SERVER_HELPERS),
        (train, SERVER_MAIN),
    ]
    seen = []
    for path, text in steps:
        session.buffers[path] = text
        found = analysed_like_fresh(tmp_path, session)
        seen.append([(p.name, f.row) for p, findings in found.items() for f in findings if f.code == "TRP207"])
    expected = [("helpers.py", 6)]
    assert seen == [expected, expected, [], expected, [], expected, expected]
