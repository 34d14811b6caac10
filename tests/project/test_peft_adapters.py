"""PEFT adapters initialised at random are a draw that outlives a later seed: the adapter's
initial weights are trained from. Which inits draw was read in PEFT's LoRA layer
(update_layer, reset_lora_parameters); TRL's SFT/DPO/GRPO/KTO/RLOO trainers wrap the model with
`get_peft_model` before Trainer's constructor seeds, RewardTrainer seeds first."""

from __future__ import annotations

import pytest
from conftest import reported

SEED_RULES = {"select": ["TRP101", "TRP105"]}
IMPORTS = (
    "import torch\nimport peft\nimport trl\nfrom peft import LoraConfig, get_peft_model\n"
    "from transformers import AutoModelForCausalLM, set_seed"
)


def script(body: str, imports: str = IMPORTS) -> dict[str, str]:
    lines = "".join(f"    {line}\n" for line in body.strip("\n").splitlines())
    return {"train.py": f"{imports}\n\nif __name__ == '__main__':\n{lines}"}


def row_of(files: dict[str, str], start: str) -> int:
    """The row of train.py's first line that starts (after its indent) with `start`."""
    return next(row for row, line in enumerate(files["train.py"].splitlines(), 1) if line.strip().startswith(start))


BASE = "m = AutoModelForCausalLM.from_pretrained('org/lm')\n"
TRAINS = "opt = torch.optim.AdamW(m.parameters())"


@pytest.mark.parametrize(
    "init, drawn",
    [
        (None, True),  # the default, True: kaiming A
        ("True", True),
        ("'gaussian'", True),
        ("False", True),  # nn.Linear's own random init, A and B
        ("'orthogonal'", True),
        ("'pissa_niter_4'", True),  # randomized low-rank SVD
        ("'lora_ga'", True),
        ("args.init", False),  # chosen in configuration: PEFT's examples default to OLoRA or PiSSA
        ("True if args.plain else 'loftq'", True),  # one literal arm draws
        ("'pissa' if args.fast else 'olora'", False),
        ("'pissa'", False),  # SVD of the base weights
        ("'olora'", False),
        ("'loftq'", False),
        ("'eva'", False),  # data-driven, with its own fixed seed
        ("'corda'", False),
    ],
)
def test_which_lora_inits_draw_before_a_late_seed(lint, init, drawn):
    config = "LoraConfig(r=8)" if init is None else f"LoraConfig(r=8, init_lora_weights={init})"
    body = BASE + f"m = get_peft_model(m, {config})\ntorch.manual_seed(0)\n" + TRAINS
    files = script(body, IMPORTS + "\nfrom options import args")
    found = reported(lint(files, SEED_RULES), lint.root)
    assert found == ({("train.py", row_of(files, "torch.manual_seed"), "TRP105")} if drawn else set())


def test_an_unseeded_lora_fine_tune_is_reported_at_its_adapter(lint):
    body = BASE + "m = get_peft_model(m, LoraConfig(r=8))\nopt = torch.optim.AdamW(m.parameters())"
    files = script(body)
    result = lint(files, SEED_RULES)
    assert reported(result, lint.root) == {("train.py", row_of(files, "if __name__"), "TRP101")}
    assert "`get_peft_model(m, LoraConfig(r=8))`" in result.findings[0].message


