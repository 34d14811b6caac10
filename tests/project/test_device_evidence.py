"""Device evidence from today's device-generic APIs (known_apis.py): each with a hazard and a trap.

Every case is a seeded program without determinism, so TRP205 fires exactly when the program is
seen to run on CUDA (or the accelerator).
"""

from __future__ import annotations

import pytest
from conftest import reported


def seeded(body: str, imports: str = "import torch\n") -> dict[str, str]:
    lines = "".join(f"    {line}\n" for line in body.strip("\n").splitlines())
    return {"train.py": f"{imports}\nif __name__ == '__main__':\n    torch.manual_seed(0)\n{lines}"}


ON_CUDA = [
    # torch.accelerator, as every pytorch/examples script picks its device now
    "use_accel = torch.accelerator.is_available()\nif use_accel:\n    device = torch.accelerator.current_accelerator()\n"
    "else:\n    device = torch.device('cpu')\nmodel = torch.nn.Linear(2, 2).to(device)",
    "device_type = torch.accelerator.current_accelerator().type\nx = torch.ones(2, device=device_type)",
    "torch.accelerator.set_device_index(0)",
    "with torch.accelerator.device_index(1):\n    x = torch.ones(2)",
    "dev = 'xpu' if torch.accelerator.is_available() else 'cpu'\nx = torch.ones(2).to(dev)",
    # autocast / GradScaler / default device
    "with torch.autocast(device_type='cuda'):\n    y = torch.ones(2) * 2",
    "with torch.autocast('cuda', dtype=torch.bfloat16):\n    y = torch.ones(2) * 2",
    "with torch.amp.autocast('cuda'):\n    y = torch.ones(2) * 2",
    "scaler = torch.amp.GradScaler('cuda')",
    "scaler = torch.amp.GradScaler()",  # device defaults to "cuda"
    "torch.set_default_device('cuda')",
    "device_type = 'cuda' if torch.cuda.is_available() else 'cpu'\nwith torch.autocast(device_type=device_type):\n    y = torch.ones(2)",
    "torch.cuda.synchronize()",  # (raises without a GPU: the program counts on one)
]

OFF_CUDA = [
    # asking is not using
    "print(torch.accelerator.is_available())",
    "print('accelerator:', torch.accelerator.current_accelerator())",
    "if torch.accelerator.is_available():\n    print('an accelerator is present')",
    "n = torch.accelerator.device_count()\nprint(n)",
    "if torch.accelerator.current_accelerator().type == 'mps':\n    print('mps')",
    # picking the backend module (diffusers' offloading hooks do) is not running on it
    "backend = getattr(torch, torch.accelerator.current_accelerator().type) if hasattr(torch, 'accelerator') else torch.cuda",
    # CPU device types
    "with torch.autocast(device_type='cpu'):\n    y = torch.ones(2) * 2",
    "with torch.amp.autocast('cpu', dtype=torch.bfloat16):\n    y = torch.ones(2) * 2",
    "scaler = torch.amp.GradScaler('cpu')",
    "scaler = torch.amp.GradScaler('cuda', enabled=False)",
    "torch.set_default_device('cpu')",
    # a timing helper waits for the GPU where there is one (llm-foundry's generate script)
    "if torch.cuda.is_available():\n    torch.cuda.synchronize()",
]


@pytest.mark.parametrize("body", ON_CUDA)
def test_device_evidence_is_cuda(lint, body):
    assert reported(lint(seeded(body), {"select": ["TRP205"]}), lint.root) == {("train.py", 4, "TRP205")}


@pytest.mark.parametrize("body", OFF_CUDA)
def test_device_checks_and_cpu_devices_are_not_cuda(lint, body):
    assert reported(lint(seeded(body), {"select": ["TRP205"]}), lint.root) == set()


def test_fix_turns_the_accelerator_program_quiet(lint):
    body = ON_CUDA[0] + "\ntorch.use_deterministic_algorithms(True)"
    assert reported(lint(seeded(body), {"select": ["TRP205"]}), lint.root) == set()


LIGHTNING = "import torch\nimport lightning as L\n"


@pytest.mark.parametrize(
    "trainer",
    ["L.Trainer(accelerator='gpu', devices=1)", "L.Trainer(accelerator='cuda')", "L.Trainer(gpus=2)"],
)
def test_lightning_trainer_on_a_gpu_is_cuda(lint, trainer):
    files = seeded(f"trainer = {trainer}", LIGHTNING)
    assert reported(lint(files, {"select": ["TRP205"]}), lint.root) == {("train.py", 5, "TRP205")}


@pytest.mark.parametrize(
    "trainer",
    [
        "L.Trainer(accelerator='cpu')",
        "L.Trainer(accelerator='auto')",  # a GPU only when present: nothing else shows CUDA
        "L.Trainer()",
        "L.Trainer(gpus=0)",
        "L.Trainer(accelerator='gpu', deterministic=True)",
    ],
)
def test_lightning_trainer_off_gpu_or_deterministic_is_quiet(lint, trainer):
    files = seeded(f"trainer = {trainer}", LIGHTNING)
    assert reported(lint(files, {"select": ["TRP205"]}), lint.root) == set()


