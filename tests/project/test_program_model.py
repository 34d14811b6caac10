"""The program model on cross-file cases: imports, entry points, helpers, branches, spawn."""

from __future__ import annotations

from conftest import reported


def codes(result, root):
    return {(name, row, code) for name, row, code in reported(result, root)}


# -- regression tests from trying the linter on real repositories ------------------------
def test_model_file_smoke_test_is_not_a_training_program(lint):
    files = {
        "run.py": "import torch\nfrom nets.tiny import TinyNet\n\nif __name__ == '__main__':\n    torch.manual_seed(0)\n    TinyNet()\n",
        "nets/__init__.py": "",
        "nets/tiny.py": (
            "import torch\nimport torch.nn as nn\n\nclass TinyNet(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.conv = nn.Conv2d(1, 2, 3)\n\n"
            "if __name__ == '__main__':\n    out = TinyNet()(torch.randn(1, 1, 8, 8))\n    print(out.shape)\n"
        ),
    }
    assert reported(lint(files, {"select": ["TRP101"]}), lint.root) == set()


def test_same_smoke_test_in_an_unimported_script_is_reported(lint):
    files = {
        "probe.py": (
            "import torch\nimport torch.nn as nn\n\nif __name__ == '__main__':\n"
            "    print(nn.Conv2d(1, 2, 3)(torch.randn(1, 1, 8, 8)).sum())\n"
        )
    }
    assert reported(lint(files, {"select": ["TRP101"]}), lint.root) == {("probe.py", 4, "TRP101")}


def test_smoke_test_in_a_distributed_package_is_library_code(lint):
    # A model zoo ships `blocks` (its pyproject says so); one block's self-check is imported by
    # nothing in the repository, yet it is still library code. Its `__main__.py` is a command.
    smoke = (
        "import torch\nimport torch.nn as nn\n\nif __name__ == '__main__':\n"
        "    print(nn.Linear(4, 2)(torch.randn(3, 4)).shape)\n"
    )
    files = {
        "pyproject.toml": '[project]\nname = "block-zoo"\n\n[tool.setuptools.packages.find]\ninclude = ["blocks*"]\n',
        "blocks/__init__.py": "",
        "blocks/mixer.py": smoke,
        "blocks/__main__.py": "import torch\nprint(torch.rand(2))\n",
        "block_zoo/__init__.py": "",
        "block_zoo/probe.py": smoke,
        "tools/__init__.py": "",
        "tools/probe.py": smoke,
    }
    assert reported(lint(files, {"select": ["TRP101"]}), lint.root) == {("blocks/__main__.py", 1, "TRP101"), ("tools/probe.py", 4, "TRP101")}


def test_imported_module_that_trains_in_its_main_block_is_reported(lint):
    files = {
        "app.py": "import trainer\n",
        "trainer.py": (
            "import torch\nimport torch.nn as nn\n\nif __name__ == '__main__':\n    net = nn.Linear(2, 2)\n"
            "    opt = torch.optim.SGD(net.parameters(), lr=0.1)\n"
        ),
    }
    assert reported(lint(files, {"select": ["TRP101"]}), lint.root) == {("trainer.py", 4, "TRP101")}


def test_example_input_for_tracing_and_pretrained_weights_are_not_randomness(lint):
    source = (
        "import torch\nimport torchvision\n\nbackbone = torchvision.models.resnet50(weights='DEFAULT')\n"
        "dummy = torch.randn(1, 3, 224, 224)\ntorch.onnx.export(backbone, dummy, 'r50.onnx')\n"
    )
    assert reported(lint({"export.py": source}, {"select": ["TRP101"]}), lint.root) == set()


def test_a_draw_used_beyond_tracing_still_counts(lint):
    source = (
        "import torch\n\nnoise = torch.randn(4)\ntraced = torch.jit.trace(torch.nn.Identity(), noise)\n"
        "print(noise.sum())\n"
    )
    assert reported(lint({"gen.py": source}, {"select": ["TRP101"]}), lint.root) == {("gen.py", 1, "TRP101")}


