"""Devices chosen in project helpers and configuration objects (extract/devices.py,
attributes.device_summary): a helper's return, a dataclass factory, a config read through two
attributes, an argparse default handed to a helper. Each comes with a look-alike that is not CUDA.

Every case is a seeded program without determinism, so TRP205 fires exactly when the program is
seen to run on CUDA.
"""

from __future__ import annotations

import pytest
from conftest import reported

HELPERS = '''import torch


def pick_device():
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def always_cpu():
    return torch.device("cpu")


def named_device(kind="cuda"):
    if kind.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(kind)
    chosen = torch.device(kind)
    return chosen
'''


def program(body: str, extra: str = "") -> dict[str, str]:
    lines = "".join(f"    {line}\n" for line in body.strip("\n").splitlines())
    main = f"def main():\n    torch.manual_seed(0)\n{lines}\n\nif __name__ == '__main__':\n    main()\n"
    return {"train.py": HELPERS + extra + "\n\n" + main}


def seed_row(files: dict[str, str]) -> int:
    return next(i for i, line in enumerate(files["train.py"].splitlines(), 1) if "manual_seed" in line)


CONFIG = '''
from dataclasses import dataclass, field


@dataclass
class PolicyConfig:
    device: torch.device = field(default_factory={factory})


@dataclass
class TrainConfig:
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    device: str = {default}
'''

ON_CUDA = [
    # a helper's return: as a factory, as a field default, called with a CUDA argument or its default
    (CONFIG.format(factory="pick_device", default='"cpu"'), "cfg = PolicyConfig()\nmodel = torch.nn.Linear(2, 2).to(cfg.device)"),
    (CONFIG.format(factory="always_cpu", default="named_device()"), "cfg = TrainConfig()\nmodel = torch.nn.Linear(2, 2).to(cfg.device)"),
    ("", "device = named_device('cuda:1')\nmodel = torch.nn.Linear(2, 2).to(device)"),
    # two attributes: a nested config's factory, and `self.config.device` of an annotated parameter
    (CONFIG.format(factory="pick_device", default='"cpu"'), "cfg = TrainConfig()\nmodel = torch.nn.Linear(2, 2).to(cfg.policy.device)"),
    (CONFIG.format(factory="always_cpu", default='"cuda"')
     + "\n\nclass Trainer:\n    def __init__(self, config: TrainConfig):\n        self.config = config\n\n"
     "    def fit(self):\n        return torch.nn.Linear(2, 2).to(self.config.device)\n",
     "Trainer(TrainConfig()).fit()"),
    # an argparse default handed to a helper that builds the device from it
    ("\nimport argparse\n", "parser = argparse.ArgumentParser()\nparser.add_argument('--device', default='cuda')\n"
     "args = parser.parse_args()\nmodel = torch.nn.Linear(2, 2).to(named_device(args.device))"),
]

OFF_CUDA = [
    (CONFIG.format(factory="always_cpu", default='"cpu"'), "cfg = PolicyConfig()\nmodel = torch.nn.Linear(2, 2).to(cfg.device)"),
    (CONFIG.format(factory="always_cpu", default='"cpu"'), "cfg = TrainConfig()\nmodel = torch.nn.Linear(2, 2).to(cfg.policy.device)"),
    ("", "device = named_device('cpu')\nmodel = torch.nn.Linear(2, 2).to(device)"),
    # a nested config given at construction: its own default no longer stands
    (CONFIG.format(factory="pick_device", default='"cpu"'),
     "cfg = TrainConfig(policy=PolicyConfig(device=torch.device('cpu')))\nmodel = torch.nn.Linear(2, 2).to(cfg.policy.device)"),
    ("\nimport argparse\n", "parser = argparse.ArgumentParser()\nparser.add_argument('--device', default='cpu')\n"
     "args = parser.parse_args()\nmodel = torch.nn.Linear(2, 2).to(named_device(args.device))"),
    # a device from configuration alone is not taken for CUDA
    ("\nimport argparse\n", "parser = argparse.ArgumentParser()\nparser.add_argument('--device')\n"
     "args = parser.parse_args()\nmodel = torch.nn.Linear(2, 2).to(named_device(args.device))"),
]


@pytest.mark.parametrize(("extra", "body"), ON_CUDA)
def test_device_from_a_helper_or_config_is_cuda(lint, extra, body):
    files = program(body, extra)
    assert reported(lint(files, {"select": ["TRP205"]}), lint.root) == {("train.py", seed_row(files), "TRP205")}


@pytest.mark.parametrize(("extra", "body"), OFF_CUDA)
def test_device_from_a_helper_or_config_is_not_cuda(lint, extra, body):
    assert reported(lint(program(body, extra), {"select": ["TRP205"]}), lint.root) == set()


def test_a_nested_config_of_another_module(lint):
    configs = CONFIG.format(factory="pick_device", default='"cpu"').replace("\nfrom dataclasses", "import torch\nfrom dataclasses")
    configs = HELPERS + configs
    train = (
        "import torch\nfrom configs import TrainConfig\n\n\ndef train(cfg: TrainConfig):\n    torch.manual_seed(0)\n"
        "    return torch.nn.Linear(2, 2).to(cfg.policy.device)\n\n\nif __name__ == '__main__':\n"
        "    train(TrainConfig())\n"
    )
    result = lint({"configs.py": configs, "train.py": train}, {"select": ["TRP205"]})
    assert reported(result, lint.root) == {("train.py", 6, "TRP205")}
    cpu = configs.replace("default_factory=pick_device", "default_factory=always_cpu")
    assert reported(lint({"configs.py": cpu, "train.py": train}, {"select": ["TRP205"]}), lint.root) == set()
