"""A program's first imports are walked once and replayed in the other programs.

A library's many scripts each start with `import torch` (or the project's package), and the
interpreter used to walk that import's whole closure again for each. The replay must give
exactly what a walk would: these tests lint small projects with and without replaying.
"""

from __future__ import annotations

import pytest

from conftest import reported
from torchrepro_lint.project.interpreter import recordings, run
from torchrepro_lint.project.interpreter.recordings import CallbackRun, ImportWalk

PACKAGE_SEEDS = {
    "pkg/__init__.py": "import torch\n\ntorch.manual_seed(0)\n",
    "a.py": "import random\n\nimport pkg\n\nif __name__ == '__main__':\n    print(random.random())\n",
    "b.py": (
        '"""Its import of the package sits lower."""\nimport os\nimport random\n\nimport pkg\n\n'
        "if __name__ == '__main__':\n    print(os.getcwd(), random.random())\n"
    ),
}

# Import-time effects of every kind the walk records: draws, switches, a DataLoader callback,
# a checkpoint load, a spawned worker, a `__main__` guard inside the package, and a script the
# package itself imports (a program whose entry the walk would skip).
PACKAGE_DOES_EVERYTHING = {
    "pkg/__init__.py": (
        "import torch\n\nfrom pkg import layers, tool\n\nbase = torch.nn.Linear(2, 2)\n"
        "base.load_state_dict(torch.load('w.pt'))\nnoise = torch.rand(3)\n"
    ),
    "pkg/layers.py": (
        "import torch\nimport torch.multiprocessing as mp\n\ntorch.backends.cudnn.benchmark = True\n\n"
        "def seed_worker(worker_id):\n    torch.manual_seed(worker_id)\n\n"
        "loader = torch.utils.data.DataLoader([], num_workers=2, worker_init_fn=seed_worker)\n\n"
        "def serve(rank):\n    torch.rand(1)\n\nmp.spawn(serve, nprocs=2)\n\n"
        "if __name__ == '__main__':\n    torch.manual_seed(1)\n"
    ),
    "pkg/tool.py": (
        "import torch\n\nimport pkg\n\nif __name__ == '__main__':\n    torch.use_deterministic_algorithms(True)\n"
        "    print(torch.randn(2))\n"
    ),
    "a.py": (
        "import pkg\nimport torch\n\nif __name__ == '__main__':\n    torch.use_deterministic_algorithms(True)\n"
        "    torch.manual_seed(0)\n"
    ),
    "b.py": '"""Never seeds."""\nimport os\n\nimport pkg\n\nif __name__ == "__main__":\n    print(os.getcwd())\n',
    "c.py": (
        "import random\n\nimport numpy as np\n\nimport pkg\n\nif __name__ == '__main__':\n"
        "    np.random.seed(0)\n    print(random.random())\n"
    ),
}


@pytest.fixture
def count_walks(monkeypatch):
    recorded = []
    original = ImportWalk.record.__func__

    def record(cls, interp, module, states, anchor):
        recorded.append(module.name)
        return original(cls, interp, module, states, anchor)

    monkeypatch.setattr(ImportWalk, "record", classmethod(record))
    return recorded


def test_each_program_is_reported_at_its_own_import_of_the_package(lint, count_walks):
    found = reported(lint(PACKAGE_SEEDS, {"select": ["TRP102"]}), lint.root)
    assert found == {("a.py", 3, "TRP102"), ("b.py", 5, "TRP102")}
    assert count_walks == ["pkg"]  # walked for one program, replayed for the other


@pytest.mark.parametrize("files", [PACKAGE_SEEDS, PACKAGE_DOES_EVERYTHING], ids=["seeds", "everything"])
def test_replayed_walks_find_what_walking_finds(lint, monkeypatch, files):
    replayed = reported(lint(files, {"select": ["ALL"]}), lint.root)
    monkeypatch.setattr(ImportWalk, "replays_in", lambda self, interp, recorded=False: False)
    monkeypatch.setattr(CallbackRun, "replays_in", lambda self, interp, recorded=False: False)
    walked = reported(lint(files, {"select": ["ALL"]}), lint.root)
    assert replayed == walked
    assert replayed  # the fixtures do report: an empty comparison would prove nothing


def test_a_script_the_package_imports_is_never_given_a_replay(lint, monkeypatch):
    """pkg/tool.py is in the package's own closure: a walk from another entry skipped it as
    already imported, and from its own entry the `__main__` guard reads differently."""
    replays = []
    original = ImportWalk.replay

    def replay(self, interp, anchor):
        if anchor != self.anchor:
            replays.append(interp.entry.name)
        return original(self, interp, anchor)

    monkeypatch.setattr(ImportWalk, "replay", replay)
    lint(PACKAGE_DOES_EVERYTHING, {"select": ["ALL"]})
    assert "pkg.tool" not in replays
    assert replays  # the other scripts did replay


def _bound_steps(monkeypatch, steps: int) -> None:
    """MAX_STEPS as the run reads it (a walk's length) and as the recordings do (a replay's)."""
    for module in (run, recordings):
        monkeypatch.setattr(module, "MAX_STEPS", steps)


def test_a_walk_that_would_pass_the_step_bound_is_walked_again(lint, monkeypatch, count_walks):
    _bound_steps(monkeypatch, 12)  # the package's walk alone takes fewer
    lint(PACKAGE_SEEDS, {"select": ["TRP102"]})
    assert count_walks == ["pkg"]
    _bound_steps(monkeypatch, 3)  # now a replay could hide a truncation
    count_walks.clear()
    lint(PACKAGE_SEEDS, {"select": ["TRP102"]})
    assert count_walks == ["pkg", "pkg"]


def test_the_callbacks_a_package_registers_run_once_for_all_its_scripts(lint, monkeypatch):
    runs = []
    original = CallbackRun.record.__func__

    def record(cls, interp):
        runs.append(interp.entry.name)
        return original(cls, interp)

    monkeypatch.setattr(CallbackRun, "record", classmethod(record))
    lint(PACKAGE_DOES_EVERYTHING, {"select": ["ALL"]})
    # a.py, b.py and c.py import the package the same way: one run, replayed for the others
    # (pkg.tool and pkg.layers run their own: each is in the package's closure).
    assert len([name for name in runs if name in ("a", "b", "c")]) == 1


# m.py registers helpers.report, which draws, as an exit hook. a.py registered it itself before
# importing m; b.py did not. The walk of m recorded in a.py must still register it for b.py.
REGISTERED_BEFORE_THE_WALK = {
    "helpers.py": "import torch\n\n\ndef report():\n    torch.randn(2)\n",
    "m.py": "import atexit\n\nimport helpers\n\natexit.register(helpers.report)\n",
    "a.py": "import atexit\n\nimport helpers\n\natexit.register(helpers.report)\nimport m\n",
    "b.py": "import helpers\nimport m\nimport torch\n\nopt = torch.optim.SGD([], lr=0.1)\nopt.step()\n",
}


def test_a_callback_the_walk_registers_counts_though_the_recording_program_had_it_already(lint, count_walks):
    found = reported(lint(REGISTERED_BEFORE_THE_WALK, {"select": ["TRP101"]}), lint.root)
    assert ("b.py", 1, "TRP101") in found  # its exit hook draws, and it never seeds
    assert count_walks.count("m") == 1  # (recorded in a.py, replayed in b.py)