# -- framework models, as read in each framework's source ------------------------------------
def test_lightning_deterministic_trainer_turns_benchmark_off(lint):
    # Lightning's _set_torch_flags: deterministic and benchmark=None -> cudnn.benchmark = False
    body = "torch.backends.cudnn.benchmark = True\ntrainer = L.Trainer(accelerator='gpu', deterministic=True)"
    assert reported(lint(seeded(body, LIGHTNING), {"select": ["TRP201", "TRP205"]}), lint.root) == set()


def test_lightning_deterministic_trainer_with_benchmark_true_is_reported(lint):
    body = "trainer = L.Trainer(accelerator='gpu', deterministic=True, benchmark=True)"
    found = reported(lint(seeded(body, LIGHTNING), {"select": ["TRP201"]}), lint.root)
    assert {code for _, _, code in found} == {"TRP201"}


# -- attribute flow: a device kept on the object ---------------------------------------------
TRAINER = """import torch

class Trainer:
    def __init__(self, model, device="auto"):
        if device == "auto":
            self.device = {choice}
        else:
            self.device = device
        self.model = model.to(self.device)

if __name__ == "__main__":
    torch.manual_seed(0)
    Trainer(torch.nn.Linear(2, 2))
"""


def test_device_stored_on_self_is_followed(lint):
    files = {"train.py": TRAINER.format(choice="'cuda' if torch.cuda.is_available() else 'cpu'")}
    assert reported(lint(files, {"select": ["TRP205"]}), lint.root) == {("train.py", 12, "TRP205")}


def test_cpu_device_stored_on_self_is_quiet(lint):
    files = {"train.py": TRAINER.format(choice="'cpu'")}
    assert reported(lint(files, {"select": ["TRP205"]}), lint.root) == set()


def test_same_attribute_name_in_another_class_is_not_this_device(lint):
    source = TRAINER.format(choice="'cpu'") + "\nclass Other:\n    def __init__(self):\n        self.device = 'cuda'\n"
    assert reported(lint({"train.py": source}, {"select": ["TRP205"]}), lint.root) == set()


@pytest.mark.parametrize(("fabric", "on_cuda"), [("L.Fabric(accelerator='cuda', devices=2)", True), ("L.Fabric(accelerator='auto')", False), ("L.Fabric(accelerator='cpu')", False)])
def test_lightning_fabric_accelerator(lint, fabric, on_cuda):
    found = reported(lint(seeded(f"fabric = {fabric}", LIGHTNING), {"select": ["TRP205"]}), lint.root)
    assert found == ({("train.py", 5, "TRP205")} if on_cuda else set())


# -- attribute flow: objects built from the module's own classes ------------------------------
SEED_THEN = "\n\nif __name__ == '__main__':\n    torch.manual_seed(0)\n"
RUNNER = """import torch

class Runner:
    def __init__(self):
        self.dev = {choice}

    def place(self, net):
        return net.to(self.dev)
"""


def program(classes: str, main: str) -> dict[str, str]:
    body = "".join(f"    {line}\n" for line in main.strip("\n").splitlines())
    return {"train.py": classes.rstrip("\n") + SEED_THEN + body}


def seed_line(files: dict[str, str]) -> int:
    return files["train.py"].splitlines().index("    torch.manual_seed(0)") + 1


ATTRIBUTE_ON_CUDA = [
    # minGPT's shape: the device kept on self by __init__, used by another method of an object
    # that is built and used in one expression
    (RUNNER.format(choice="'cuda' if torch.cuda.is_available() else 'cpu'"), "Runner().place(torch.nn.Linear(3, 3))"),
    (RUNNER.format(choice="'cuda'"), "r = Runner()\nr.place(torch.nn.Linear(3, 3))"),
    # cpu first, cuda where present: the later assignment is conditional, so cuda stays possible
    (
        "import torch\n\nclass Runner:\n    def __init__(self):\n        self.dev = 'cpu'\n"
        "        if torch.cuda.is_available():\n            self.dev = 'cuda:0'\n\n"
        "    def place(self, net):\n        return net.to(self.dev)\n",
        "r = Runner()\nr.place(torch.nn.Linear(3, 3))",
    ),
    # a dataclass config read through an instance
    (
        "import torch\nfrom dataclasses import dataclass, field\n\n@dataclass\nclass Opts:\n"
        "    lr: float = 1e-3\n    device: str = 'cuda'\n",
        "opts = Opts(lr=0.1)\nw = torch.zeros(3).to(opts.device)",
    ),
    (
        "import torch\nfrom dataclasses import dataclass, field\n\n@dataclass\nclass Opts:\n"
        "    device: str = field(default='cuda')\n",
        "opts = Opts()\nw = torch.zeros(3, device=opts.device)",
    ),
    # a plain class: its class attribute, on the class and on an instance
    ("import torch\n\nclass Settings:\n    device = 'cuda'\n", "w = torch.zeros(3).to(Settings.device)"),
    ("import torch\n\nclass Settings:\n    device = 'cuda'\n", "s = Settings()\nw = torch.zeros(3).to(s.device)"),
    (
        "import torch\nfrom dataclasses import dataclass\n\n@dataclass\nclass Opts:\n    device: str = 'cpu'\n",
        "opts = Opts()\nopts.device = 'cuda' if torch.cuda.is_available() else 'cpu'\nw = torch.zeros(3).to(opts.device)",
    ),
    # a constructor parameter kept on self: the argument given, else the default
    (
        "import torch\n\nclass Settings:\n    def __init__(self, device='cuda'):\n        self.device = device\n",
        "s = Settings()\nw = torch.zeros(3).to(s.device)",
    ),
    (
        "import torch\n\nclass Settings:\n    def __init__(self, device='cpu'):\n        self.device = device\n",
        "s = Settings(device='cuda')\nw = torch.zeros(3).to(s.device)",
    ),
]