def test_helper_condition_with_and_is_decided_by_the_literal_keyword(lint):
    helper = (
        "import torch\n\ndef init_seeds(seed=0, deterministic=False):\n    torch.manual_seed(seed)\n"
        "    if deterministic and torch.__version__ >= '1.12':\n        torch.use_deterministic_algorithms(True)\n"
    )
    on = {"utils.py": helper, "train.py": "from utils import init_seeds\n\nif __name__ == '__main__':\n    init_seeds(1, deterministic=True)\n    x = torch.ones(1).cuda()\n"}
    assert reported(lint(on, {"select": ["TRP205"]}), lint.root) == set()


def test_helper_condition_with_and_false_keyword_claims_nothing(tmp_path):
    from conftest import lint_project

    helper = (
        "import torch\n\ndef init_seeds(seed=0, deterministic=False):\n    torch.manual_seed(seed)\n"
        "    if deterministic and torch.__version__ >= '1.12':\n        torch.use_deterministic_algorithms(True)\n"
    )
    off = {"utils.py": helper, "train.py": "import torch\nfrom utils import init_seeds\n\nif __name__ == '__main__':\n    init_seeds(1)\n    x = torch.ones(1).cuda()\n"}
    result = lint_project(tmp_path, off, {"select": ["TRP205"]})
    assert reported(result, tmp_path) == {("train.py", 5, "TRP205")}


# -- imports and entry points ---------------------------------------------------------------
SEEDING_PACKAGE = {
    "proj/__init__.py": "",
    "proj/seeding.py": "import torch\n\ndef fix_seed(s):\n    torch.manual_seed(s)\n",
    "proj/cli.py": "import torch.nn as nn\nfrom .seeding import fix_seed\n\ndef main():\n    fix_seed(0)\n    nn.Linear(2, 2)\n",
}


def test_relative_import_inside_a_package_is_followed(lint):
    files = {**SEEDING_PACKAGE, "proj/__main__.py": "from .cli import main\n\nmain()\n"}
    assert reported(lint(files, {"select": ["TRP101"]}), lint.root) == set()


def test_dunder_main_without_seed_is_a_program(lint):
    files = {**SEEDING_PACKAGE, "proj/__main__.py": "import torch.nn as nn\n\nnn.Linear(3, 3)\n"}
    assert reported(lint(files, {"select": ["TRP101"]}), lint.root) == {("proj/__main__.py", 1, "TRP101")}


def test_console_script_target_is_an_entry_point(lint):
    from torchrepro_lint.config import load_config
    from torchrepro_lint.pipeline.engine import lint_paths

    files = {"proj/__init__.py": "", "proj/tool.py": "import torch\n\ndef run():\n    return torch.rand(3)\n"}
    assert reported(lint(files, {"select": ["TRP101"]}), lint.root) == set()  # no script declared: a library
    lint.root.joinpath("pyproject.toml").write_text(
        '[project]\nname = "fixture"\n\n[project.scripts]\ntool = "proj.tool:run"\n\n'
        '[tool.torchrepro-lint]\nselect = ["TRP101"]\n'
    )
    result = lint_paths([lint.root], load_config([lint.root]))
    assert reported(result, lint.root) == {("proj/tool.py", 3, "TRP101")}


def test_script_imports_a_sibling_module_as_python_train_py_allows(lint):
    files = {
        "scripts/train.py": "import torch.nn as nn\nimport helpers\n\nif __name__ == '__main__':\n    helpers.seed(3)\n    nn.Linear(1, 1)\n",
        "scripts/helpers.py": "import torch\n\ndef seed(s):\n    torch.manual_seed(s)\n",
    }
    assert reported(lint(files, {"select": ["TRP101"]}), lint.root) == set()


