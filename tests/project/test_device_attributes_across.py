"""Device attributes whose value is decided away from where they are read: in a class of another
project module (ir.ClassIR.devices, decided by interpreter/devices.py), one level down a chain
(`self.cfg.device`, `cfg.train.device`), or by a store on the object from outside its class
(`trainer.device = "cuda"` before `trainer.fit()`); and `torch.device(...)` wrapping any of them.

Every program is seeded and never deterministic: TRP205 fires exactly when it is seen on CUDA.
"""

from __future__ import annotations

import pytest
from conftest import check_json, reported, write_project

SEED = "\n\nif __name__ == '__main__':\n    torch.manual_seed(0)\n"


def program(main: str, header: str = "import torch\n", **modules: str) -> dict[str, str]:
    body = "".join(f"    {line}\n" for line in main.strip("\n").splitlines())
    files = {f"{name}.py": text for name, text in modules.items()}
    files["train.py"] = header.rstrip("\n") + SEED + body
    return files


def seed_line(files: dict[str, str]) -> int:
    return files["train.py"].splitlines().index("    torch.manual_seed(0)") + 1


def on_cuda(lint, files) -> bool:
    result = lint(files, {"select": ["TRP205"]})
    assert result.errors == []
    found = reported(result, lint.root)
    assert found <= {("train.py", seed_line(files), "TRP205")}
    return bool(found)


GPU_DATACLASS = "from dataclasses import dataclass\n\n@dataclass\nclass RunConfig:\n    epochs: int = 3\n    device: str = 'cuda'\n"
CPU_DATACLASS = GPU_DATACLASS.replace("'cuda'", "'cpu'")
FROM_CONFIG = "import torch\nfrom config import RunConfig\n"
PARAMETER_CLASS = (
    "import torch\n\nclass Placement:\n    def __init__(self, name, device='cuda'):\n"
    "        self.name = name\n        self.device = device\n"
)
NESTED = (
    "from dataclasses import dataclass, field\nfrom config import RunConfig\n\n@dataclass\nclass Experiment:\n"
    "    run: RunConfig = field(default_factory=RunConfig)\n"
)

