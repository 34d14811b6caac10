from __future__ import annotations

from torchrepro_lint.rules.context import describe
from torchrepro_lint.project.known_apis import ADAPTER, ADAPTER_OF_TRAINER, ADAPTER_OF_TRAINER_WHEN_GIVEN, TRAINER_SEED, Kind
from torchrepro_lint.rules.base import Example, Rule
from torchrepro_lint.rules.late_seed_fix import seed_move_fix


class LateSeed(Rule):
    code = "TRP105"
    name = "late-seed"
    summary = "torch is seeded only after the program already drew from its generator."
    why = (
        "Whatever was drawn before the seed, typically the model's initial weights, came from an "
        "unseeded generator: it differs every run even though the program 'is seeded'. The bug "
        "hides well, because everything after the seed does repeat."
    )
    fix_safety = "unsafe"
    fix = (
        "Move the seeding call before the first model construction or random draw. The fix moves "
        "the seeding statement (and the comment lines right above it) to just above the statement "
        "of its block that runs the first draw (the draw, or a call of a function of the same file "
        "that makes it: `model = build_model()`). Only for a bare call of a seeding API or of a "
        "function that only seeds, with plain arguments (no `dist.get_rank()`), that no statement "
        "it passes binds or changes (`args = parser.parse_args()`, `cfg.merge_from_file(f)`), in a "
        "function that seeds torch once (two `manual_seed(0)` may pair up two passes). Unsafe: "
        "what followed the seed was reproducible and now comes after the first draw."
    )
    not_reported = (
        "A draw whose value becomes the seed (`seed = torch.randint(0, 2**31, (1,)).item(); "
        "torch.manual_seed(seed)`), also through the seeding function's own assignments "
        "(`seed = broadcast(drawn).item(); torch.manual_seed(seed + rank)`, torchtune's `set_seed()` "
        "without a seed).",
        "A draw assigned to a variable whose name says seed (`seed = torch.randint(1 << 31, size=[])`), "
        "whichever way its value then reaches the seeding call (a config dict, NumPy's generator). "
        "Unless it seeds a generator object (`generator.manual_seed(seed)`): what that generator draws "
        "then follows the unseeded draw, as in accelerate's XLA data loaders.",
        "Constructing a DataLoader, a sampler or an optimizer before the seed: they draw nothing until used.",
        "A model whose weights are then loaded from a checkpoint, before the seed or after it on the "
        "same path: the load makes its random init irrelevant. Also a load in turns, which every "
        "process makes (`for rank in range(fabric.world_size): if fabric.global_rank == rank: "
        "model.load_state_dict(...)`: litgpt's sequential loading).",
        "A model built where its init draws nothing: on the meta device (`with torch.device(\"meta\"):`, "
        "also through a variable holding that device or its name; a layer or a random factory given "
        "`device=\"meta\"`; `torch.nn.utils.skip_init`; accelerate's `init_empty_weights(include_buffers=True)`; "
        "any context given `device=\"meta\"`: lit-llama's `EmptyInitOnDevice`), "
        "or in a context that turns its init off (Lightning's `init_module(empty_init=True)`, accelerate's "
        "`init_empty_weights()` / `init_on_device(meta)`, transformers' `no_init_weights()`), also in the "
        "functions called inside the `with` block.",
        "A pretrained model whose checkpoint holds every weight: a generation head "
        "(`AutoModelForCausalLM`, `...MaskedLM`, `...Seq2SeqLM`, `...ConditionalGeneration`), the score "
        "head of a reward model (a checkpoint the code names `reward_...`), a pretrained VAE, UNet, text "
        "encoder, tokenizer or scheduler (`AutoencoderKL.from_pretrained`).",
        "A PEFT adapter whose init draws nothing: `init_lora_weights` \"pissa\", \"olora\", \"corda\", "
        "\"mica\", \"loftq\" or \"eva\" (computed from the weights or from data), "
        "`low_cpu_mem_usage=True` (empty weights, loaded later), `PeftModel.from_pretrained` (loads the adapter).",
        "A fresh adapter in a program that does not train (no optimizer, `backward` or Hugging Face "
        "trainer): LoRA's B starts at zero, so until training the model computes what its base does.",
        "`add_adapter(...)` where the code shows no PEFT config (AdapterHub's `add_adapter(\"name\", "
        "config=\"seq_bn\")`, a project's own method, a config from a function): recognised by name, "
        "it counts only with a config in view.",
    )
    where_reported = (
        "At the seeding call in the entry program, or at the call of the helper that seeds when "
        "seeding happens in another module.",
        "Draws that count: building modules, random tensor functions, `random_split`, iterating a "
        "DataLoader; only when what they drew outlives the seed.",
        "`from_pretrained` of a transformers task model whose head is made for the user's labels "
        "(`...For<Task>` with a classification, multiple-choice, question-answering, segmentation, "
        "detection, CTC or x-vector task, e.g. `AutoModelForSequenceClassification`): that head is "
        "missing from a base checkpoint and initialised randomly.",
        "PEFT adapters initialised at random, which are trained from: `get_peft_model`, "
        "`inject_adapter_in_model`, `PeftModel(...)`/`PeftModelFor...(...)` and `LoraModel` with a "
        "`LoraConfig` whose `init_lora_weights` is True (the default: kaiming A), \"gaussian\", False "
        "(`nn.Linear`'s own random A and B), \"orthogonal\", \"pissa_niter_<n>\" or \"lora_ga\" "
        "(randomized SVD); an `AdaLoraConfig`; an `IA3Config(init_ia3_weights=False)`; a `LoHaConfig` "
        "or `LoKrConfig` (kaiming factors whatever `init_weights`); an `OFTConfig` or `BOFTConfig` "
        "with `init_weights=False`; prompt learning: `PromptTuningConfig` unless `prompt_tuning_init` "
        "is TEXT, `PrefixTuningConfig` unless `init_weights=\"zero\"` without `prefix_projection`, "
        "`PromptEncoderConfig` (P-tuning). Configs spelled through `peft`, `peft.tuners` or their package.",
        "`model.add_adapter(config)` with a PEFT config in view: transformers' and diffusers' "
        "`add_adapter(adapter_config)` and PEFT's `PeftModel.add_adapter(name, config)` call "
        "`inject_adapter_in_model`.",
        "Hugging Face's `Trainer` (and `Seq2SeqTrainer`, TRL's `SFTTrainer`, `DPOTrainer`, "
        "`GRPOTrainer`, `RewardTrainer`, `KTOTrainer`, `RLOOTrainer`, the experimental ones (`CPOTrainer`, "
        "`ORPOTrainer`, `BCOTrainer`, `OnlineDPOTrainer`, `NashMDTrainer`, `XPOTrainer`, `GKDTrainer`, "
        "`GOLDTrainer`, `PRMTrainer`, `TPOTrainer`, `DistillationTrainer`, ...), which call its constructor; "
        "imported from `trl`, `trl.trainer`, `trl.experimental.<method>` or their modules) "
        "seeds torch, NumPy and `random` with `args.seed` in its `__init__`: a model built before it "
        "was drawn unseeded. Reported at the trainer; the message suggests `set_seed` first or `model_init=`.",
        "A project's subclass of one of these trainers seeds the same way, at the point where its "
        "`__init__` reaches the base's (`super().__init__(...)`, `Trainer.__init__(self, ...)`) or "
        "when it has no `__init__`: what its `__init__` draws before is drawn unseeded. A subclass "
        "whose `__init__` never calls the base's does not seed.",
        "TRL's `SFTTrainer`, `DPOTrainer`, `GRPOTrainer`, `KTOTrainer`, `RLOOTrainer` and the experimental "
        "trainers that take a `peft_config=` call "
        "`get_peft_model` on their `peft_config=` before Trainer's constructor seeds: without an "
        "earlier seed the adapter is drawn unseeded. Reported at the trainer; the message names the "
        "adapter and asks for `set_seed` before it (`model_init=` does not help: the adapter is added "
        "after it). `RewardTrainer` seeds first.",
        "Where the code passes a `peft_config` decided at run time (TRL's scripts pass "
        "`get_peft_config(model_args)`, None unless `--use_peft`; a parameter; `config if flag else "
        "None`), the message says the adapter is drawn when a config is given, rather than asserting it.",
        "Files quoted in messages are shown relative to the working directory, like the findings' own paths.",
    )
    decisions = (
        "A load on one branch only does not save the other branch's run: that run keeps the "
        "unseeded init and is reported. Except a branch on the process's turn in a loop over the "
        "processes (`for <v> in range(<a world size, a number of processes>):`, `if <a rank> == <v>:`): "
        "every process takes its turn, so the load is on every path (its `else` runs in the other "
        "turns, when there are any).",
        "An empty-init context spares what its library turns off, as its source has it: Lightning's "
        "`_EmptyInit` only the `torch.nn.init` functions that dispatch to `__torch_function__` "
        "(uniform_, normal_, kaiming_uniform_: Linear, Conv, Embedding, the RNNs), so MultiheadAttention, "
        "`trunc_normal_`, `xavier_*` and `m.weight.data.normal_()` still draw there; transformers' "
        "`no_init_weights` every `torch.nn.init` function, not tensor methods; accelerate's whatever "
        "fills a registered parameter. A value drawn before it becomes a parameter "
        "(`nn.Parameter(torch.randn(n))`) and any other draw (`torch.rand`) count under all but the meta device.",
        "Where `init_module(empty_init=True)` meets the FSDP or model-parallel strategy, Lightning builds "
        "on the meta device and `setup` materialises the model with `reset_parameters()`, which draws: "
        "that deferred init is not modelled (the strategy is seldom in view), and the build counts as "
        "Lightning's `_EmptyInit`, the weaker of the two. DeepSpeed's ZeRO-3 ignores `empty_init` there "
        "and is not told apart either. An `empty_init` decided at run time (`fabric.world_size > 1`) "
        "spares only the paths where it holds. A project's own context manager that enters the meta "
        "device (llm-foundry's copy of `init_empty_weights`) is not followed into, nor "
        "`torch.set_default_device(\"meta\")`: their builds count as draws.",
        "A `LoraConfig` the code does not show (a parameter, a function's result, `**kwargs`) is "
        "taken to be LoRA's default. An `init_lora_weights=` taken from configuration (`args.init`) is "
        "the author's choice and not taken to draw (PEFT's own OLoRA and PiSSA examples do so, "
        "defaulting to their method). Other PEFT methods (VeRA, LoHa, prompt tuning, ...) are not modelled.",
        "On a path where the program declined an optional seed (a branch that seeds, on a condition "
        "that names a seed: `if args.seed is not None: set_seed(args.seed)`, not taken), a later "
        "reseed for something else (sd-scripts' sample images, each from its prompt's seed) is not "
        "reported: that run chose to stay random.",
        "A program that builds a Hugging Face trainer trains the adapters it was given, so a fresh "
        "adapter drawn before any seed of such a program is reported though no optimizer or "
        "`backward` of its own is in view (QLoRA's script adds LoRA in a loader, seeds, then builds a "
        "`Seq2SeqTrainer`). A trainer built only to evaluate is rare and not told apart.",
        "TRL's trainers are modelled as its current release has them: `RewardTrainer` seeds before it "
        "adds the adapter (trl 0.15's drew it first); PPO (which seeds with `torch.manual_seed` itself) "
        "is not modelled.",
        "Module-level code of an imported module inside `try:` under an environment condition "
        "(`if os.environ.get(\"LIB_TEST_DEVICE\"): try: torch.randn(3, device=...)`) is an "
        "import-time probe: neither a draw nor CUDA evidence.",
    )
    options = (
        "`seed-functions`: helpers the linter cannot see (installed packages) that seed `random`, "
        "NumPy and torch; where a call of one comes decides whether the seed is late.",
    )
    reference = (
        ("Reproducibility", "https://pytorch.org/docs/stable/notes/randomness.html"),
        ("torch.manual_seed", "https://pytorch.org/docs/stable/generated/torch.manual_seed.html"),
        ("Transformers: Trainer (`model_init`)", "https://huggingface.co/docs/transformers/main_classes/trainer"),
        ("PEFT: LoRA initialization", "https://huggingface.co/docs/peft/developer_guides/lora#initialization"),
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
            fixed='''import torch
import torch.nn as nn

def main():
    torch.manual_seed(0)
    model = nn.Linear(32, 10)
    print(model(torch.randn(1, 32)))

if __name__ == "__main__":
    main()
''',
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
import torch.nn as nn

if __name__ == "__main__":
    with torch.device("meta"):
        model = nn.Linear(8, 8)
    torch.manual_seed(0)
    model.to_empty(device="cpu")
    model.reset_parameters()
''',
            "A model built on the meta device draws nothing: its init runs after the seed",
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
                if consumed.detail[:1] == ADAPTER and not by_trainer and not program.facts.has(Kind.TRAINING):
                    # A fresh adapter matters to training only (programs.torch_randomness); a
                    # program that builds a Hugging Face trainer trains with it, wherever it seeds
                    continue
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
                    fix=None if (module, ref) in by_trainer else seed_move_fix(context, module, ref, consumed),
                )