def test_main_block_of_an_imported_module_is_not_part_of_the_importer(lint):
    files = {
        "train.py": "import torch\nimport torch.nn as nn\nimport tools\n\nif __name__ == '__main__':\n    torch.manual_seed(0)\n    nn.Linear(2, 2).cuda()\n",
        "tools.py": "import torch\n\nif __name__ == '__main__':\n    torch.use_deterministic_algorithms(True)\n",
    }
    # tools' guard does not run when imported, so train.py never claims determinism.
    assert reported(lint(files, {"select": ["TRP205"]}), lint.root) == {("train.py", 6, "TRP205")}


def test_module_level_code_of_an_imported_module_is_part_of_the_program(lint):
    files = {
        "train.py": "import torch\nimport torch.nn as nn\nimport setup_env\n\nif __name__ == '__main__':\n    torch.manual_seed(0)\n    nn.Linear(2, 2).cuda()\n",
        "setup_env.py": "import torch\n\ntorch.use_deterministic_algorithms(True)\n",
    }
    assert reported(lint(files, {"select": ["TRP205"]}), lint.root) == set()


def test_guardless_script_imported_by_another_module_is_a_library(lint):
    files = {
        "common.py": "import torch\n\nTABLE = torch.rand(3)\n",
        "use.py": "import common\n\ndef f():\n    return common.TABLE\n",
    }
    assert reported(lint(files, {"select": ["TRP101"]}), lint.root) == set()


# -- calls: methods, instances, aliases, shadowing -----------------------------------------
def test_methods_instances_and_super_are_followed(lint):
    source = """import torch
import torch.nn as nn

class Base:
    def __init__(self):
        self.prepare()

    def prepare(self):
        torch.manual_seed(0)

class Runner(Base):
    def __init__(self):
        super().__init__()

    def fit(self):
        return nn.Linear(2, 2)

if __name__ == "__main__":
    runner = Runner()
    runner.fit()
"""
    assert reported(lint({"main.py": source}, {"select": ["TRP101", "TRP105"]}), lint.root) == set()


def test_aliases_resolve_and_user_functions_named_like_torch_do_not(lint):
    source = """import torch as T
import numpy as np
npr = np.random

def manual_seed(x):
    pass

if __name__ == "__main__":
    manual_seed(0)
    T.manual_seed(1)
    npr.rand(3)
"""
    # T.manual_seed is torch's; npr.rand draws from NumPy's global generator, never seeded.
    assert reported(lint({"main.py": source}, {"select": ["TRP101", "TRP102"]}), lint.root) == {("main.py", 10, "TRP102")}


def test_a_user_function_called_manual_seed_does_not_seed(lint):
    source = "import torch.nn as nn\n\ndef manual_seed(x):\n    pass\n\nif __name__ == '__main__':\n    manual_seed(0)\n    nn.Linear(1, 1)\n"
    assert reported(lint({"main.py": source}, {"select": ["TRP101"]}), lint.root) == {("main.py", 6, "TRP101")}


def test_conditional_seeding_counts(lint):
    source = "import torch\nimport torch.nn as nn\n\ndef main(args):\n    if args.seed is not None:\n        torch.manual_seed(args.seed)\n    nn.Linear(2, 2)\n\nif __name__ == '__main__':\n    main(None)\n"
    assert reported(lint({"main.py": source}, {"select": ["TRP101"]}), lint.root) == set()


def test_correlated_conditions_across_statements(lint):
    source = """import torch

def main(args):
    if args.deterministic:
        torch.use_deterministic_algorithms(True)
    if not args.deterministic:
        torch.backends.cudnn.benchmark = True

if __name__ == "__main__":
    main(None)
"""
    assert reported(lint({"main.py": source}, {"select": ["TRP201"]}), lint.root) == set()


def test_early_return_in_a_helper_keeps_the_other_path(lint):
    source = """import torch
import torch.nn as nn

def seed_all(seed):
    if seed is None:
        return
    torch.manual_seed(seed)

if __name__ == "__main__":
    seed_all(3)
    nn.Linear(2, 2)
"""
    assert reported(lint({"main.py": source}, {"select": ["TRP101"]}), lint.root) == set()