ACROSS_ON_CUDA = {
    "an imported dataclass's default": (
        program("cfg = RunConfig()\nnet = torch.nn.Linear(3, 3).to(cfg.device)", FROM_CONFIG, config=GPU_DATACLASS)
    ),
    "the module imported whole": (
        program("cfg = config.RunConfig(epochs=5)\nx = torch.zeros(3, device=cfg.device)", "import torch\nimport config\n", config=GPU_DATACLASS)
    ),
    "a CPU default given 'cuda' at construction": (
        program("cfg = RunConfig(device='cuda:1')\nx = torch.zeros(3).to(cfg.device)", FROM_CONFIG, config=CPU_DATACLASS)
    ),
    "a field given by position": (
        program("cfg = RunConfig(10, 'cuda')\nx = torch.zeros(3).to(cfg.device)", FROM_CONFIG, config=CPU_DATACLASS)
    ),
    "a class attribute read on the class": (
        program("x = torch.zeros(3).to(Hardware.device)", "import torch\nfrom hw import Hardware\n", hw="class Hardware:\n    device = 'cuda'\n")
    ),
    "a constructor parameter's default kept on self": (
        program("p = Placement('main')\nx = torch.zeros(3).to(p.device)", "import torch\nfrom placement import Placement\n", placement=PARAMETER_CLASS)
    ),
    "a constructor parameter given by keyword": (
        program(
            "p = Placement('main', device='cuda')\nx = torch.zeros(3).to(p.device)",
            "import torch\nfrom placement import Placement\n",
            placement=PARAMETER_CLASS.replace("device='cuda'", "device=None"),
        )
    ),
    "a device chosen at run time in the other module": (
        program(
            "cfg = RunConfig()\nx = torch.zeros(3).to(cfg.device)",
            FROM_CONFIG,
            config="import torch\n" + GPU_DATACLASS.replace("'cuda'", "'cuda' if torch.cuda.is_available() else 'cpu'"),
        )
    ),
    # a chain, one level down: the object the outer attribute holds
    "self.cfg built from an imported class": (
        program(
            "Trainer().fit(torch.nn.Linear(3, 3))",
            "import torch\nfrom config import RunConfig\n\nclass Trainer:\n    def __init__(self):\n        self.cfg = RunConfig()\n\n"
            "    def fit(self, net):\n        return net.to(self.cfg.device)\n",
            config=GPU_DATACLASS,
        )
    ),
    "self.cfg built from a class of the same module": (
        program(
            "Trainer().fit(torch.nn.Linear(3, 3))",
            "import torch\n" + GPU_DATACLASS + "\nclass Trainer:\n    def __init__(self):\n        self.cfg = RunConfig(epochs=1)\n\n"
            "    def fit(self, net):\n        return net.to(self.cfg.device)\n",
        )
    ),
    "a dataclass-typed field built by its factory from an imported class": (
        program("exp = Experiment()\nx = torch.zeros(3).to(exp.run.device)", "import torch\n" + NESTED, config=GPU_DATACLASS)
    ),
    "a dataclass-typed field, all in one module": (
        program("exp = Experiment()\nx = torch.zeros(3).to(exp.run.device)", "import torch\n" + GPU_DATACLASS + NESTED.replace("from config import RunConfig\n", ""))
    ),
    # stored on the object from outside its class, read by a method as self.device
    "a store on a trainer of another module": (
        program(
            "trainer = Trainer()\ntrainer.device = 'cuda'\ntrainer.fit(torch.nn.Linear(3, 3))",
            "import torch\nfrom trainer import Trainer\n",
            trainer="class Trainer:\n    def __init__(self):\n        self.device = 'cpu'\n\n    def fit(self, net):\n        return net.to(self.device)\n",
        )
    ),
    "a store reaching a method through another method": (
        program(
            "trainer = Trainer()\ntrainer.device = 'cuda' if torch.cuda.is_available() else 'cpu'\ntrainer.run(torch.nn.Linear(3, 3))",
            "import torch\n\nclass Trainer:\n    def run(self, net):\n        return self.place(net)\n\n    def place(self, net):\n        return net.to(self.device)\n",
        )
    ),
    "a device index stored over the class's CUDA device (0 is cuda:0)": (
        program(
            "trainer = Trainer()\ntrainer.device = 0\ntrainer.fit(torch.nn.Linear(3, 3))",
            "import torch\nfrom trainer import Trainer\n",
            trainer="class Trainer:\n    def __init__(self):\n        self.device = 'cuda'\n\n    def fit(self, net):\n        return net.to(self.device)\n",
        )
    ),
    # set on self by a base class in another module
    "a base class elsewhere sets self.device": (
        program(
            "MyTrainer().fit(torch.nn.Linear(3, 3))",
            "import torch\nfrom base import BaseTrainer\n\nclass MyTrainer(BaseTrainer):\n    def fit(self, net):\n        return net.to(self.device)\n",
            base="import torch\n\nclass BaseTrainer:\n    def __init__(self):\n        self.device = 'cuda' if torch.cuda.is_available() else 'cpu'\n",
        )
    ),
    # torch.device(...) around a value that names CUDA counts as the value itself
    "torch.device of an imported config's device": (
        program("cfg = RunConfig()\ndev = torch.device(cfg.device)\nnet = torch.nn.Linear(3, 3)", FROM_CONFIG, config=GPU_DATACLASS)
    ),
    "torch.device of a variable, used by .to": (
        program("name = 'cuda' if torch.cuda.is_available() else 'cpu'\nnet = torch.nn.Linear(3, 3).to(torch.device(name))")
    ),
    "torch.device of self.device": (
        program(
            "Runner().go()",
            "import torch\n\nclass Runner:\n    def __init__(self):\n        self.device = 'cuda'\n\n"
            "    def go(self):\n        return torch.ones(2).to(torch.device(self.device))\n",
        )
    ),
}