@pytest.mark.parametrize(
    "lines, drawn",
    [
        ("cfg = LoraConfig(r=8)\nm = get_peft_model(m, cfg)", True),
        ("cfg = LoraConfig(r=8, init_lora_weights='pissa')\nm = get_peft_model(m, cfg)", False),
        ("m = get_peft_model(m, make_config())", True),  # not visible: LoRA's default assumed
        ("m = get_peft_model(m, LoraConfig(**options))", True),  # init may be in the dict
        ("m = get_peft_model(m, LoraConfig(r=8), low_cpu_mem_usage=True)", False),  # empty, on meta
        ("m = peft.PeftModel(m, LoraConfig(r=8))", True),
        ("m = peft.PeftModelForCausalLM(m, LoraConfig(r=8))", True),
        ("m = peft.inject_adapter_in_model(LoraConfig(r=8), m)", True),
        ("m = get_peft_model(m, peft.AdaLoraConfig(total_step=10))", True),
        ("m = get_peft_model(m, peft.IA3Config())", False),  # vectors of ones
        ("m = get_peft_model(m, peft.IA3Config(init_ia3_weights=False))", True),
        ("m = get_peft_model(m, peft.VeraConfig(r=8))", False),  # not modelled
        ("m = peft.PeftModel.from_pretrained(m, 'org/adapter')", False),  # loads the adapter
        ("m = get_peft_model(m, peft.tuners.LoraConfig(r=8))", True),
        ("m = get_peft_model(m, peft.LoHaConfig(r=8))", True),  # kaiming factors, whatever init_weights
        ("m = get_peft_model(m, peft.tuners.lokr.LoKrConfig(r=8, init_weights=False))", True),
        ("m = get_peft_model(m, peft.OFTConfig(r=8))", False),  # zero rotations
        ("m = get_peft_model(m, peft.OFTConfig(r=8, init_weights=False))", True),
        ("m = get_peft_model(m, peft.BOFTConfig(boft_block_size=4, init_weights=False))", True),
        ("m = get_peft_model(m, peft.PromptTuningConfig(num_virtual_tokens=8))", True),  # RANDOM
        ("m = get_peft_model(m, peft.PromptTuningConfig(prompt_tuning_init='SAMPLE_VOCAB'))", True),
        ("m = get_peft_model(m, peft.PromptTuningConfig(prompt_tuning_init='TEXT'))", False),
        ("m = get_peft_model(m, peft.PromptTuningConfig(prompt_tuning_init=peft.PromptTuningInit.TEXT))", False),
        ("m = get_peft_model(m, peft.PrefixTuningConfig(num_virtual_tokens=8))", True),
        ("m = get_peft_model(m, peft.PrefixTuningConfig(init_weights='zero'))", False),
        ("m = get_peft_model(m, peft.PrefixTuningConfig(init_weights='zero', prefix_projection=True))", True),
        ("m = get_peft_model(m, peft.PromptEncoderConfig(num_virtual_tokens=8))", True),  # p-tuning
        ("m = get_peft_model(m, LoraConfig(r=8))\nm.load_state_dict(torch.load('ft.pt'))", False),
    ],
)
def test_adapter_calls_and_configs(lint, lines, drawn):
    body = BASE + lines + "\ntorch.manual_seed(0)\n" + TRAINS
    files = script(body, IMPORTS + "\nfrom options import make_config, options")
    expected = {("train.py", row_of(files, "torch.manual_seed"), "TRP105")} if drawn else set()
    assert reported(lint(files, SEED_RULES), lint.root) == expected


@pytest.mark.parametrize(
    "body",
    [
        BASE + "m = get_peft_model(m, LoraConfig(r=8))\nprint(m(torch.ones(1, 4, dtype=torch.long)))",
        BASE + "m = get_peft_model(m, LoraConfig(r=8))\ntorch.manual_seed(0)\nprint(m.generate())",
    ],
    ids=["unseeded", "seeded-after"],
)
def test_a_fresh_adapter_that_is_not_trained_draws_nothing_that_matters(lint, body):
    # LoRA's B starts at zero: until it is trained the model computes what its base does (and a
    # notebook that replaces the adapter's weights, as LoftQ's does, never trains the draw).
    assert reported(lint(script(body), SEED_RULES), lint.root) == set()


@pytest.mark.parametrize("trainer", ["SFTTrainer", "DPOTrainer", "GRPOTrainer", "KTOTrainer", "RLOOTrainer"])
def test_a_trl_trainer_draws_the_adapter_before_it_seeds(lint, trainer):
    body = BASE + f"t = trl.{trainer}(model=m, peft_config=LoraConfig(r=8))\nt.train()"
    files = script(body)
    result = lint(files, SEED_RULES)
    assert reported(result, lint.root) == {("train.py", row_of(files, "t = trl."), "TRP105")}
    message = result.findings[0].message
    assert "adapter of its `peft_config=`" in message and "before building the trainer" in message