def test_recursion_does_not_hang(lint):
    source = "import torch\n\ndef a(n):\n    return b(n)\n\ndef b(n):\n    return a(n)\n\nif __name__ == '__main__':\n    a(1)\n    torch.rand(1)\n"
    assert reported(lint({"main.py": source}, {"select": ["TRP101"]}), lint.root) == {("main.py", 9, "TRP101")}


def test_callback_that_seeds_counts_but_not_for_ordering(lint):
    source = """import numpy as np
import torch
from torch.utils.data import DataLoader

def seed_worker(worker_id):
    np.random.seed(torch.initial_seed() % 2**32)

if __name__ == "__main__":
    torch.manual_seed(0)
    loader = DataLoader(range(8), num_workers=2, worker_init_fn=seed_worker)
    np.random.rand(2)
"""
    assert reported(lint({"main.py": source}, {"select": ["TRP102", "TRP105"]}), lint.root) == set()


def test_spawn_target_seeding_counts_for_the_program(lint):
    source = """import torch
import torch.multiprocessing as mp
import torch.nn as nn

def worker(rank):
    torch.manual_seed(rank)
    nn.Linear(2, 2)

if __name__ == "__main__":
    mp.spawn(worker, nprocs=2)
"""
    assert reported(lint({"main.py": source}, {"select": ["TRP101", "TRP107"]}), lint.root) == set()


def test_findings_in_a_helper_shared_by_two_programs_are_reported_once(lint):
    files = {
        "a.py": "import flags\n\nif __name__ == '__main__':\n    flags.setup()\n",
        "b.py": "import flags\n\nif __name__ == '__main__':\n    flags.setup()\n",
        "flags.py": "import os\n\ndef setup():\n    os.environ['PYTHONHASHSEED'] = '0'\n",
    }
    result = lint(files, {"select": ["TRP204"]})
    assert [(f.code, f.row) for f in result.findings] == [("TRP204", 4)]


def test_tuple_assignment_of_switches_under_a_conditional_expression(lint):
    source = """import torch
from torch.backends import cudnn

def init_seeds(seed=0):
    torch.manual_seed(seed)
    cudnn.benchmark, cudnn.deterministic = (False, True) if seed == 0 else (True, False)

if __name__ == "__main__":
    init_seeds(3)
"""
    # benchmark is True exactly when deterministic is False: never both.
    assert reported(lint({"main.py": source}, {"select": ["TRP201"]}), lint.root) == set()


def test_tuple_assignment_setting_both_switches_is_reported(lint):
    source = "import torch.backends.cudnn as cudnn\n\nif __name__ == '__main__':\n    cudnn.benchmark, cudnn.deterministic = True, True\n"
    assert reported(lint({"main.py": source}, {"select": ["TRP201"]}), lint.root) == {("main.py", 4, "TRP201")}


def test_framework_helper_that_resets_benchmark(lint):
    source = """import torch
from mmengine.runner import set_random_seed

if __name__ == "__main__":
    torch.backends.cudnn.benchmark = True
    set_random_seed(0, deterministic=True)
"""
    # mmengine sets benchmark = False when it turns determinism on.
    assert reported(lint({"main.py": source}, {"select": ["TRP201"]}), lint.root) == set()


def test_a_function_filed_in_a_registry_is_not_run_by_importing_it(lint):
    # Regression (llm-foundry): its layers file their builders by name when imported, and every
    # data-conversion script imports the package. Filing a function calls nothing; a callback
    # given without a key (`atexit.register(f)`) is still taken to run.
    layers = """import atexit
import torch
import torch.nn as nn

BUILDERS = {}

class Registry:
    def register(self, name, func):
        BUILDERS[name] = func

blocks = Registry()

def build_block(width):
    return nn.Linear(width, width)

def report_noise():
    print(torch.rand(1))

blocks.register("linear", func=build_block)
"""
    files = {
        "zoo/__init__.py": "",
        "zoo/layers.py": layers,
        "convert.py": "import sys\nimport zoo.layers\n\nif __name__ == '__main__':\n    print(open(sys.argv[1]).read().upper())\n",
        "noisy.py": "import atexit\nfrom zoo.layers import report_noise\n\nif __name__ == '__main__':\n    atexit.register(report_noise)\n",
    }
    assert reported(lint(files, {"select": ["TRP101"]}), lint.root) == {("noisy.py", 4, "TRP101")}


