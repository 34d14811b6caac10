"""Hugging Face's Trainer seeds as it is built (`set_seed(args.seed)` in its __init__, and so do
TRL's trainers, which call it): a program that builds one is seeded from that point on.

Which `from_pretrained` draws: a head made for the user's labels (classification, QA, ...) is
initialised randomly; a generation head comes with its checkpoint."""

from __future__ import annotations

import pytest
from conftest import reported

SEED_RULES = {"select": ["TRP101", "TRP105", "TRP205"]}


def script(body: str, imports: str) -> dict[str, str]:
    lines = "".join(f"    {line}\n" for line in body.strip("\n").splitlines())
    return {"train.py": f"{imports}\n\nif __name__ == '__main__':\n{lines}"}


HF = "import torch\nimport torch.nn as nn\nfrom transformers import AutoModelForCausalLM, AutoModelForTokenClassification, Trainer, TrainingArguments"


@pytest.mark.parametrize(
    "trainer, imports",
    [
        ("Trainer(model=m, args=TrainingArguments(output_dir='o'))", HF),
        ("transformers.Seq2SeqTrainer(model=m, args=None)", "import torch\nimport torch.nn as nn\nimport transformers"),
        ("SFTTrainer(model=m, train_dataset=data)", "import torch\nimport torch.nn as nn\nfrom trl import SFTTrainer"),
        ("trl.GRPOTrainer(model=m, reward_funcs=[])", "import torch\nimport torch.nn as nn\nimport trl"),
    ],
)
def test_a_model_built_before_the_trainer_was_drawn_unseeded(lint, trainer, imports):
    body = f"m = nn.Linear(4, 2)\nt = {trainer}\nt.train()"
    result = lint(script(body, imports), SEED_RULES)
    assert reported(result, lint.root) == {("train.py", 7, "TRP105")}  # at the trainer
    (finding,) = result.findings
    assert "the trainer calls `set_seed(args.seed)` as it is built" in finding.message
    assert "`model_init=`" in finding.message


def test_a_trainer_program_is_seeded_so_randomness_during_training_is_not_unseeded(lint):
    body = "m = AutoModelForCausalLM.from_pretrained('org/lm')\nloader = torch.utils.data.DataLoader(range(8), shuffle=True)\nTrainer(model=m).train()"
    assert reported(lint(script(body, HF), SEED_RULES), lint.root) == set()


def test_the_same_program_without_a_trainer_is_unseeded(lint):
    # the look-alike above, without the trainer: the shuffle is unseeded
    body = "m = AutoModelForCausalLM.from_pretrained('org/lm')\nloader = torch.utils.data.DataLoader(range(8), shuffle=True)"
    assert reported(lint(script(body, HF), SEED_RULES), lint.root) == {("train.py", 5, "TRP101")}  # at the `__main__` block


@pytest.mark.parametrize(
    "model, drawn",
    [
        ("AutoModelForTokenClassification.from_pretrained('org/base', num_labels=5)", True),
        ("transformers.AutoModelForSequenceClassification.from_pretrained('org/base')", True),
        ("transformers.AutoModelForQuestionAnswering.from_pretrained('org/base')", True),
        ("transformers.Wav2Vec2ForCTC.from_pretrained('org/base')", True),
        ("AutoModelForCausalLM.from_pretrained('org/lm')", False),
        ("transformers.AutoModelForMaskedLM.from_pretrained('org/lm')", False),
        ("transformers.AutoModelForSeq2SeqLM.from_pretrained('org/t5')", False),
        ("transformers.Qwen2VLForConditionalGeneration.from_pretrained('org/vlm')", False),
    ],
)
def test_only_a_head_for_the_users_labels_is_drawn_by_from_pretrained(lint, model, drawn):
    body = f"m = {model}\nTrainer(model=m).train()"
    found = reported(lint(script(body + "\n", HF + "\nimport transformers"), SEED_RULES), lint.root)
    assert found == ({("train.py", 8, "TRP105")} if drawn else set())


def test_a_seed_the_program_asks_for_before_the_model_is_not_late(lint):
    body = "transformers.set_seed(0)\nm = nn.Linear(4, 2)\nTrainer(model=m).train()"
    assert reported(lint(script(body, HF + "\nimport transformers"), SEED_RULES), lint.root) == set()


def test_the_trainers_own_seed_does_not_ask_for_determinism_on_cuda(lint):
    body = "m = AutoModelForCausalLM.from_pretrained('org/lm').cuda()\nTrainer(model=m).train()"
    assert reported(lint(script(body, HF), SEED_RULES), lint.root) == set()
    # the program's own seed does: TRP205, at that seed
    body = "torch.manual_seed(0)\n" + body
    assert reported(lint(script(body, HF), SEED_RULES), lint.root) == {("train.py", 6, "TRP205")}


def test_a_seed_written_args_seed_is_the_programs_own(lint):
    # Regression: the trainer's seed was first marked with the text "args.seed", which is also how
    # most scripts write their own seed; their TRP205 went (found by the ecosystem check).
    body = "args = parse()\ntransformers.set_seed(args.seed)\nm = nn.Linear(2, 2).cuda()"
    imports = HF + "\nimport transformers\nfrom cli import parse"
    found = reported(lint({**script(body, imports), "cli.py": "def parse():\n    return None\n"}, SEED_RULES), lint.root)
    assert found == {("train.py", 9, "TRP205")}