ACROSS_OFF_CUDA = {
    "an imported dataclass's CPU default": (
        program("cfg = RunConfig()\nx = torch.zeros(3).to(cfg.device)", FROM_CONFIG, config=CPU_DATACLASS)
    ),
    "a CUDA default given 'cpu' by keyword": (
        program("cfg = RunConfig(device='cpu')\nx = torch.zeros(3).to(cfg.device)", FROM_CONFIG, config=GPU_DATACLASS)
    ),
    "a CUDA default given 'cpu' by position": (
        program("cfg = RunConfig(1, 'cpu')\nx = torch.zeros(3).to(cfg.device)", FROM_CONFIG, config=GPU_DATACLASS)
    ),
    "built from a mapping of overrides": (
        program("cfg = RunConfig(**{'device': 'cpu'})\nx = torch.zeros(3).to(cfg.device)", FROM_CONFIG, config=GPU_DATACLASS)
    ),
    "stored 'cpu' on the object after it was built": (
        program("cfg = RunConfig()\ncfg.device = 'cpu'\nx = torch.zeros(3).to(cfg.device)", FROM_CONFIG, config=GPU_DATACLASS)
    ),
    "the same attribute name on another imported class": (
        program(
            "c = OnCpu()\nx = torch.zeros(3).to(c.device)",
            "import torch\nfrom hw import OnCpu\n",
            hw="class OnGpu:\n    device = 'cuda'\n\nclass OnCpu:\n    device = 'cpu'\n",
        )
    ),
    "a constructor parameter given 'cpu'": (
        program("p = Placement('main', 'cpu')\nx = torch.zeros(3).to(p.device)", "import torch\nfrom placement import Placement\n", placement=PARAMETER_CLASS)
    ),
    "an object returned by a function: its class is unknown": (
        program("cfg = load()\nx = torch.zeros(3).to(cfg.device)", "import torch\nfrom config import load\n", config=GPU_DATACLASS + "\ndef load():\n    return RunConfig(device='cpu')\n")
    ),
    "a CUDA attribute of an imported config that places nothing": (
        program("cfg = RunConfig()\nprint(cfg.device)\nnet = torch.nn.Linear(3, 3)", FROM_CONFIG, config=GPU_DATACLASS)
    ),
    "a dataclass-typed field given a CPU config": (
        program("exp = Experiment(run=RunConfig(device='cpu'))\nx = torch.zeros(3).to(exp.run.device)", "import torch\n" + NESTED, config=GPU_DATACLASS)
    ),
    "self.cfg built with 'cpu'": (
        program(
            "Trainer().fit(torch.nn.Linear(3, 3))",
            "import torch\nfrom config import RunConfig\n\nclass Trainer:\n    def __init__(self):\n        self.cfg = RunConfig(device='cpu')\n\n"
            "    def fit(self, net):\n        return net.to(self.cfg.device)\n",
            config=GPU_DATACLASS,
        )
    ),
    "self.cfg given by the caller: what it holds is not in view": (
        program(
            "Trainer(load()).fit(torch.nn.Linear(3, 3))",
            "import torch\nfrom config import load\n\nclass Trainer:\n    def __init__(self, cfg):\n        self.cfg = cfg\n\n"
            "    def fit(self, net):\n        return net.to(self.cfg.device)\n",
            config=GPU_DATACLASS + "\ndef load():\n    return RunConfig()\n",
        )
    ),
    "a store of 'cpu' over the class's CUDA device": (
        program(
            "trainer = Trainer()\ntrainer.device = 'cpu'\ntrainer.fit(torch.nn.Linear(3, 3))",
            "import torch\nfrom trainer import Trainer\n",
            trainer="class Trainer:\n    def __init__(self):\n        self.device = 'cuda'\n\n    def fit(self, net):\n        return net.to(self.device)\n",
        )
    ),
    "a CUDA store on one object, the method run on another": (
        program(
            "a = Trainer()\nb = Trainer()\na.device = 'cuda'\nb.fit(torch.nn.Linear(3, 3))",
            "import torch\n\nclass Trainer:\n    def __init__(self):\n        self.device = 'cpu'\n\n    def fit(self, net):\n        return net.to(self.device)\n",
        )
    ),
    "a base class elsewhere keeps the CPU": (
        program(
            "MyTrainer().fit(torch.nn.Linear(3, 3))",
            "import torch\nfrom base import BaseTrainer\n\nclass MyTrainer(BaseTrainer):\n    def fit(self, net):\n        return net.to(self.device)\n",
            base="class BaseTrainer:\n    def __init__(self):\n        self.device = 'cpu'\n",
        )
    ),
    # yolov5's val.py: the device read back from the model it was given to (each reading of
    # `device` leads back to the same construction: a cycle, not a crash)
    "a device read back from the object it built": (
        program(
            "run('')",
            "import torch\nfrom backend import Backend\n\ndef run(device):\n    model = Backend(device=device)\n"
            "    device = model.device\n    return torch.zeros(3, device=device)\n",
            backend="class Backend:\n    def __init__(self, device=None):\n        self.device = device\n",
        )
    ),
    "torch.device of an imported config's CPU device": (
        program("cfg = RunConfig()\nnet = torch.nn.Linear(3, 3).to(torch.device(cfg.device))", FROM_CONFIG, config=CPU_DATACLASS)
    ),
    "torch.device of a variable holding 'cpu'": (
        program("name = 'cpu'\nnet = torch.nn.Linear(3, 3).to(torch.device(name))")
    ),
}


