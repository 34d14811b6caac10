from __future__ import annotations

from torchrepro_lint.rules.context import describe
from torchrepro_lint.project.known_apis import ADAPTER, ADAPTER_OF_TRAINER, ADAPTER_OF_TRAINER_WHEN_GIVEN, TRAINER_SEED, Kind
from torchrepro_lint.rules.base import Example, Rule


class LateSeed(Rule):
    code = "TRP105"
    name = "late-seed"
    summary = "torch is seeded only after the program already drew from its generator."
    why = (
        "Whatever was drawn before the seed, typically the model's initial weights, came from an "
        "unseeded generator: it differs every run even though the program 'is seeded'. The bug "
        "hides well, because everything after the seed does repeat."
    )
    fix = "Move the seeding call before the first model construction or random draw."
    decisions = (
        "Reported at the seeding call in the entry program (the call of the helper that seeds, "
        "when seeding happens in another module). A draw whose value becomes the seed is no late "
        "seed, also through the seeding function's assignments (`seed = broadcast(drawn).item(); "
        "torch.manual_seed(seed + rank)`, torchtune's `set_seed()` without a seed), and so is a draw "
        "assigned to a variable whose name says seed (`seed = torch.randint(1 << 31, size=[])`), "
        "whichever way its value then reaches the seeding call (a config dict, NumPy's generator), unless "
        "it seeds a generator object (`generator.manual_seed(seed)`: what that generator draws then "
        "follows the unseeded draw, as accelerate's XLA data loaders do). On a path where the program "
        "declined an optional seed (a branch that seeds, on a condition that names a seed: `if "
        "args.seed is not None: set_seed(args.seed)`, not taken), a later reseed "
        "for something else (sd-scripts' sample images, each from its prompt's seed) is not reported: "
        "that run chose to stay random. Constructing a DataLoader, a sampler or an "
        "optimizer draws nothing yet. Loading a checkpoint over a freshly built model makes its "
        "random init irrelevant, whether the load comes before the seed or after it on the same "
        "path (a load on one branch only leaves the other branch's run with the unseeded init). A draw matters only when what it drew outlives the seed: "
        "`from_pretrained` of a transformers task model whose head is made for the user's labels "
        "(`...For<Task>` with a classification, multiple-choice, question-answering, segmentation, "
        "detection, CTC or x-vector task, e.g. `AutoModelForSequenceClassification`) counts, since "
        "that head is missing from a base checkpoint and initialised randomly; a generation head "
        "(`AutoModelForCausalLM`, `...MaskedLM`, `...Seq2SeqLM`, `...ConditionalGeneration`) comes "
        "with its checkpoint, and so does the score head of a reward model (a checkpoint the code "
        "names `reward_...`), and a pretrained VAE, UNet, text encoder, tokenizer or scheduler "
        "(`AutoencoderKL.from_pretrained`) loads everything it has and draws nothing. Module-level "
        "code of an imported module inside `try:` under an environment condition (`if "
        "os.environ.get(\"LIB_TEST_DEVICE\"): try: torch.randn(3, device=...)`) is an import-time "
        "probe: neither a draw nor CUDA evidence. Hugging Face's `Trainer` (and `Seq2SeqTrainer`, "
        "TRL's `SFTTrainer`, `DPOTrainer`, `GRPOTrainer`, `RewardTrainer`, `KTOTrainer`, "
        "`RLOOTrainer`, which call its constructor) seeds torch, NumPy and `random` with "
        "`args.seed` as it is built (read in its `__init__`): a model built before it was drawn "
        "unseeded; the message says so and suggests `set_seed` first or `model_init=`. A project's "
        "own subclass of one of them seeds the same way when it has no `__init__` of its own or its "
        "`__init__` reaches the base's (`super().__init__(...)`, `Trainer.__init__(self, ...)`), "
        "at that point: what its `__init__` draws before is drawn unseeded; a subclass whose "
        "`__init__` never calls the base's does not seed. PEFT adapters initialised at random are "
        "a draw that outlives a later seed (they are trained from): `get_peft_model`, "
        "`inject_adapter_in_model`, `PeftModel(...)`/`PeftModelFor...(...)` and `LoraModel` with a "
        "`LoraConfig` whose `init_lora_weights` is True (the default: kaiming A), \"gaussian\", "
        "False (`nn.Linear`'s own random A and B), \"orthogonal\", \"pissa_niter_<n>\" or "
        "\"lora_ga\" (randomized SVD), an `AdaLoraConfig`, or an `IA3Config(init_ia3_weights=False)`; "
        "not \"pissa\", \"olora\", \"corda\", \"mica\", \"loftq\" or \"eva\" (computed from the "
        "weights or from data), not `low_cpu_mem_usage=True` (empty weights, loaded later), not "
        "`PeftModel.from_pretrained` (loads the adapter). A config the code does not show (a "
        "parameter, a function's result, `**kwargs`) is taken to be LoRA's default; an "
        "`init_lora_weights=` taken from configuration (`args.init`) is the author's choice and "
        "not taken to draw (PEFT's own OLoRA and PiSSA examples do so, defaulting to their "
        "method); other PEFT methods (VeRA, LoHa, prompt tuning, ...) are not modelled. A fresh "
        "adapter matters only to a program that trains (an optimizer, `backward`, a trainer): "
        "LoRA's B starts at zero, so until training the model computes what its base does. TRL's `SFTTrainer`, "
        "`DPOTrainer`, `GRPOTrainer`, `KTOTrainer` and `RLOOTrainer` call `get_peft_model` on "
        "their `peft_config=` before Trainer's constructor seeds (read in their `__init__`), so "
        "without an earlier seed the adapter is drawn unseeded: reported at the trainer, whose "
        "message names the adapter and asks for `set_seed` before it (`model_init=` does not "
        "help: the adapter is added after it). Where the code passes a config decided at run time (TRL's scripts pass `get_peft_config(model_args)`, None unless `--use_peft`; a parameter; `config if flag else None`) the message says the adapter is drawn when a config is given rather than asserting it. `RewardTrainer` seeds first. Files quoted in "
        "messages are shown relative to the working directory, like the findings' own paths."
    )
    hazards = (
        Example(
            '''import torch
import torch.nn as nn

def main():
    model = nn.Linear(32, 10)
    torch.manual_seed(0)  # <-- TRP105
    print(model(torch.randn(1, 32)))

if __name__ == "__main__":
    main()
''',
            "Model built, then seeded",
        ),
        Example(
            {
                "train.py": '''import torch
from helpers import seed_everything

if __name__ == "__main__":
    noise = torch.randn(4)
    seed_everything(3)  # <-- TRP105
''',
                "helpers.py": '''import torch

def seed_everything(seed):
    torch.manual_seed(seed)
''',
            },
            "Seeding through a helper, after a draw",
        ),
        Example(
            '''import torch
from transformers import AutoModelForSequenceClassification, set_seed

if __name__ == "__main__":
    model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased")
    set_seed(42)  # <-- TRP105
''',
            "A pretrained model's new head is initialised before the seed",
        ),
        Example(
            '''import torch.nn as nn
from transformers import Trainer, TrainingArguments

if __name__ == "__main__":
    model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 2))
    trainer = Trainer(model=model, args=TrainingArguments(output_dir="out", seed=7))  # <-- TRP105
    trainer.train()
''',
            "Hugging Face's Trainer seeds as it is built: after the model it is given",
        ),
        Example(
            '''from peft import LoraConfig
from transformers import AutoModelForCausalLM
from trl import SFTTrainer

if __name__ == "__main__":
    model = AutoModelForCausalLM.from_pretrained("org/small-lm")
    trainer = SFTTrainer(model=model, peft_config=LoraConfig(r=16))  # <-- TRP105
    trainer.train()
''',
            "TRL's SFTTrainer draws the LoRA weights of `peft_config=` before it seeds",
        ),
    )
    traps = (
        Example(
            '''import torch

if __name__ == "__main__":
    seed = torch.randint(0, 2**31, (1,)).item()
    print("seed", seed)
    torch.manual_seed(seed)
''',
            "A draw whose value becomes the seed",
        ),
        Example(
            '''import numpy as np
import torch


def train(config):
    np.random.seed(config["seed"])
    torch.manual_seed(np.random.randint(1 << 31))
    return torch.nn.Linear(4, 4)


if __name__ == "__main__":
    config = {}
    run_seed = torch.randint(1 << 31, size=[])
    config["seed"] = int(run_seed)
    train(config)
''',
            "A seed drawn at random, handed on in a config and seeding torch through NumPy",
        ),
        Example(
            '''import torch
from torch.utils.data import DataLoader

if __name__ == "__main__":
    loader = DataLoader(list(range(10)), shuffle=True)
    optimizer_cls = torch.optim.SGD
    torch.manual_seed(0)
    for batch in loader:
        pass
''',
            "A DataLoader constructed before the seed draws nothing yet",
        ),
        Example(
            '''import torch
import torch.nn as nn

if __name__ == "__main__":
    model = nn.Linear(8, 8)
    model.load_state_dict(torch.load("ckpt.pt"))
    torch.manual_seed(0)
''',
            "Weights loaded from a checkpoint replace the random init",
        ),
        Example(
            '''import torch
from diffusers import AutoencoderKL

if __name__ == "__main__":
    vae = AutoencoderKL.from_pretrained("org/model", subfolder="vae")
    torch.manual_seed(0)
''',
            "A pretrained part that loads every weight draws nothing",
        ),
        Example(
            '''from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

if __name__ == "__main__":
    model = AutoModelForCausalLM.from_pretrained("org/small-lm")
    trainer = Trainer(model=model, args=TrainingArguments(output_dir="out"))
    trainer.train()
''',
            "A language model's head comes with its checkpoint: nothing drawn before the trainer's seed",
        ),
        Example(
            '''from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, set_seed

if __name__ == "__main__":
    model = AutoModelForCausalLM.from_pretrained("org/small-lm")
    model = get_peft_model(model, LoraConfig(r=16, init_lora_weights="pissa"))
    set_seed(0)
''',
            "PiSSA computes the adapter from the base weights: nothing drawn",
        ),
    )

    def check_programs(self, context):
        for program in context.programs:
            by_trainer = {o.anchor for o in program.facts.of(Kind.SEED_TORCH) if o.detail[:1] == (TRAINER_SEED,)}
            for (module, ref), consumed in program.facts.late_seeds.items():
                if consumed.detail[:1] == ADAPTER and (module, ref) not in by_trainer and not program.facts.has(Kind.TRAINING):
                    continue  # a fresh adapter matters to training only (programs.torch_randomness)
                if consumed.detail == ADAPTER_OF_TRAINER:
                    yield context.report(
                        self,
                        module,
                        ref,
                        "torch is seeded here (the trainer calls `set_seed(args.seed)` as it is built), but only "
                        "after the trainer initialised the adapter of its `peft_config=` at random (PEFT's "
                        "`get_peft_model`; LoRA's A matrices, say): the adapter starts from different weights "
                        "every run, whatever the seed; call `transformers.set_seed(args.seed)` before building the trainer",
                    )
                    continue
                if consumed.detail == ADAPTER_OF_TRAINER_WHEN_GIVEN:
                    yield context.report(
                        self,
                        module,
                        ref,
                        "torch is seeded here (the trainer calls `set_seed(args.seed)` as it is built); when a config "
                        "is given to its `peft_config=` (decided at run time here: TRL's `get_peft_config(...)` is None "
                        "unless PEFT is asked for), the trainer first initialises that adapter at random (PEFT's "
                        "`get_peft_model`; LoRA's A matrices, say), before the seed, so the adapter starts from "
                        "different weights every run, whatever the seed; call `transformers.set_seed(args.seed)` "
                        "before building the trainer",
                    )
                    continue
                if (module, ref) in by_trainer:
                    seeded, advice = (
                        "torch is seeded here (the trainer calls `set_seed(args.seed)` as it is built)",
                        "seed before it (`transformers.set_seed(args.seed)` first), or pass `model_init=` "
                        "so that the trainer builds the model after its seed",
                    )
                else:
                    seeded, advice = "torch is seeded here", "seed before it"
                yield context.report(
                    self,
                    module,
                    ref,
                    f"{seeded}, after {describe(consumed.site)} already drew from the unseeded "
                    f"generator: that draw (initial weights, say) changes every run; {advice}",
                )
