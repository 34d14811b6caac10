from __future__ import annotations

from torchrepro_lint.findings import Severity
from torchrepro_lint.project import ir
from torchrepro_lint.project.extract.resumes import RESUMES_BY_FABRIC, RESUMES_TRAIN
from torchrepro_lint.project.known_apis import Kind
from torchrepro_lint.rules.base import Example, Rule

# Randomness that training goes on drawing after a resume: dropout, shuffling loaders, random
# samplers and transforms, draws of torch's, NumPy's or Python's global generator
_DRAWN_IN_TRAINING = (Kind.RANDOMNESS, Kind.DRAW, Kind.DRAW_RANDOM, Kind.DRAW_NUMPY)
# Methods that a training loop runs through the framework (a module's forward, a dataset's items)
_CALLED_METHODS = frozenset({"forward", "__call__", "__getitem__", "__iter__", "__next__"})
# Words of a call that restores an RNG state: a Lightning hook the run cannot place may hold one
_RESTORE_WORDS = ("set_rng_state", "set_rng_state_all", "setstate", "set_state")

_REPLAYS = (
    "the resumed run starts torch's (and NumPy's, `random`'s) generators where the seed left them, so it "
    "replays the random draws that followed the seed (dropout masks, shuffled batches, augmentations) "
    "instead of continuing those of the run it resumes"
)