def test_a_nested_subproject_resolves_its_own_package(lint):
    # Regression (DeepSpeed-Chat inside DeepSpeedExamples): a directory with its own setup.py is
    # installed on its own; its scripts import its package by name, from a subdirectory that is
    # not a package. Linting the whole repository must find that package as linting the
    # subproject alone does. Without setup.py the import finds nothing, as Python's would not.
    seeding = "import torch\n\ndef fix_seed(seed):\n    torch.manual_seed(seed)\n"
    main = (
        "import torch\nfrom chat.seeding import fix_seed\n\nif __name__ == '__main__':\n"
        "    fix_seed(1)\n    torch.nn.Linear(4, 4)\n"
    )
    files = {
        "apps/chat_suite/setup.py": "from setuptools import setup\nsetup(name='chat', packages=['chat'])\n",
        "apps/chat_suite/chat/__init__.py": "",
        "apps/chat_suite/chat/seeding.py": seeding,
        "apps/chat_suite/training/main.py": main,
        "apps/loose/chat/__init__.py": "",
        "apps/loose/chat/seeding.py": seeding,
        "apps/loose/training/main.py": main,
    }
    assert reported(lint(files, {"select": ["TRP101"]}), lint.root) == {("apps/loose/training/main.py", 4, "TRP101")}


def test_composer_reproducibility_helpers(lint):
    # Regression (llm-foundry): composer's seed_all seeds torch, and configure_deterministic_mode
    # turns deterministic mode on (it seeds nothing).
    seeded = """import torch
from composer.utils import reproducibility

if __name__ == "__main__":
    reproducibility.seed_all(7)
    net = torch.nn.Linear(4, 4).cuda()
"""
    deterministic = seeded.replace("reproducibility.seed_all(7)", "reproducibility.seed_all(7)\n    reproducibility.configure_deterministic_mode()")
    unseeded = seeded.replace("reproducibility.seed_all(7)", "reproducibility.configure_deterministic_mode()")
    files = {"seeded.py": seeded, "deterministic.py": deterministic, "unseeded.py": unseeded}
    assert reported(lint(files, {"select": ["TRP101", "TRP205"]}), lint.root) == {
        ("seeded.py", 5, "TRP205"),
        ("unseeded.py", 4, "TRP101"),
    }


def test_worker_init_fn_seeding_does_not_make_the_main_process_seeded(lint):
    source = """import torch
from torch.utils.data import DataLoader

def init_worker(worker_id):
    torch.manual_seed(worker_id)

if __name__ == "__main__":
    model = torch.nn.Linear(2, 2).cuda()
    loader = DataLoader(range(4), num_workers=2, worker_init_fn=init_worker)
"""
    # TRP205 is about a seeded main process; TRP101 stays quiet because something seeds.
    assert reported(lint({"infer.py": source}, {"select": ["TRP101", "TRP205"]}), lint.root) == set()


def test_export_script_without_training_is_not_asked_for_a_seed(lint):
    source = """import torch
import torch.nn as nn

def export(model):
    sample = torch.randn(1, 8)
    reference = model(sample)
    torch.onnx.export(model, sample, "model.onnx")
    return reference

if __name__ == "__main__":
    export(nn.Linear(8, 2))
"""
    assert reported(lint({"export_onnx.py": source}, {"select": ["TRP101"]}), lint.root) == set()


