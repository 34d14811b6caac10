"""A project's own subclass of Hugging Face's Trainer (or of a TRL trainer) seeds as it is built,
like its base: when it has no __init__ of its own, or its __init__ calls the base's. One whose
__init__ never reaches the base's does not seed."""

from __future__ import annotations

import pytest
from conftest import marked_lines, reported

SEED_RULES = {"select": ["TRP101", "TRP105"]}

SUBCLASS_WITHOUT_INIT = '''import torch.nn as nn
from transformers import Trainer


class WeightedLossTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False):
        return model(**inputs).loss * 2


if __name__ == "__main__":
    model = nn.Linear(8, 2)
    trainer = WeightedLossTrainer(model=model)  # <-- TRP105
    trainer.train()
'''


def test_a_subclass_without_init_seeds_after_the_model_it_is_given(lint):
    result = lint({"train.py": SUBCLASS_WITHOUT_INIT}, SEED_RULES)
    assert reported(result, lint.root) == marked_lines({"train.py": SUBCLASS_WITHOUT_INIT})
    (finding,) = result.findings
    assert "the trainer calls `set_seed(args.seed)` as it is built" in finding.message


SHUFFLED_AFTER = '''import torch
from transformers import AutoModelForCausalLM
from {module} import {name}

if __name__ == "__main__":
    model = AutoModelForCausalLM.from_pretrained("org/lm")
    trainer = {name}(model=model)
    loader = torch.utils.data.DataLoader(range(8), shuffle=True)
'''


@pytest.mark.parametrize(
    "trainers_py",
    [
        # no __init__
        "from transformers import Trainer\n\nclass ProjectTrainer(Trainer):\n    pass\n",
        # __init__ into the base
        "from transformers import Trainer\n\nclass ProjectTrainer(Trainer):\n"
        "    def __init__(self, *args, **kwargs):\n        self.extra = 1\n        super().__init__(*args, **kwargs)\n",
        # the old spelling of super
        "import transformers\n\nclass ProjectTrainer(transformers.Trainer):\n"
        "    def __init__(self, *args, **kwargs):\n        super(ProjectTrainer, self).__init__(*args, **kwargs)\n",
        # the base's __init__ called by name
        "from transformers import Trainer\n\nclass ProjectTrainer(Trainer):\n"
        "    def __init__(self, model):\n        Trainer.__init__(self, model=model)\n",
        # two project classes deep, over TRL's trainer
        "from trl import SFTTrainer\n\nclass Base(SFTTrainer):\n    pass\n\nclass ProjectTrainer(Base):\n"
        "    def __init__(self, **kwargs):\n        super().__init__(**kwargs)\n",
    ],
    ids=["no-init", "super-init", "old-super", "base-init-by-name", "two-levels"],
)
def test_a_subclass_in_another_module_seeds_the_program(lint, trainers_py):
    files = {"train.py": SHUFFLED_AFTER.format(module="trainers", name="ProjectTrainer"), "trainers.py": trainers_py}
    assert reported(lint(files, SEED_RULES), lint.root) == set()


def test_a_base_taken_through_a_project_reexport_is_still_the_framework_trainer(lint):
    files = {
        "train.py": SHUFFLED_AFTER.format(module="trainers", name="ProjectTrainer"),
        "trainers.py": "from common import HFTrainer\n\nclass ProjectTrainer(HFTrainer):\n    pass\n",
        "common.py": "from transformers import Trainer as HFTrainer\n",
    }
    assert reported(lint(files, SEED_RULES), lint.root) == set()


@pytest.mark.parametrize(
    "trainers_py",
    [
        # an __init__ that never calls the base's
        "from transformers import Trainer\n\nclass ProjectTrainer(Trainer):\n"
        "    def __init__(self, model):\n        self.model = model\n",
        # not a trainer at all
        "import torch.nn as nn\n\nclass ProjectTrainer(nn.Module):\n    pass\n",
        # a framework class of the same name that does not seed
        "from lightning import Trainer\n\nclass ProjectTrainer(Trainer):\n    pass\n",
    ],
    ids=["init-without-super", "nn-module", "lightning-trainer"],
)
def test_a_class_that_does_not_reach_a_seeding_constructor_leaves_the_program_unseeded(lint, trainers_py):
    files = {"train.py": SHUFFLED_AFTER.format(module="trainers", name="ProjectTrainer"), "trainers.py": trainers_py}
    assert reported(lint(files, SEED_RULES), lint.root) == {("train.py", 5, "TRP101")}


def test_a_draw_in_the_subclass_init_before_the_base_init_is_late(lint):
    # Reported at the construction in the program, where the seed happens for its reader.
    files = {
        "train.py": SHUFFLED_AFTER.format(module="trainers", name="ProjectTrainer").replace(
            "    trainer = ProjectTrainer(model=model)", "    trainer = ProjectTrainer(model=model)  # <-- TRP105"
        ),
        "trainers.py": "import torch.nn as nn\nfrom transformers import Trainer\n\nclass ProjectTrainer(Trainer):\n"
        "    def __init__(self, **kwargs):\n        self.probe = nn.Linear(4, 4)\n        super().__init__(**kwargs)\n",
    }
    result = lint(files, SEED_RULES)
    assert reported(result, lint.root) == marked_lines(files)
    assert "`nn.Linear(4, 4)` at " in result.findings[0].message and "trainers.py:6" in result.findings[0].message


REWARD_LOADING_TRAINER = '''import torch.nn as nn
from transformers import AutoModelForSequenceClassification, Trainer


class ScoredTrainer(Trainer):
    def __init__(self, model, reward_funcs, **kwargs):
        for i, reward_func in enumerate(reward_funcs):
            if isinstance(reward_func, str):
                reward_funcs[i] = AutoModelForSequenceClassification.from_pretrained({source}, num_labels=1)
        super().__init__(model=model, **kwargs)
'''


@pytest.mark.parametrize("source, late", [("reward_func", False), ("args.reward_model_path", False), ("base_model", True)])
def test_a_reward_model_loaded_in_a_subclass_init_keeps_its_head(lint, source, late):
    # Regression (ecosystem check on trl): a trainer whose __init__ loads reward models given by
    # name before it seeds was said to draw their heads; a reward model's score head is trained
    # and saved with it. A classifier built from some other checkpoint still gets a new head.
    train = (
        "from trainers import ScoredTrainer\nfrom transformers import AutoModelForCausalLM\n\n"
        "if __name__ == '__main__':\n    model = AutoModelForCausalLM.from_pretrained('org/lm')\n"
        "    ScoredTrainer(model, reward_funcs=[len]).train()\n"
    )
    files = {"train.py": train, "trainers.py": REWARD_LOADING_TRAINER.format(source=source)}
    assert reported(lint(files, SEED_RULES), lint.root) == ({("train.py", 6, "TRP105")} if late else set())