class ResumeWithoutRngState(Rule):
    code = "TRP108"
    name = "resume-without-rng-state"
    severity = Severity.NOTE
    summary = (
        "A seeded training script resumes from a checkpoint (restores an optimizer's state and trains on) "
        "without restoring the RNG states."
    )
    why = (
        "The seed makes an uninterrupted run repeatable, and a resumed one is not that run: the checkpoint "
        "brings back the weights, the optimizer and the step, but the generators start again from the seed, "
        "so the resumed run draws again the dropout masks, batch orders and augmentations of the run's first "
        "steps. Two runs of the same command then differ in whether, and where, they were interrupted."
    )
    fix = (
        "Save the RNG states with the checkpoint (`torch.get_rng_state()`, `torch.cuda.get_rng_state_all()`, "
        "`np.random.get_state()`, `random.getstate()`) and restore them when resuming (`torch.set_rng_state`, "
        "`torch.cuda.set_rng_state_all`, `np.random.set_state`, `random.setstate`), or resume through a "
        "framework that does (Hugging Face's `Trainer.train(resume_from_checkpoint=...)`, Accelerate's "
        "`Accelerator.load_state`). There is no autofix: the states must first be written into the checkpoint."
    )
    not_reported = (
        "A resume that restores an RNG state on the same path, before the optimizer's state or after it and "
        "before training continues: `torch.set_rng_state`/`torch.random.set_rng_state`, "
        "`torch.cuda.set_rng_state(_all)`, `np.random.set_state`, `random.setstate`, a `torch.Generator`'s (or "
        "an RNG object's) `set_state`, also inside a project helper (`load_checkpoint(model, optimizer, path)`).",
        "Hugging Face's `Trainer.train(resume_from_checkpoint=...)` and Accelerate's `Accelerator.load_state`: "
        "both restore Python's, NumPy's, torch's and the devices' RNG states.",
        "Fine-tuning from pretrained weights with a fresh optimizer, a linear probe on a frozen backbone: "
        "`model.load_state_dict(...)` alone is no resume; nor is a scheduler's or a scaler's `load_state_dict`.",
        "Evaluation: a path that restores an optimizer's state and does not train after it.",
        "An unseeded program (TRP101 reports it): there is no run to repeat.",
        "A reseed from the run's progress after the restore (`torch.manual_seed(seed + epoch)` at each epoch): "
        "from there on the resumed run draws what the uninterrupted one did.",
        "A program whose training draws nothing at random: no dropout layer, shuffling loader, random sampler, "
        "transform or draw in the code it runs, nor a draw in a `forward`, `__call__`, `__getitem__`, "
        "`__iter__` or `__next__` of a module it imports (a language model without dropout fed by a data loader "
        "whose position the checkpoint restores replays nothing).",
        "A resume inside a callback (a function given to `fabric.launch`, a hook): the run cannot place it on a "
        "path, nor tell what comes before it.",
    )
    where_reported = (
        "At the call that restores the optimizer's state: `<optimizer>.load_state_dict(...)`, where the project "
        "calls it (in a helper such as `resume_checkpoint(...)`, the helper's line), once however many "
        "programs reach it; at the entry program's call of the helper when the helper is not linted.",
        "An optimizer: a receiver whose name says so (`optimizer`, `optim`, `opt_g`, `self.optimizers[0]`), or "
        "one built in view by `torch.optim` (not `lr_scheduler`), apex, bitsandbytes, torch_optimizer or timm.",
        "Training continues: a `.backward()` (`loss.backward()`, `scaler.scale(loss).backward()`, "
        "`accelerator.backward`, `fabric.backward`), `optimizer.step()`, `optimizer.zero_grad()` or "
        "`scaler.step(optimizer)` after the restore on the same path, in the program or a project function it calls.",
        "Lightning's `Trainer.fit(..., ckpt_path=...)` (a path that is not `None`): its checkpoint connector "
        "(`_CheckpointConnector.restore`: model, callbacks, loops, precision plugin, optimizers, schedulers) "
        "restores no RNG state, and `fit` trains on; reported at the `fit` call.",
        "Lightning Fabric's `fabric.load(path, state)` where `state` (a dict in view) holds an optimizer: "
        "`Fabric.load` restores the objects in `state` and no RNG state.",
    )
    decisions = (
        "Note, not warning: an uninterrupted run stays reproducible; only a resumed one departs from it.",
        "A restore whose RNG states are restored on some path of the program is not reported, even where a "
        "runtime flag skips them on another (`if not args.no_load_rng:` in Megatron-LM's `load_checkpoint`): "
        "the author wrote the restore, and turning it off is a configuration choice, as TRP201 treats "
        "switches under independent flags.",
        "The RNG restore must come before training continues: one after the first resumed step comes too late "
        "for the draws of that step. Any RNG restore counts, of torch's generator or another (the author saved "
        "and restores RNG state): the rule does not ask which generators the training draws from.",
        "Framework facts, read in their sources (transformers at commit 000945a9, accelerate at 16cb6eb8, "
        "Lightning 2.6.2): "
        "transformers' `Trainer._load_rng_state` (trainer.py), called "
        "from `Trainer._inner_training_loop` when `resume_from_checkpoint is not None`, restores `random`, NumPy, "
        "torch's CPU and device states; accelerate's `Accelerator.load_state` (accelerator.py) calls "
        "`load_accelerator_state` (checkpointing.py), which restores `random`, NumPy, torch and "
        "`torch.cuda.set_rng_state_all`; Lightning's `_CheckpointConnector.restore` (pytorch/trainer/connectors/"
        "checkpoint_connector.py) restores no RNG state (`_set_rng_states` in fabric/utilities/seed.py is "
        "called only by `isolate_rng` and the multiprocessing launcher's `_GlobalStateSnapshot.restore`); "
        "`Fabric.load` (fabric/fabric.py) hands `state` to the strategy's `load_checkpoint`, which restores "
        "modules and optimizers only.",
        "A Lightning resume is not reported where a module the program imports mentions an RNG restore "
        "(`set_rng_state`, `setstate`, `set_state`): a hook such as `on_load_checkpoint`, which Lightning "
        "calls, may restore them, out of the linter's sight.",
        "`exec(open(\"configurator.py\").read())` at a module's top level (nanoGPT's scripts) may rebind any "
        "of the module's settings: after it, a name bound to a literal is a runtime value, so "
        "`init_from == \"resume\"` is both true and false rather than the default's answer.",
        "Whether training draws at random after the resume is judged on the whole program, not on the path: "
        "dropout layers, shuffling loaders, random samplers and transforms and random draws in the code it runs, "
        "and draws in the methods a training loop runs through the framework (`forward`, `__call__`, "
        "`__getitem__`, `__iter__`, `__next__`) in the modules it imports, which the run does not call itself "
        "(timm's models draw their dropout in `forward`).",
    )
    reference = (
        ("Reproducibility", "https://pytorch.org/docs/stable/notes/randomness.html"),
        ("torch.get_rng_state / torch.set_rng_state", "https://pytorch.org/docs/stable/generated/torch.set_rng_state.html"),
        ("Saving and loading a general checkpoint", "https://pytorch.org/tutorials/recipes/recipes/saving_and_loading_a_general_checkpoint.html"),
        ("Accelerate: checkpointing (`save_state`/`load_state`)", "https://huggingface.co/docs/accelerate/usage_guides/checkpoint"),
    )
    hazards = (
        Example(
            '''import argparse
import torch
import torch.nn as nn

def main(args):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.1), nn.Linear(16, 1))
    optimizer = torch.optim.AdamW(model.parameters())
    if args.resume:
        state = torch.load(args.resume)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])  # <-- TRP108
    for step in range(100):
        loss = model(torch.ones(4, 16)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, "last.pt")

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--resume", default="")
    main(parser.parse_args())
''',
            "A resume restores the weights and the optimizer, not the generators",
            fixed='''import argparse
import torch
import torch.nn as nn

def main(args):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.1), nn.Linear(16, 1))
    optimizer = torch.optim.AdamW(model.parameters())
    if args.resume:
        state = torch.load(args.resume)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"])
    for step in range(100):
        loss = model(torch.ones(4, 16)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "rng": torch.get_rng_state()}, "last.pt")

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--resume", default="")
    main(parser.parse_args())
''',
        ),
        Example(
            {
                "train.py": '''import sys
import torch
from torch.utils.data import DataLoader
from checkpoints import resume_from

if __name__ == "__main__":
    torch.manual_seed(1)
    net = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    start = resume_from(sys.argv[1], net, opt) if len(sys.argv) > 1 else 0
    loader = DataLoader(torch.arange(64.0).view(8, 8), batch_size=2, shuffle=True)
    for batch in loader:
        net(batch).sum().backward()
        opt.step()
''',
                "checkpoints.py": '''import torch

def resume_from(path, net, opt):
    saved = torch.load(path)
    net.load_state_dict(saved["net"])
    opt.load_state_dict(saved["opt"])  # <-- TRP108
    return saved["epoch"] + 1
''',
            },
            "The restore in a project helper is reported in the helper",
        ),
        Example(
            '''import torch
import torch.nn as nn

init_from = "scratch"
exec(open("configurator.py").read())

torch.manual_seed(1337)
model = nn.Sequential(nn.Embedding(64, 32), nn.Dropout(0.2), nn.Linear(32, 64))
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
if init_from == "resume":
    checkpoint = torch.load("out/ckpt.pt")
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])  # <-- TRP108
while True:
    x = torch.randint(64, (8, 16))
    loss = model(x).logsumexp(-1).mean()
    loss.backward()
    optimizer.step()
''',
            "A configuration file run with `exec` may choose the resume branch",
        ),
        Example(
            '''import argparse
import lightning as L
import torch

class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.3), torch.nn.Linear(8, 1))

    def training_step(self, batch, batch_idx):
        return self.net(batch).mean()

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters())

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--ckpt", default=None)
    args = parser.parse_args()
    L.seed_everything(7)
    trainer = L.Trainer(max_epochs=3)
    trainer.fit(Model(), torch.utils.data.DataLoader(torch.randn(32, 8)), ckpt_path=args.ckpt)  # <-- TRP108
''',
            "Lightning's `fit(ckpt_path=...)` resumes optimizers and loops, not the RNG states",
        ),
        Example(
            '''import torch
from lightning.fabric import Fabric

if __name__ == "__main__":
    fabric = Fabric()
    fabric.seed_everything(3)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model, optimizer = fabric.setup(model, optimizer)
    state = {"model": model, "optimizer": optimizer, "step": 0}
    fabric.load("last.ckpt", state)  # <-- TRP108
    for _ in range(10):
        fabric.backward(model(torch.ones(2, 4)).sum())
        optimizer.step()
''',
            "Fabric's `load` restores the optimizer in `state` and no RNG state",
        ),
    )
    traps = (
        Example(
            {
                "train.py": '''import torch
from utils import load_checkpoint

if __name__ == "__main__":
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.1))
    optimizer = torch.optim.Adam(model.parameters())
    load_checkpoint(model, optimizer, "last.pt")
    for _ in range(5):
        model(torch.ones(1, 8)).sum().backward()
        optimizer.step()
''',
                "utils.py": '''import random
import numpy as np
import torch

def load_checkpoint(model, optimizer, path):
    state = torch.load(path, weights_only=False)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["torch_rng"])
    torch.cuda.set_rng_state_all(state["cuda_rng"])
    np.random.set_state(state["numpy_rng"])
    random.setstate(state["python_rng"])
''',
            },
            "A project helper that restores the RNG states with the optimizer's",
        ),
        Example(
            '''import torch
import torchvision

if __name__ == "__main__":
    torch.manual_seed(0)
    model = torchvision.models.resnet18()
    model.load_state_dict(torch.load("pretrained.pt"))
    model.fc = torch.nn.Linear(512, 10)
    optimizer = torch.optim.SGD(model.fc.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)
    scheduler.load_state_dict(torch.load("schedule.pt"))
    loader = torch.utils.data.DataLoader(torch.randn(16, 3, 32, 32), batch_size=4, shuffle=True)
    for images in loader:
        model(images).sum().backward()
        optimizer.step()
''',
            "Fine-tuning pretrained weights with a fresh optimizer (a scheduler's state is no resume)",
        ),
        Example(
            '''import sys
import torch

def evaluate(model, data):
    with torch.no_grad():
        return model(data).mean().item()

if __name__ == "__main__":
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.2))
    optimizer = torch.optim.Adam(model.parameters())
    checkpoint = torch.load(sys.argv[1])
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    print(evaluate(model.eval(), torch.randn(8, 4)))
''',
            "Evaluation: the optimizer's state is loaded, nothing trains after it",
        ),
        Example(
            '''from accelerate import Accelerator
import torch

if __name__ == "__main__":
    accelerator = Accelerator()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.1))
    optimizer = torch.optim.AdamW(model.parameters())
    model, optimizer = accelerator.prepare(model, optimizer)
    accelerator.load_state("checkpoints/last")
    extra = torch.optim.SGD(model.parameters(), lr=0.1)
    extra.load_state_dict(torch.load("checkpoints/extra.pt"))
    for _ in range(3):
        accelerator.backward(model(torch.ones(2, 4)).sum())
        optimizer.step()
''',
            "Accelerate's `load_state` restores the RNG states",
        ),
        Example(
            '''import torch

if __name__ == "__main__":
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.1))
    optimizer = torch.optim.Adam(model.parameters())
    optimizer.load_state_dict(torch.load("optimizer.pt"))
    for _ in range(3):
        model(torch.ones(2, 4)).sum().backward()
        optimizer.step()
''',
            "An unseeded program: TRP101's, not a resume that departs from a seeded run",
        ),
        Example(
            '''import torch

if __name__ == "__main__":
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.1))
    optimizer = torch.optim.Adam(model.parameters())
    saved = torch.load("last.pt")
    optimizer.load_state_dict(saved["optimizer"])
    for epoch in range(saved["epoch"] + 1, 90):
        torch.manual_seed(1000 + epoch)
        model(torch.ones(2, 4)).sum().backward()
        optimizer.step()
''',
            "Each epoch reseeded from its number: the resumed epochs draw what they would have",
        ),
    )

    def check_programs(self, context):
        reported: set = set()
        drawing: dict = {}  # module path -> whether a method training runs through a framework draws
        for program in context.programs:
            facts = program.facts
            resumes = facts.of(Kind.RESUMED_WITHOUT_RNG)
            if not resumes or not (facts.has(*_DRAWN_IN_TRAINING) or _draws_in_called_methods(context, program, drawing)):
                continue
            restored_elsewhere = {resume.site for resume in facts.of(Kind.RESUMED_WITH_RNG)}
            for resume in resumes:
                if resume.site in reported or resume.site in restored_elsewhere:
                    continue
                if resume.detail == RESUMES_TRAIN and _restores_out_of_sight(context, program):
                    continue
                reported.add(resume.site)
                message = _message(resume.detail)
                finding = context.report(self, *resume.site, message)
                if finding is None and resume.anchor != resume.site:
                    finding = context.report(self, *resume.anchor, message)
                if finding is not None:
                    yield finding


