from __future__ import annotations

import libcst as cst

from torchrepro_lint.rules.context import describe
from torchrepro_lint.project.known_apis import Kind
from torchrepro_lint.project.programs import torch_randomness, trains
from torchrepro_lint.rules.base import Example, Rule
from torchrepro_lint.rules.edits import insert_after_imports, insert_first_in_block, make_fix, module_name_for


class MissingSeed(Rule):
    code = "TRP101"
    name = "missing-seed"
    summary = "A program draws from torch's random generator but never seeds it."
    why = (
        "Initial weights, dropout masks, shuffling and random augmentations all come from torch's "
        "global generator. Unseeded, it starts from OS entropy, so two runs of the same command "
        "train different models and a result cannot be reproduced, nor a regression bisected."
    )
    fix_safety = "unsafe"
    fix = (
        "Seed once, first thing: `torch.manual_seed(seed)` as the first statement of the `__main__` "
        "block (or after the imports of a script), plus `random.seed`/`np.random.seed` where those "
        "draw. A seeding helper of your project or framework (`lightning.seed_everything`, "
        "`transformers.set_seed`, ...) counts. The fix inserts these calls with the seed of the `seed` "
        "setting (default 0); it is unsafe because it changes results."
    )
    not_reported = (
        "A program seeded on its path: in the `__main__` block, in `main()`, through a project helper "
        "in another module or a framework helper (`lightning.seed_everything`, `transformers.set_seed`). "
        "Conditional seeding (`if args.seed is not None: torch.manual_seed(args.seed)`) counts.",
        "A program that builds Hugging Face's `Trainer` (or `Seq2SeqTrainer`, a TRL trainer, a "
        "project's subclass of one): it seeds torch, NumPy and `random` with `args.seed` (42 by "
        "default) as it is built.",
        "A program that only evaluates loaded weights (a checkpoint, `from_pretrained`, torchvision "
        "`weights=`) and does not train: building its modules does not count, nor do their dropout "
        "layers, which draw only in a training-mode forward pass.",
        "A program that exports a model (ONNX, TorchScript, `torch.export`) and does not train: a "
        "tensor drawn only as the example input of `torch.jit.trace`/`torch.onnx.export` shapes no result.",
        "A program with no torch randomness, such as a NumPy-only data generator.",
        "Modules built where their init draws nothing, on the meta device or under an empty-init "
        "context (TRP105 lists them): what initialises them afterwards counts (a project's "
        "`init_weights()` after `to_empty`), a checkpoint loaded into them does not.",
        "A library module: it is not a program. Its `__main__` block (a model file's smoke test) is "
        "reported only when it trains (builds an optimizer).",
        "A guard-less file that pytest collects (`test_*.py` or `*_test.py` with `test*` functions or "
        "`Test*` classes): pytest imports it and seeds as its fixtures do, which the linter does not "
        "see. Its own `__main__` block is still a program.",
        "A program that seeds only with `torch.cuda.manual_seed` or `torch.cuda.manual_seed_all`: it "
        "gets TRP106 instead.",
    )
    where_reported = (
        "Once per program, at its `if __name__ == \"__main__\":` guard; at line 1 of a guard-less script.",
        "Randomness: building `nn` modules (parameter init), random tensor functions (`torch.randn`, "
        "`randperm`, ...), dropout in training, a shuffling DataLoader, random samplers, splits and "
        "transforms. The message names the first one found.",
        "A PEFT adapter initialised at random (`get_peft_model(model, LoraConfig(...))`) builds "
        "parameters as a module does; TRP105 lists which initialisations draw.",
        "Seeding: `torch.manual_seed`, a known framework helper, a function named in `seed-functions`, "
        "or a project function that calls one of these. Hugging Face's trainers seed; "
        "`accelerate.Accelerator` does not.",
        "Programs started by a command-line framework are followed into what it runs: the function (or "
        "one of the list or dict of functions) given to `fire.Fire`, `typer.run`, `tyro.cli`, "
        "`tyro.extras.subcommand_cli_from_dict`, `jsonargparse.CLI`/`auto_cli` or `absl.app.run`; a typer "
        "app, click group or tyro `SubcommandApp` where it is called (`app()`, `cli.main()`, `app.cli()`) "
        "or named by a console script: its callback, then one of its commands (`@app.command()`, "
        "`@cli.command()`, `@cli.group()`, `cli.add_command(f)`, `app.add_typer(sub)`); a function "
        "decorated with `@click.command()` or `@hydra.main(...)` where it is called. A command's "
        "parameters come from the command line: none is taken at its default.",
    )
    decisions = (
        "A program that seeds only `random`/NumPy but not torch gets TRP101 (torch is what is missing), "
        "never TRP102 as well.",
        "A library module (the spec does not say how to tell) is one that project code imports, or one "
        "of a package the project distributes: its pyproject's `[project] name` (`vit-pytorch` -> "
        "`vit_pytorch`), `[tool.setuptools] packages` or `packages.find` `include`, or "
        "`[tool.poetry] packages`. A package's `__main__.py` stays a program: it is the package's command.",
        "A `seed_everything(...)` method of an object the linter cannot place (`fabric`, a parameter of "
        "the function given to `fabric.launch`) is taken as Lightning Fabric's, which seeds torch, "
        "NumPy and `random`.",
        "A program too large to follow to the end (the analysis stops at a step limit) is not "
        "reported: a seed in the part not followed might be missed.",
        "Commands registered on a command-line app run only where the app is called or a console "
        "script names it: a module that files commands and is only imported runs none of them. Only "
        "registrations in the app's own module are seen (`@app.command()` on an `app` imported from "
        "another module is not).",
        "A console script naming an app object (`pkg.cli:app`, a typer app) is reported where the app "
        "is built, without a fix: no one statement runs before every command (the message suggests the "
        "app's callback). One naming a click group is fixed at the start of the group's function, "
        "which click runs before any of its commands.",
    )
    options = (
        "`seed`: the seed the fix inserts (default 0).",
        "`seed-functions`: helpers the linter cannot see (installed packages) that seed `random`, "
        "NumPy and torch; a call of one counts as seeding.",
    )
    reference = (
        ("Reproducibility", "https://pytorch.org/docs/stable/notes/randomness.html"),
        ("torch.manual_seed", "https://pytorch.org/docs/stable/generated/torch.manual_seed.html"),
    )
    hazards = (
        Example(
            '''import torch
from torch import nn

def main():
    model = nn.Linear(10, 2)
    loader = torch.utils.data.DataLoader(range(100), batch_size=8, shuffle=True)
    for batch in loader:
        model(torch.randn(8, 10)).sum().backward()

if __name__ == "__main__":  # <-- TRP101
    main()
''',
            "A training script with no seed anywhere",
            fixed='''import torch
from torch import nn

def main():
    model = nn.Linear(10, 2)
    loader = torch.utils.data.DataLoader(range(100), batch_size=8, shuffle=True)
    for batch in loader:
        model(torch.randn(8, 10)).sum().backward()

if __name__ == "__main__":
    torch.manual_seed(0)
    main()
''',
        ),
        Example(
            '''import torch  # <-- TRP101

noise = torch.randn(16, 3)
torch.save(noise, "noise.pt")
''',
            "A guard-less script: reported on line 1",
        ),
        Example(
            {
                "train.py": '''import random
import numpy as np
from model import build

if __name__ == "__main__":  # <-- TRP101
    random.seed(0)
    np.random.seed(0)
    net = build()
''',
                "model.py": '''import torch.nn as nn

def build():
    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())
''',
            },
            "random and NumPy seeded, torch not; the randomness is in another module",
        ),
    )
    traps = (
        Example(
            {
                "train.py": '''import torch.nn as nn
from utils import set_seed

def main():
    set_seed(1234)
    return nn.Linear(4, 4)

if __name__ == "__main__":
    main()
''',
                "utils.py": '''import random
import numpy as np
import torch

def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
''',
            },
            "Seeded through a project helper in another module",
        ),
        Example(
            '''import lightning as L
import torch.nn as nn

if __name__ == "__main__":
    L.seed_everything(7)
    model = nn.Linear(3, 3)
''',
            "Seeded through a framework helper",
        ),
        Example(
            '''import lightning as L
import torch.nn as nn

def train(fabric):
    fabric.seed_everything(7)
    model = fabric.setup(nn.Linear(3, 3))

if __name__ == "__main__":
    L.Fabric(accelerator="cpu").launch(train)
''',
            "Lightning Fabric's `seed_everything`, on the object `launch` hands the function",
        ),
        Example(
            '''from torchvision import transforms
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

if __name__ == "__main__":
    augment = transforms.RandomHorizontalFlip()
    model = AutoModelForCausalLM.from_pretrained("org/small-lm")
    Trainer(model=model, args=TrainingArguments(output_dir="out")).train()
''',
            "Hugging Face's Trainer seeds as it is built (`args.seed`, 42 by default)",
        ),
        Example(
            '''import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 1)

if __name__ == "__main__":
    net = Net()
    net.load_state_dict(torch.load("best.pt"))
    net.eval()
    with torch.no_grad():
        print(net(torch.ones(1, 8)))
''',
            "Checkpoint-only evaluation draws nothing that matters",
        ),
        Example(
            '''import numpy as np

def make_data():
    rng = np.random.default_rng(3)
    return rng.normal(size=100)

if __name__ == "__main__":
    np.save("data.npy", make_data())
''',
            "No torch randomness at all",
        ),
        Example(
            '''import torch.nn as nn

class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
''',
            "A library module is not a program",
        ),
    )

    def check_programs(self, context):
        for program in context.programs:
            facts = program.facts
            if facts.truncated or facts.has(Kind.SEED_TORCH, Kind.SEED_CUDA):
                continue
            if program.imported and not trains(facts):
                continue  # a library module's `__main__` smoke test, not a training program
            if facts.has(Kind.EXPORT) and not trains(facts):
                continue  # an export script: random example inputs do not change what it writes
            first = torch_randomness(facts)
            if first is None:
                continue
            others = [name for kind, name in ((Kind.SEED_RANDOM, "random"), (Kind.SEED_NUMPY, "NumPy")) if facts.has(kind)]
            seeded = f" (it seeds {' and '.join(others)}, not torch)" if others else ""
            where = _where(program)
            yield context.report(
                self,
                program.entry,
                program.anchor_ref,
                f"program never seeds torch{seeded}, but draws from its generator ({describe(first.site)}): "
                f"weights, dropout and shuffling change every run; call `torch.manual_seed(seed)` {where}",
                fix=_fix(program, context.config.seed),
            )


