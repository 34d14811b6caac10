"""TRP108 resume-without-rng-state: beyond the rule's own examples, where the RNG restore may
stand, what names an optimizer and what shows that training goes on, the frameworks' resumes, and
the language server's kept calls carrying a pending resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import lint_project, reported
from session_checks import analysed_like_fresh
from torchrepro_lint.server.session import Workspace

TRAIN = """import torch
import torch.nn as nn


def main(args):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.1))
    {build}
    saved = torch.load(args.checkpoint)
    {before}
    {restore}
    {after}
    for _ in range(10):
        loss = model(torch.ones(2, 8)).sum()
        {step}


if __name__ == "__main__":
    main(None)
"""


def rows(tmp_path, files, code="TRP108"):
    tmp_path.mkdir(parents=True, exist_ok=True)
    result = lint_project(tmp_path, files, {"select": [code]})
    assert not result.errors, result.errors
    return sorted((name, row) for name, row, _ in reported(result, tmp_path, code))


def script(build="optimizer = torch.optim.Adam(model.parameters())", before="", restore='optimizer.load_state_dict(saved["opt"])',
           after="", step="loss.backward()\n        optimizer.step()"):
    return TRAIN.format(build=build, before=before or "pass", restore=restore, after=after or "pass", step=step)


RESTORE_ROW = 11  # the row of `{restore}` in TRAIN


def test_the_plain_resume_is_reported_at_the_restore(tmp_path):
    assert rows(tmp_path, {"train.py": script()}) == [("train.py", RESTORE_ROW)]


@pytest.mark.parametrize(
    "rng",
    [
        'torch.set_rng_state(saved["rng"])',
        'torch.random.set_rng_state(saved["rng"])',
        'torch.cuda.set_rng_state_all(saved["cuda"])',
        'torch.cuda.set_rng_state(saved["cuda"])',
        'import numpy as np; np.random.set_state(saved["np"])',
        'import random; random.setstate(saved["py"])',
    ],
)
@pytest.mark.parametrize("where", ["before", "after"])
def test_an_rng_restore_before_or_after_the_optimizer_restore_silences_it(tmp_path, rng, where):
    assert rows(tmp_path, {"train.py": script(**{where: rng})}) == []


def test_a_generator_restored_by_set_state_counts(tmp_path):
    source = script(build="optimizer = torch.optim.Adam(model.parameters())\n    gen = torch.Generator()",
                    after='gen.set_state(saved["gen"])')
    assert rows(tmp_path, {"train.py": source}) == []


def test_an_iterator_state_is_not_an_rng_restore(tmp_path):
    # torchtitan's `self._iterator.set_state(...)` restores where a data loader is, not a generator
    source = script(after='saved["iterator"].set_state(saved["position"])')
    assert rows(tmp_path, {"train.py": source}) == [("train.py", RESTORE_ROW)]


def test_an_rng_restore_after_training_resumed_comes_too_late(tmp_path):
    source = script(step='loss.backward()\n        optimizer.step()\n        torch.set_rng_state(saved["rng"])')
    assert rows(tmp_path, {"train.py": source}) == [("train.py", RESTORE_ROW)]


def test_an_rng_restore_under_a_runtime_flag_is_a_configuration_choice(tmp_path):
    """The restore is there and a flag turns it off (Megatron's `--no-load-rng`): not reported."""
    source = script(after='if args.restore_rng:\n        torch.set_rng_state(saved["rng"])')
    assert rows(tmp_path, {"train.py": source}) == []
    source = script(after='if args.restore_rng:\n        pass')
    assert rows(tmp_path / "b", {"train.py": source}) == [("train.py", RESTORE_ROW)]


@pytest.mark.parametrize(
    "build, restore",
    [
        ("opt_g = torch.optim.Adam(model.parameters())", 'opt_g.load_state_dict(saved["g"])'),
        ("sgd = torch.optim.SGD(model.parameters(), lr=0.1)", 'sgd.load_state_dict(saved["sgd"])'),
        ("optimizers = [torch.optim.Adam(model.parameters())]", 'optimizers[0].load_state_dict(saved["opt"])'),
    ],
)
def test_optimizers_by_name_or_by_constructor(tmp_path, build, restore):
    receiver = restore.split(".load_state_dict")[0]
    source = script(build=build, restore=restore, step=f"loss.backward()\n        {receiver}.step()")
    assert rows(tmp_path, {"train.py": source}) == [("train.py", RESTORE_ROW)]


@pytest.mark.parametrize(
    "build, restore",
    [
        ("scheduler = torch.optim.lr_scheduler.StepLR(torch.optim.Adam(model.parameters()), 5)", 'scheduler.load_state_dict(saved["s"])'),
        ("scaler = torch.amp.GradScaler()", 'scaler.load_state_dict(saved["scaler"])'),
        ("ema = nn.Linear(8, 8)", 'model.load_state_dict(saved["model"])'),
    ],
)
def test_a_scheduler_a_scaler_or_the_model_is_no_resume(tmp_path, build, restore):
    assert rows(tmp_path, {"train.py": script(build=build, restore=restore, step="loss.backward()")}) == []


@pytest.mark.parametrize(
    "step, found",
    [
        ("optimizer.step()", True),
        ("optimizer.zero_grad()", True),
        ("scaler.step(optimizer)", True),
        ("print(loss.item())", False),
    ],
)
def test_what_shows_that_training_goes_on(tmp_path, step, found):
    source = script(build="optimizer = torch.optim.Adam(model.parameters())\n    scaler = torch.amp.GradScaler()", step=step)
    assert rows(tmp_path, {"train.py": source}) == ([("train.py", RESTORE_ROW + 1)] if found else [])


def test_a_program_that_draws_nothing_while_training_is_not_reported(tmp_path):
    source = script().replace("nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.1))", "nn.Linear(8, 8)")
    assert rows(tmp_path, {"train.py": source}) == []


def test_seeded_on_one_path_only_is_reported_there(tmp_path):
    source = script().replace("    torch.manual_seed(0)\n", "    if args.seed is not None:\n        torch.manual_seed(args.seed)\n")
    assert rows(tmp_path, {"train.py": source}) == [("train.py", RESTORE_ROW + 1)]


def test_a_progress_seed_after_the_restore_silences_it_a_fixed_one_does_not(tmp_path):
    by_epoch = script(step="torch.manual_seed(100 + epoch)\n        loss.backward()").replace("for _ in", "for epoch in")
    fixed = script(after="torch.manual_seed(0)")
    assert rows(tmp_path, {"train.py": by_epoch}) == []
    assert rows(tmp_path, {"train.py": fixed}) == [("train.py", RESTORE_ROW)]


def test_a_helper_reached_by_two_programs_is_reported_once(tmp_path):
    helper = 'import torch\n\n\ndef resume(optimizer, path):\n    optimizer.load_state_dict(torch.load(path)["optimizer"])\n'
    main = (
        "import torch\nfrom ckpt import resume\n\n"
        "if __name__ == '__main__':\n    torch.manual_seed(0)\n"
        "    net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5))\n"
        "    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)\n    resume(optimizer, 'last.pt')\n"
        "    net(torch.ones(1, 2)).sum().backward()\n"
    )
    assert rows(tmp_path, {"ckpt.py": helper, "a.py": main, "b.py": main}) == [("ckpt.py", 5)]


def test_a_helper_outside_the_linted_files_is_reported_at_its_call(tmp_path):
    helper = 'import torch\n\n\ndef resume(optimizer, path):\n    optimizer.load_state_dict(torch.load(path)["optimizer"])\n'
    main = (
        "import torch\nfrom ckpt import resume\n\n"
        "if __name__ == '__main__':\n    torch.manual_seed(0)\n"
        "    net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5))\n"
        "    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)\n    resume(optimizer, 'last.pt')\n"
        "    net(torch.ones(1, 2)).sum().backward()\n"
    )
    from conftest import write_project
    from torchrepro_lint.config import load_config
    from torchrepro_lint.pipeline.engine import lint_paths

    write_project(tmp_path, {"ckpt.py": helper, "train.py": main}, {"select": ["TRP108"]})
    result = lint_paths([tmp_path / "train.py"], load_config([tmp_path]))
    assert sorted((n, r) for n, r, _ in reported(result, tmp_path, "TRP108")) == [("train.py", 8)]


NANOGPT_LIKE = """import torch
import torch.nn as nn

init_from = "scratch"
{configure}
torch.manual_seed(1337)
model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.1))
optimizer = torch.optim.AdamW(model.parameters())
if init_from == "resume":
    checkpoint = torch.load("ckpt.pt")
    optimizer.load_state_dict(checkpoint["optimizer"])
for it in range(10):
    model(torch.randn(2, 8)).sum().backward()
    optimizer.step()
"""


def test_exec_of_a_configuration_file_may_choose_the_resume(tmp_path):
    with_exec = NANOGPT_LIKE.format(configure='exec(open("configurator.py").read())')
    without = NANOGPT_LIKE.format(configure="")
    literal = NANOGPT_LIKE.format(configure='exec("x = 1")')
    assert rows(tmp_path / "a", {"train.py": with_exec}) == [("train.py", 11)]
    assert rows(tmp_path / "b", {"train.py": without}) == []  # the default decides: no resume
    assert rows(tmp_path / "c", {"train.py": literal}) == []  # code in view binds nothing here


LIGHTNING = """import lightning as L
import torch
{hooks}

class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 1), torch.nn.Dropout(0.2))

if __name__ == "__main__":
    L.seed_everything(0)
    trainer = L.Trainer()
    trainer.fit(Model(), ckpt_path={path})
"""


@pytest.mark.parametrize(
    "hooks, path, found",
    [
        ("", '"last"', True),
        ("", "None", False),
        ("import callbacks", '"last"', False),
    ],
)
def test_lightning_fit_with_a_checkpoint(tmp_path, hooks, path, found):
    callbacks = (
        "import torch\nimport lightning as L\n\n\nclass KeepRng(L.Callback):\n"
        "    def on_load_checkpoint(self, trainer, module, checkpoint):\n"
        "        torch.set_rng_state(checkpoint['rng'])\n"
    )
    files = {"train.py": LIGHTNING.format(hooks=hooks, path=path), "callbacks.py": callbacks}
    assert rows(tmp_path, files) == ([("train.py", 13)] if found else [])


def test_lightning_evaluation_with_a_checkpoint_is_no_resume(tmp_path):
    source = LIGHTNING.format(hooks="", path='"last"').replace("trainer.fit(", "trainer.validate(")
    assert rows(tmp_path, {"train.py": source}) == []


@pytest.mark.parametrize(
    "state, found",
    [
        ('{"model": model, "optimizer": optimizer}', True),
        ("dict(model=model, optim=optimizer)", True),
        ('{"model": model}', False),
    ],
)
def test_fabric_load_restores_what_its_state_holds(tmp_path, state, found):
    source = (
        "import torch\nfrom lightning.fabric import Fabric\n\n"
        "if __name__ == '__main__':\n    fabric = Fabric()\n    fabric.seed_everything(0)\n"
        "    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5))\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        f"    fabric.load('last.ckpt', {state})\n"
        "    fabric.backward(model(torch.ones(1, 4)).sum())\n"
    )
    assert rows(tmp_path, {"train.py": source}) == ([("train.py", 9)] if found else [])


def test_hugging_face_resume_restores_the_rng_states(tmp_path):
    source = script(after="trainer.train(resume_from_checkpoint=args.resume)")
    unguarded = script(after="trainer.train()")
    # (args.resume may be None, but where it is given the states are restored: a configuration choice)
    assert rows(tmp_path / "a", {"train.py": source}) == []
    source = script(after='trainer.train(resume_from_checkpoint="out/checkpoint-500")')
    assert rows(tmp_path / "b", {"train.py": source}) == []
    assert rows(tmp_path / "c", {"train.py": unguarded}) == [("train.py", RESTORE_ROW)]


# -- the language server: a pending resume carried through kept calls ----------------------
HELPERS = """import torch


def train(model, optimizer):
    for _ in range(3):
        model(torch.ones(2, 8)).sum().backward()
        optimizer.step()
"""

MAIN = """import torch
import helpers


def main(args):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.1))
    optimizer = torch.optim.Adam(model.parameters())
    optimizer.load_state_dict(torch.load(args.checkpoint))
    helpers.train(model, optimizer)


if __name__ == "__main__":
    main(None)
"""


def test_an_edited_session_reports_the_resume_where_a_fresh_one_does(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.torchrepro-lint]\nselect = [\"TRP108\"]\n")
    workspace = Workspace(tmp_path, persistent=False)
    paths = {}
    for name, text in {"helpers.py": HELPERS, "train.py": MAIN}.items():
        path = paths[name] = (tmp_path / name).resolve()
        path.write_text(text)
        session = workspace.open(path, text)
    train = paths["train.py"]
    restored = MAIN.replace("    helpers.train", "    torch.set_rng_state(torch.load('rng.pt'))\n    helpers.train")
    steps = [MAIN, MAIN.replace("    model =", "    x = 1\n    model ="), MAIN.replace("    model =", "    x = 1\n    y = 2\n    model ="),
             restored, MAIN + "# edit\n", MAIN]
    seen = []
    for text in steps:
        session.buffers[train] = text
        found = analysed_like_fresh(tmp_path, session)
        seen.append([f.row for findings in found.values() for f in findings if f.code == "TRP108"])
    assert seen == [[9], [10], [11], [], [9], [9]]


@pytest.mark.parametrize(
    "method, body",
    [
        ("forward", "return torch.nn.functional.dropout(x, 0.1, self.training)"),
        ("__getitem__", "return x if random.random() < 0.5 else -x"),
        ("helper", "return torch.nn.functional.dropout(x, 0.1, self.training)"),
    ],
)
def test_draws_in_methods_a_framework_calls_count_as_training_randomness(tmp_path, method, body):
    parts = (
        "import random\nimport torch\n\n\nclass Part(torch.nn.Module):\n"
        f"    def {method}(self, x):\n        {body}\n"
    )
    main = (
        "import torch\nimport parts\n\nif __name__ == '__main__':\n    torch.manual_seed(0)\n"
        "    model = torch.nn.Linear(2, 2)\n    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    optimizer.load_state_dict(torch.load('opt.pt'))\n    model(torch.ones(1, 2)).sum().backward()\n"
    )
    expected = [("train.py", 8)] if method != "helper" else []
    assert rows(tmp_path, {"parts.py": parts, "train.py": main}) == expected


def test_a_resume_in_a_function_given_to_fabric_launch_is_not_judged(tmp_path):
    source = (
        "import torch\nfrom lightning.fabric import Fabric\n\n\ndef main(fabric):\n    fabric.seed_everything(0)\n"
        "    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5))\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    fabric.load('last.ckpt', {'model': model, 'optimizer': optimizer})\n"
        "    fabric.backward(model(torch.ones(1, 4)).sum())\n\n\n"
        "if __name__ == '__main__':\n    Fabric().launch(main)\n"
    )
    assert rows(tmp_path, {"train.py": source}) == []
