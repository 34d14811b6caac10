"""TRP105 counts a draw before the seed only when what it drew outlives the seed; import-time
probes of imported modules are neither draws nor CUDA evidence; messages show relative paths."""

from __future__ import annotations

import pytest
from conftest import reported

SELECT = {"select": ["TRP105", "TRP205"]}


@pytest.mark.parametrize(
    "loader",
    [
        "vae = AutoencoderKL.from_pretrained('some/model', subfolder='vae')",
        "tokenizer = AutoTokenizer.from_pretrained('bert-base-uncased')",
        "scheduler = DDPMScheduler.from_pretrained('some/model', subfolder='scheduler')",
    ],
)
def test_pretrained_parts_that_load_every_weight_draw_nothing(lint, loader):
    source = (
        "import torch\nfrom diffusers import AutoencoderKL, DDPMScheduler\nfrom transformers import AutoTokenizer\n\n"
        f"if __name__ == '__main__':\n    {loader}\n    torch.manual_seed(0)\n"
    )
    assert reported(lint({"train.py": source}, SELECT), lint.root) == set()


def test_pretrained_model_with_a_new_task_head_still_draws(lint):
    source = (
        "import torch\nfrom transformers import BertForTokenClassification\n\n"
        "if __name__ == '__main__':\n    model = BertForTokenClassification.from_pretrained('bert', num_labels=5)\n"
        "    torch.manual_seed(0)\n"
    )
    assert reported(lint({"train.py": source}, SELECT), lint.root) == {("train.py", 6, "TRP105")}


PROBE_MODULE = (
    "import os\nimport torch\n\n"
    "if os.environ.get('MYLIB_TEST_DEVICE'):\n"
    "    try:\n"
    "        probe = torch.randn(3, 4, device='cuda')\n"
    "    except RuntimeError:\n"
    "        probe = None\n"
)


def test_import_time_probe_is_neither_a_draw_nor_cuda(lint):
    files = {
        "mylib.py": PROBE_MODULE,
        "train.py": "import torch\nimport mylib\n\nif __name__ == '__main__':\n    torch.manual_seed(0)\n    net = torch.nn.Linear(2, 2)\n",
    }
    assert reported(lint(files, SELECT), lint.root) == set()


def test_the_same_draw_unguarded_at_import_is_still_a_late_seed(lint):
    files = {
        "mylib.py": "import torch\n\nTABLE = torch.randn(3, 4, device='cuda')\n",
        "train.py": "import torch\nimport mylib\n\nif __name__ == '__main__':\n    torch.manual_seed(0)\n    net = torch.nn.Linear(2, 2)\n",
    }
    found = reported(lint(files, SELECT), lint.root)
    assert ("train.py", 5, "TRP105") in found and ("train.py", 5, "TRP205") in found


def test_draw_inside_try_without_an_environment_condition_still_counts(lint):
    files = {
        "mylib.py": "import torch\n\ntry:\n    TABLE = torch.randn(3, 4)\nexcept RuntimeError:\n    TABLE = None\n",
        "train.py": "import torch\nimport mylib\n\nif __name__ == '__main__':\n    torch.manual_seed(0)\n",
    }
    assert reported(lint(files, SELECT), lint.root) == {("train.py", 5, "TRP105")}


def lint_one(root, files, given, cwd, monkeypatch):
    """Lint only `given` (a path relative to `cwd`): the modules it imports are found, not linted."""
    from conftest import write_project
    from pathlib import Path

    from torchrepro_lint.config import load_config
    from torchrepro_lint.pipeline.engine import lint_paths

    write_project(root, files, {"select": ["TRP105"]})
    monkeypatch.chdir(cwd)
    return lint_paths([Path(given)], load_config([root]))


def test_late_seed_message_quotes_an_imported_module_by_relative_path(lint, monkeypatch):
    files = {
        "pkg/__init__.py": "",
        "pkg/tables.py": "import torch\n\nTABLE = torch.randn(3)\n",
        "train.py": "import torch\nimport pkg.tables\n\nif __name__ == '__main__':\n    torch.manual_seed(0)\n",
    }
    result = lint_one(lint.root, files, "train.py", lint.root, monkeypatch)
    messages = [f.message for f in result.findings]
    assert len(messages) == 1 and "at pkg/tables.py:3 already drew" in messages[0]


def test_message_quotes_a_module_outside_the_working_directory_relative_to_it(lint, monkeypatch):
    files = {
        "src/mylib/__init__.py": "",
        "src/mylib/tables.py": "import torch\n\nTABLE = torch.randn(3)\n",
        "examples/train.py": "import torch\nimport mylib.tables\n\nif __name__ == '__main__':\n    torch.manual_seed(0)\n",
    }
    result = lint_one(lint.root, files, "train.py", lint.root / "examples", monkeypatch)
    messages = [f.message for f in result.findings]
    assert len(messages) == 1 and "at ../src/mylib/tables.py:3 already drew" in messages[0]


def test_checkpoint_loaded_after_the_seed_replaces_the_earlier_init(lint):
    # The spec's trap "models loaded from a checkpoint" holds whichever side of the seed the load
    # is on: the init drawn before the seed is overwritten. A load on one branch only leaves the
    # other branch's run with the unseeded init; a plain draw before the seed survives any load.
    source = """import torch
import torch.nn as nn

def restored(path):
    net = nn.Linear(8, 8)
    torch.manual_seed(0)
    net.load_state_dict(torch.load(path))
    return net

def maybe_restored(path, resume):
    net = nn.Linear(8, 8)
    torch.manual_seed(0)
    if resume:
        net.load_state_dict(torch.load(path))
    return net

def noisy(path):
    noise = torch.randn(8)
    torch.manual_seed(0)
    net = nn.Linear(8, 8)
    net.load_state_dict(torch.load(path))
    return net, noise

if __name__ == "__main__":
    restored("a.pt")
"""
    assert reported(lint({"train.py": source}, SELECT), lint.root) == set()
    for entry, row in (("maybe_restored('a.pt', input())", 12), ("noisy('a.pt')", 19)):
        main = source.replace('restored("a.pt")', entry)
        assert reported(lint({"train.py": main}, SELECT), lint.root) == {("train.py", row, "TRP105")}, entry