@pytest.mark.parametrize(
    "config, shown",
    [
        ("LoraConfig(r=8)", True),
        ("cfg", True),  # bound to a LoraConfig just above
        ("get_peft_config(model_args)", False),  # TRL's helper: None unless --use_peft
        ("LoraConfig(r=8) if use_peft else None", False),
    ],
)
def test_trl_trainer_message_hedges_a_config_decided_at_run_time(lint, config, shown):
    body = "cfg = LoraConfig(r=4)\n" + BASE + f"t = trl.SFTTrainer(model=m, peft_config={config})\nt.train()"
    files = script(body)
    files["train.py"] = files["train.py"].replace("import trl\n", "import trl\nfrom trl import get_peft_config\n", 1)
    result = lint(files, SEED_RULES)
    assert reported(result, lint.root) == {("train.py", row_of(files, "t = trl."), "TRP105")}
    message = result.findings[0].message
    assert ("when a config is given" in message) == (not shown)
    assert "before building the trainer" in message


@pytest.mark.parametrize(
    "body",
    [
        "set_seed(42)\n" + BASE + "trl.SFTTrainer(model=m, peft_config=LoraConfig(r=8)).train()",
        BASE + "trl.SFTTrainer(model=m, peft_config=None).train()",
        BASE + "trl.SFTTrainer(model=m).train()",
        BASE + "trl.SFTTrainer(model=m, peft_config=LoraConfig(init_lora_weights='olora')).train()",
        BASE + "trl.RewardTrainer(model=m, peft_config=LoraConfig(r=8)).train()",  # seeds before get_peft_model
    ],
    ids=["seeded-first", "none", "absent", "olora", "reward-trainer"],
)
def test_trl_trainers_that_draw_no_adapter_unseeded(lint, body):
    assert reported(lint(script(body), SEED_RULES), lint.root) == set()


SUBCLASS = '''import trl
from peft import LoraConfig
from transformers import AutoModelForCausalLM


class ProjectSFT(trl.SFTTrainer):
{body}


if __name__ == "__main__":
    model = AutoModelForCausalLM.from_pretrained("org/lm")
    {construction}
'''


@pytest.mark.parametrize(
    "body, construction, late",
    [
        ("    pass", "ProjectSFT(model=model, peft_config=LoraConfig(r=8)).train()", True),
        ("    pass", "ProjectSFT(model=model, peft_config=LoraConfig(init_lora_weights='pissa')).train()", False),
        ("    pass", "ProjectSFT(model=model).train()", False),
        (
            "    def __init__(self, model, peft_config=None):\n        super().__init__(model=model, peft_config=peft_config)",
            "ProjectSFT(model, LoraConfig(r=8)).train()",
            True,
        ),
        (
            "    def __init__(self, model, peft_config=None):\n        super().__init__(model=model, peft_config=peft_config)",
            "ProjectSFT(model).train()",  # the parameter stays None
            False,
        ),
    ],
    ids=["no-init", "no-init-pissa", "no-init-no-config", "init-passes-config", "init-default-none"],
)
def test_a_subclass_of_a_trl_trainer_draws_its_adapter_first_too(lint, body, construction, late):
    # Reported where the seeding happens in the program's own file: at `super().__init__` when
    # the subclass is defined there, else at the construction.
    files = {"train.py": SUBCLASS.format(body=body, construction=construction)}
    row = row_of(files, "super().__init__" if "super()" in body else construction)
    found = reported(lint(files, SEED_RULES), lint.root)
    assert found == ({("train.py", row, "TRP105")} if late else set())


def test_a_program_that_builds_a_trainer_trains_its_adapter(lint):
    # A helper adds the adapter, the script seeds, then a Trainer trains: no optimizer or
    # `backward` of the program's own says so, the trainer does.
    files = {
        "train.py": """from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, Seq2SeqTrainer, set_seed


def load(args):
    model = AutoModelForCausalLM.from_pretrained(args.model)
    config = LoraConfig(r=args.lora_r, task_type="CAUSAL_LM")
    return get_peft_model(model, config)


def main(args):
    model = load(args)
    set_seed(args.seed)
    Seq2SeqTrainer(model=model, args=args).train()


if __name__ == "__main__":
    main(options.parse())
""".replace("from peft", "import options\nfrom peft", 1)
    }
    assert reported(lint(files, SEED_RULES), lint.root) == {("train.py", row_of(files, "set_seed(args.seed)"), "TRP105")}