@pytest.mark.parametrize("files", ACROSS_ON_CUDA.values(), ids=ACROSS_ON_CUDA.keys())
def test_device_decided_elsewhere_is_cuda(lint, files):
    assert on_cuda(lint, files)


@pytest.mark.parametrize("files", ACROSS_OFF_CUDA.values(), ids=ACROSS_OFF_CUDA.keys())
def test_device_decided_elsewhere_look_alikes_are_not_cuda(lint, files):
    assert not on_cuda(lint, files)


def test_a_changed_config_module_changes_the_cached_verdict(tmp_path, capsys):
    """The importing program's result depends on the imported class's summary: editing only
    config.py must change it, cache or not."""
    files = program("cfg = RunConfig()\nx = torch.zeros(3).to(cfg.device)", FROM_CONFIG, config=GPU_DATACLASS)
    (tmp_path / "project").mkdir()
    root = write_project(tmp_path / "project", files, {"select": ["TRP205"]})
    cache = str(tmp_path / "cache")
    first = check_json(capsys, root, "--cache-dir", cache, "--jobs", "1")
    assert [f["code"] for f in first[1]] == ["TRP205"]
    (root / "config.py").write_text(CPU_DATACLASS, encoding="utf-8")
    assert check_json(capsys, root, "--cache-dir", cache, "--jobs", "1")[1] == []


def test_a_device_read_back_from_its_own_construction_lowers(tmp_path):
    """yolov5's val.py: `model = Backend(device=device)`, then `device = model.device`. Reading
    the device leads to the construction, whose argument leads back to the read: the lowering
    must stop (it once recursed until Python gave up, which the CLI reports as an internal error)."""
    from torchrepro_lint.analysis.module_index import ModuleIndex
    from torchrepro_lint.parsing.source import SourceFile
    from torchrepro_lint.project.extract.lowering import Lowering

    text = (
        "import torch\nfrom backend import Backend\n\ndef run(device):\n    model = Backend(device=device)\n"
        "    device = model.device\n    return torch.zeros(3, device=device)\n"
    )
    module = Lowering(ModuleIndex(SourceFile(tmp_path / "val.py", text), None)).build()
    assert "run" in module.functions