def _draws_in_called_methods(context, program, memo: dict) -> bool:
    """A module the program runs has a `forward`, `__call__`, `__getitem__`, `__iter__` or `__next__`
    that draws (a dropout in a model's forward, an augmentation in a dataset's `__getitem__`, a
    mixup's `__call__`): methods the training loop calls through the framework, out of the run's sight."""
    for path in program.facts.modules:
        found = memo.get(path)
        if found is None:
            module = context.project.modules.get(path)
            found = memo[path] = module is not None and any(
                name.rsplit(".", 1)[-1] in _CALLED_METHODS and _draws(module.code(name).body) for name in module.table.functions
            )
        if found:
            return True
    return False


def _draws(statements) -> bool:
    for statement in statements:
        if isinstance(statement, ir.Effect) and statement.kind in _DRAWN_IN_TRAINING:
            return True
        if isinstance(statement, ir.Branch) and (_draws(statement.then) or _draws(statement.orelse)):
            return True
        if isinstance(statement, ir.Try) and any(_draws(block) for block in ir.blocks_of(statement)):
            return True
    return False


def _restores_out_of_sight(context, program) -> bool:
    """A module the program runs mentions an RNG restore (a Lightning hook may hold it)."""
    reached = program.facts.modules
    return any(m.path in reached for word in _RESTORE_WORDS for m in context.project.modules_mentioning(word))


def _message(detail: tuple) -> str:
    if detail == RESUMES_TRAIN:
        return (
            "Lightning resumes here (`fit(ckpt_path=...)` restores the model, optimizers, schedulers and loop "
            f"progress, but no RNG state) in a seeded program: {_REPLAYS}; save the RNG states in "
            "`on_save_checkpoint` and restore them in `on_load_checkpoint`"
        )
    if detail == RESUMES_BY_FABRIC:
        return (
            "`fabric.load` restores the optimizer in `state` here, and training goes on, but no RNG state is "
            f"restored (Fabric restores only the objects in `state`) in a seeded program: {_REPLAYS}; put "
            "`torch.get_rng_state()` (and the CUDA, NumPy and `random` states) in the saved state and restore "
            "them with `torch.set_rng_state(...)` after loading"
        )
    return (
        "the optimizer's state is restored here from a checkpoint and training goes on, but no RNG state is "
        f"restored on this path of a seeded program: {_REPLAYS}; save `torch.get_rng_state()` (with "
        "`torch.cuda.get_rng_state_all()`, `np.random.get_state()`, `random.getstate()`) in the checkpoint "
        "and restore them (`torch.set_rng_state(...)`, ...) when resuming"
    )
