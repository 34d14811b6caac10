"""A `raise` ends its path: the exception leaves the function and its callers, so nothing after
the call runs on that path, unless a `try` around it takes it (its handlers and `finally` still
run). A call on which every path raises (a stub, an abstract method) does not end its callers'
paths. Found on mosaicml/composer, whose `seed_everything` raises on a bad seed: 3 programs got
TRP105 at a trainer that seeds again, on the path where the first seed had raised."""

from __future__ import annotations

from conftest import reported

SELECT = {"select": ["TRP105"]}

HEADER = "import os\nimport torch\nimport torch.nn as nn\n\n\n"

SEED_EVERYTHING = '''def seed_everything(seed):
    if seed < 0:
        raise ValueError("negative seed")
    torch.manual_seed(seed)


class Runner:
    def __init__(self, model):
        torch.manual_seed(0)
        self.model = model


'''


def late_seeds(lint, source: str) -> set:
    return reported(lint({"train.py": HEADER + source}, SELECT), lint.root)


def test_a_path_on_which_the_seeding_helper_raised_does_not_go_on(lint):
    source = SEED_EVERYTHING + "seed_everything(42)\nmodel = nn.Linear(4, 4)\nRunner(model)\n"
    assert late_seeds(lint, source) == set()


def test_a_helper_raising_on_one_path_still_seeds_on_the_other(lint):
    # The raising arm is the `else`, the helper is in another module, the call is in a main().
    files = {
        "seeding.py": (
            "import torch\n\n\ndef set_seed(config):\n    if config.reproducible:\n        torch.manual_seed(config.value)\n"
            "    else:\n        raise ValueError('only reproducible runs')\n"
        ),
        "train.py": HEADER + "from seeding import set_seed\n\n\ndef sample(model):\n    torch.manual_seed(1234)\n\n\n"
        "def main(config):\n    set_seed(config)\n    model = nn.Linear(4, 4)\n    sample(model)\n\n\n"
        "if __name__ == '__main__':\n    main(load_config())\n",
    }
    assert reported(lint(files, SELECT), lint.root) == set()


def test_a_real_late_seed_through_a_helper_that_may_raise_is_still_reported(lint):
    source = SEED_EVERYTHING + "model = nn.Linear(4, 4)\nseed_everything(42)\n"
    assert late_seeds(lint, source) == {("train.py", 9, "TRP105")}


def test_a_call_that_always_raises_leaves_the_callers_later_draw_and_seed(lint):
    # (prepare calls a method before it raises: a function that only raises is not walked at all)
    source = (
        "class Base:\n    def prepare(self):\n        self.validate()\n        raise NotImplementedError\n\n"
        "    def validate(self):\n        pass\n\n\n"
        "def main():\n    runner = Base()\n    runner.prepare()\n    model = nn.Linear(4, 4)\n    torch.manual_seed(0)\n\n\n"
        "main()\n"
    )
    assert late_seeds(lint, source) == {("train.py", 19, "TRP105")}


def test_a_raise_in_a_try_body_reaches_the_handler_that_seeds(lint):
    source = (
        "def main():\n    model = nn.Linear(4, 4)\n    try:\n        raise FileNotFoundError('seed.txt')\n"
        "    except FileNotFoundError:\n        torch.manual_seed(0)\n\n\nmain()\n"
    )
    assert late_seeds(lint, source) == {("train.py", 11, "TRP105")}


def test_a_path_a_called_helper_raised_on_runs_the_handler_that_draws(lint):
    # Only the path on which seed_from_env raised is unseeded when the handler builds a model;
    # the seed after the `try` is late on that path.
    source = (
        "def seed_from_env():\n    if 'SEED' not in os.environ:\n        raise KeyError('SEED')\n"
        "    torch.manual_seed(int(os.environ['SEED']))\n\n\n"
        "def main():\n    try:\n        seed_from_env()\n    except KeyError:\n        model = nn.Linear(4, 4)\n"
        "    torch.manual_seed(0)\n\n\nmain()\n"
    )
    assert late_seeds(lint, source) == {("train.py", 17, "TRP105")}


def test_a_finally_runs_on_a_path_that_raised_which_then_goes_on_raising(lint):
    seeds_in_finally = (
        "def main():\n    model = nn.Linear(4, 4)\n    try:\n        raise RuntimeError('stop')\n"
        "    finally:\n        torch.manual_seed(0)\n\n\nmain()\n"
    )
    assert late_seeds(lint, seeds_in_finally) == {("train.py", 11, "TRP105")}
    still_raising = (
        SEED_EVERYTHING + "try:\n    seed_everything(42)\nfinally:\n    print('done')\n"
        "model = nn.Linear(4, 4)\nRunner(model)\n"
    )
    assert late_seeds(lint, still_raising) == set()


def test_a_loop_else_that_raises_is_skipped_by_a_break(lint):
    # `for ... else: raise`: the paths that broke out of the loop go on to the seed.
    source = (
        "def pick_seed(candidates):\n    for seed in candidates:\n        if seed >= 0:\n            break\n"
        "    else:\n        raise ValueError('no seed')\n    torch.manual_seed(seed)\n\n\n"
        "def main():\n    model = nn.Linear(4, 4)\n    pick_seed([1, 2])\n\n\nmain()\n"
    )
    assert late_seeds(lint, source) == {("train.py", 12, "TRP105")}


def test_a_raise_at_the_top_level_ends_its_path_and_keeps_what_came_before(lint):
    source = (
        SEED_EVERYTHING + "model = nn.Linear(4, 4)\ntorch.manual_seed(0)\n"
        "if os.environ.get('DRY_RUN'):\n    raise SystemExit(0)\nRunner(model)\n"
    )
    assert late_seeds(lint, source) == {("train.py", 19, "TRP105")}