@pytest.mark.parametrize(
    "imports, trainer",
    [
        ("from trl.trainer.sft_trainer import SFTTrainer", "SFTTrainer"),
        ("from trl.trainer import DPOTrainer", "DPOTrainer"),
        ("from trl.experimental.cpo import CPOTrainer", "CPOTrainer"),
        ("from trl.experimental.orpo.orpo_trainer import ORPOTrainer", "ORPOTrainer"),
        ("from trl.experimental.online_dpo import OnlineDPOTrainer", "OnlineDPOTrainer"),
        ("from trl.experimental.gkd import GKDTrainer", "GKDTrainer"),  # SFTTrainer's constructor
        ("from trl import BCOTrainer", "BCOTrainer"),  # exported from trl before the experimental move
    ],
)
def test_trl_trainers_as_every_import_path_spells_them(lint, imports, trainer):
    body = BASE + f"t = {trainer}(model=m, peft_config=LoraConfig(r=8))\nt.train()"
    files = script(body, IMPORTS + "\n" + imports)
    result = lint(files, SEED_RULES)
    assert reported(result, lint.root) == {("train.py", row_of(files, "t = "), "TRP105")}
    assert "adapter of its `peft_config=`" in result.findings[0].message


@pytest.mark.parametrize(
    "body",
    [
        "set_seed(0)\n" + BASE + "CPOTrainer(model=m, peft_config=LoraConfig(r=8)).train()",
        BASE + "CPOTrainer(model=m, peft_config=LoraConfig(init_lora_weights='pissa')).train()",
        BASE + "trl.IterativeSFTTrainer(model=m).train()",  # seeds; takes no adapter config
    ],
    ids=["seeded-first", "pissa", "iterative-sft"],
)
def test_more_trl_trainers_that_leave_no_late_seed(lint, body):
    files = script(body, IMPORTS + "\nfrom trl.experimental.cpo import CPOTrainer")
    assert reported(lint(files, SEED_RULES), lint.root) == set()


def test_an_older_trl_trainer_seeds_too(lint):
    # trl.IterativeSFTTrainer (exported before the experimental move) reaches Trainer.__init__:
    # an adapter the script drew first is drawn unseeded.
    body = BASE + "m = get_peft_model(m, LoraConfig(r=8))\nt = trl.IterativeSFTTrainer(model=m)\nt.train()"
    files = script(body)
    found = reported(lint(files, SEED_RULES), lint.root)
    assert found == {("train.py", row_of(files, "t = trl.IterativeSFTTrainer"), "TRP105")}


@pytest.mark.parametrize(
    "lines, drawn",
    [
        ("m.add_adapter(LoraConfig(r=8))", True),  # transformers' PeftAdapterMixin
        ("cfg = LoraConfig(r=8)\nm.add_adapter(cfg, adapter_name='a')", True),
        ("m.add_adapter(adapter_config=LoraConfig(r=8, init_lora_weights='gaussian'))", True),
        ("m = get_peft_model(m, LoraConfig(init_lora_weights='olora'))\nm.add_adapter('second', LoraConfig(r=4))", True),
        ("m.add_adapter(LoraConfig(r=8, init_lora_weights='pissa'))", False),
        ("m.add_adapter('bottleneck', config='seq_bn')", False),  # AdapterHub's, not PEFT's
        ("m.add_adapter(make_config())", False),  # a method found by name: only a config in view counts
        ("m.add_adapter('second', LoraConfig(r=4), low_cpu_mem_usage=True)", False),
    ],
)
def test_add_adapter_with_a_peft_config(lint, lines, drawn):
    body = BASE + lines + "\ntorch.manual_seed(0)\n" + TRAINS
    files = script(body, IMPORTS + "\nfrom options import make_config")
    expected = {("train.py", row_of(files, "torch.manual_seed"), "TRP105")} if drawn else set()
    assert reported(lint(files, SEED_RULES), lint.root) == expected