def test_configured_seed_function_from_an_installed_package(lint):
    source = "import torch.nn as nn\nfrom labtools.repro import fix_all\n\nif __name__ == '__main__':\n    fix_all(1)\n    nn.Linear(2, 2)\n"
    assert reported(lint({"main.py": source}, {"select": ["TRP101"]}), lint.root) == {("main.py", 4, "TRP101")}
    configured = lint({"main.py": source}, {"select": ["TRP101"], "seed-functions": ["labtools.repro.fix_all"]})
    assert reported(configured, lint.root) == set()


def test_configured_deterministic_function_enables_deterministic_mode(lint):
    source = (
        "import torch\nfrom labtools.repro import strict_mode\n\nif __name__ == '__main__':\n"
        "    torch.backends.cudnn.deterministic = True\n    strict_mode()\n"
    )
    assert reported(lint({"main.py": source}, {"select": ["TRP202"]}), lint.root) == {("main.py", 5, "TRP202")}
    configured = lint({"main.py": source}, {"select": ["TRP202"], "deterministic-functions": ["labtools.repro.strict_mode"]})
    assert reported(configured, lint.root) == set()


# -- `__main__` guards, spawned processes and deep nesting -------------------------------------
# Under spawn a child imports the main module as `__mp_main__`: its guards do not run there, so
# a guard that spawns cannot start the same workers again.
def test_second_guard_that_spawns_runs_in_the_parent_only(lint):
    source = """import torch
import torch.multiprocessing as mp
import torch.nn as nn

if __name__ == "__main__":
    torch.manual_seed(0)


def worker(rank):
    nn.Linear(2, 2)


if __name__ == "__main__":
    mp.spawn(worker, nprocs=2)
"""
    # The parent seeds in its first guard; the worker builds a layer unseeded.
    assert reported(lint({"train.py": source}, {"select": ["TRP101", "TRP107"]}), lint.root) == {("train.py", 14, "TRP107")}


def test_guards_run_where_they_stand(lint):
    source = """import torch
import torch.nn as nn

if __name__ == "__main__":
    torch.manual_seed(0)

LAYERS = 2

if __name__ == "__main__":
    nn.Linear(LAYERS, 2)
"""
    # The layer is built after the seed, in file order.
    assert reported(lint({"train.py": source}, {"select": ["TRP101", "TRP105"]}), lint.root) == set()


def test_else_arm_of_the_guard_runs_only_on_import(lint):
    source = """import torch
import torch.nn as nn

if __name__ == "__main__":
    torch.manual_seed(0)
    nn.Linear(2, 2)
else:
    noise = torch.rand(2)
"""
    assert reported(lint({"train.py": source}, {"select": ["TRP101", "TRP105"]}), lint.root) == set()


def test_a_worker_that_spawns_itself_is_walked_once(lint):
    source = """import torch
import torch.multiprocessing as mp

def worker(rank):
    torch.manual_seed(rank)
    torch.rand(2)
    mp.spawn(worker, nprocs=2)

if __name__ == "__main__":
    mp.spawn(worker, nprocs=2)
"""
    assert reported(lint({"train.py": source}, {"select": ["TRP101", "TRP107"]}), lint.root) == set()


def test_an_unseeded_worker_that_spawns_itself_is_reported_once(lint):
    # The worker is the spawn's target: it runs in a fresh child, not in the seeded parent as a
    # callback. Only the parent's spawn hands an unseeded worker its work; the worker's own spawn
    # starts from a child that was never seeded (regression: it was reported too).
    source = """import torch
import torch.multiprocessing as mp

def worker(rank):
    torch.rand(2)
    mp.spawn(worker, nprocs=2)

if __name__ == "__main__":
    torch.manual_seed(0)
    mp.spawn(worker, nprocs=2)
"""
    assert reported(lint({"train.py": source}, {"select": ["TRP107"]}), lint.root) == {("train.py", 10, "TRP107")}


def test_a_forked_process_target_still_runs_with_the_parent_state(lint):
    # multiprocessing.Process forks by default: the target inherits the seeded parent, as a
    # callback would, so nothing is reported.
    source = """import multiprocessing
import torch

def work():
    torch.rand(2)

if __name__ == "__main__":
    torch.manual_seed(0)
    multiprocessing.Process(target=work).start()
"""
    assert reported(lint({"train.py": source}, {"select": ["TRP101", "TRP107"]}), lint.root) == set()