def _where(program) -> str:
    if program.anchor_ref is None:
        return "after the imports"
    if program.kind != "console-script":
        return "at the top of the `__main__` block"
    if isinstance(program.entry.nodes[program.anchor_ref], cst.FunctionDef):
        return f"at the start of `{program.function}`"
    # a command-line app object (extract/cli_apps.py): no one place runs before every command
    return f"in the callback of `{program.function}` or at the start of each of its commands"


def _fix(program, seed: int):
    """Seed torch (and `random`/NumPy where the program draws from them) before anything runs."""
    module, facts = program.entry, program.facts
    edits, lines = [], []
    for qualname, kind, seeded, template in (
        ("torch", None, None, "{}.manual_seed({})"),
        ("random", Kind.DRAW_RANDOM, Kind.SEED_RANDOM, "{}.seed({})"),
        ("numpy", Kind.DRAW_NUMPY, Kind.SEED_NUMPY, "{}.random.seed({})"),
    ):
        if kind is not None and not (facts.has(kind) and not facts.has(seeded)):
            continue
        name, imports = module_name_for(module, qualname)
        edits.extend(imports)
        lines.append(template.format(name, seed))
    if program.anchor_ref is None:
        edits.extend(insert_after_imports(module, line) for line in lines)
    else:
        block = module.nodes[program.anchor_ref]
        edits.extend(insert_first_in_block(module, block, line) for line in lines)
    return make_fix("unsafe", f"Seed the program with {seed} (the `seed` setting)", edits)