ATTRIBUTE_OFF_CUDA = [
    # the same shapes on the CPU
    (RUNNER.format(choice="'cpu'"), "Runner().place(torch.nn.Linear(3, 3))"),
    (
        "import torch\nfrom dataclasses import dataclass\n\n@dataclass\nclass Opts:\n    device: str = 'cpu'\n",
        "opts = Opts()\nw = torch.zeros(3).to(opts.device)",
    ),
    ("import torch\n\nclass Settings:\n    device = 'cpu'\n", "w = torch.zeros(3).to(Settings.device)"),
    # set to cuda, never used to place anything
    (
        "import torch\n\nclass Runner:\n    def __init__(self):\n        self.dev = 'cuda'\n\n"
        "    def place(self, net):\n        return net\n",
        "Runner().place(torch.nn.Linear(3, 3))",
    ),
    # overwritten with cpu before use: in the same method, or by a method defined later
    (
        "import torch\n\nclass Runner:\n    def __init__(self):\n        self.dev = 'cuda'\n        self.dev = 'cpu'\n\n"
        "    def place(self, net):\n        return net.to(self.dev)\n",
        "r = Runner()\nr.place(torch.nn.Linear(3, 3))",
    ),
    (
        "import torch\n\nclass Runner:\n    def __init__(self):\n        self.dev = 'cuda'\n\n"
        "    def to_cpu(self):\n        self.dev = 'cpu'\n\n    def place(self, net):\n        return net.to(self.dev)\n",
        "r = Runner()\nr.to_cpu()\nr.place(torch.nn.Linear(3, 3))",
    ),
    # a keyword at construction wins over the default, for a dataclass field and a parameter
    (
        "import torch\nfrom dataclasses import dataclass\n\n@dataclass\nclass Opts:\n    device: str = 'cuda'\n",
        "opts = Opts(device='cpu')\nw = torch.zeros(3).to(opts.device)",
    ),
    (
        "import torch\nfrom dataclasses import dataclass\n\n@dataclass\nclass Opts:\n    device: str = 'cuda'\n",
        "opts = Opts('cpu')\nw = torch.zeros(3).to(opts.device)",
    ),
    (
        "import torch\n\nclass Settings:\n    def __init__(self, device='cuda'):\n        self.device = device\n",
        "s = Settings(device='cpu')\nw = torch.zeros(3).to(s.device)",
    ),
    # set on the object (or the class) after it is built
    (
        "import torch\nfrom dataclasses import dataclass\n\n@dataclass\nclass Opts:\n    device: str = 'cuda'\n",
        "opts = Opts()\nopts.device = 'cpu'\nw = torch.zeros(3).to(opts.device)",
    ),
    (
        "import torch\n\nclass Settings:\n    device = 'cuda'\n\nSettings.device = 'cpu'\n",
        "w = torch.zeros(3).to(Settings.device)",
    ),
    # built from a mapping of overrides: any field may be given
    (
        "import torch\nfrom dataclasses import dataclass\n\n@dataclass\nclass Opts:\n    device: str = 'cuda'\n",
        "opts = Opts(**{'device': 'cpu'})\nw = torch.zeros(3).to(opts.device)",
    ),
    # an object of a class from elsewhere: its attributes are not read
    ("import torch\nfrom somewhere import Settings\n", "s = Settings()\nw = torch.zeros(3).to(s.device)"),
    # another class's attribute of the same name
    (
        "import torch\n\nclass Gpu:\n    device = 'cuda'\n\nclass Cpu:\n    device = 'cpu'\n",
        "c = Cpu()\nw = torch.zeros(3).to(c.device)",
    ),
]


@pytest.mark.parametrize(("classes", "main"), ATTRIBUTE_ON_CUDA)
def test_device_through_an_attribute_is_cuda(lint, classes, main):
    files = program(classes, main)
    assert reported(lint(files, {"select": ["TRP205"]}), lint.root) == {("train.py", seed_line(files), "TRP205")}


@pytest.mark.parametrize(("classes", "main"), ATTRIBUTE_OFF_CUDA)
def test_attribute_look_alikes_are_not_cuda(lint, classes, main):
    assert reported(lint(program(classes, main), {"select": ["TRP205"]}), lint.root) == set()