def test_workers_that_spawn_each_other_terminate(lint):
    source = """import torch
import torch.multiprocessing as mp

def ping(rank):
    torch.manual_seed(rank)
    mp.spawn(pong, nprocs=1)

def pong(rank):
    torch.manual_seed(rank)
    mp.spawn(ping, nprocs=1)

if __name__ == "__main__":
    mp.spawn(ping, nprocs=1)
"""
    assert reported(lint({"train.py": source}, {"select": ["TRP101", "TRP107"]}), lint.root) == set()


def test_unguarded_spawn_at_module_level_terminates(lint):
    # The child re-imports the module and reaches the same spawn (Python itself refuses it).
    source = "import torch\nimport torch.multiprocessing as mp\n\ndef worker(rank):\n    torch.rand(2)\n\nmp.spawn(worker, nprocs=2)\n"
    assert reported(lint({"run.py": source}, {"select": ["TRP107"]}), lint.root) == set()


def test_a_long_chain_of_pure_helpers_is_not_walked_too_deep(lint):
    helpers = "".join(f"def step{i}(x):\n    return step{i + 1}(x)\n\n" for i in range(400))
    source = (
        "import torch\nimport torch.nn as nn\n\n" + helpers + "def step400(x):\n    return x\n\n"
        "if __name__ == '__main__':\n    torch.manual_seed(0)\n    step0(1)\n    nn.Linear(2, 2)\n"
    )
    assert reported(lint({"train.py": source}, {"select": ["TRP101", "TRP105"]}), lint.root) == set()


def test_a_very_deep_chain_of_imports_is_truncated_not_a_crash(lint):
    files = {f"m{i}.py": f"import m{i + 1}\n" for i in range(400)}
    files["m400.py"] = "import torch\ntorch.manual_seed(0)\n"
    files["train.py"] = "import torch\nimport m0\n\nif __name__ == '__main__':\n    torch.rand(2)\n"
    # The seed lies past the import bound: the run is truncated, and TRP101 does not guess.
    assert reported(lint(files, {"select": ["TRP101"]}), lint.root) == set()


def test_distributed_packages_read_from_pyproject():
    from torchrepro_lint.config import distributed_packages

    assert distributed_packages({"project": {"name": "Vit.Pytorch-Extra"}}) == ["vit_pytorch_extra"]
    data = {
        "project": {"name": "zoo"},
        "tool": {
            "setuptools": {"packages": {"find": {"include": ["blocks*", "heads.*", 3, "src/*"]}}},
            "poetry": {"packages": [{"include": "layers"}, "junk", {"include": 5}]},
        },
    }
    assert distributed_packages(data) == ["blocks", "heads", "layers", "src", "zoo"]
    assert distributed_packages({"tool": {"setuptools": {"packages": ["a.b", "c"]}}}) == ["a", "c"]
    assert distributed_packages({"project": "not a table", "tool": []}) == []


def test_guardless_pytest_module_is_not_a_script(lint):
    # pytest imports test modules (with whatever its fixtures seed): their top-level code sets
    # tests up. The same code in a file pytest does not collect is a script; a test file's own
    # `__main__` block is a program run by hand.
    setup = (
        "import torch\n\nCASES = [torch.randn(4) for _ in range(3)]\n\n"
        "def test_cases_have_four_values():\n    assert all(c.numel() == 4 for c in CASES)\n"
    )
    files = {
        "tests/test_shapes.py": setup,
        "tests/shapes_test.py": setup,
        "tests/make_cases.py": setup,
        "tests/test_manual.py": "import torch\n\nif __name__ == '__main__':\n    print(torch.rand(2))\n",
    }
    assert reported(lint(files, {"select": ["TRP101"]}), lint.root) == {
        ("tests/make_cases.py", 1, "TRP101"), ("tests/test_manual.py", 3, "TRP101")
    }
