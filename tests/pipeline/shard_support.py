"""The small project that sharded-run tests lint, and how they pin its files to processes."""

from torchrepro_lint.pipeline.shards import protocol

# Op rules on one file ask where the helper is called from in the others (a "uses" summary of
# each of them), so shares must ask each other; one file does not parse.
FILES = {
    "ops.py": """
import torch.nn.functional as F

def upsample(x):
    return F.interpolate(x, scale_factor=2, mode="bilinear")

def pooled(x):
    return F.adaptive_max_pool2d(x, 1)
""",
    "train.py": """
import torch
from torch.utils.data import DataLoader
from ops import upsample, pooled

def main():
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    loader = DataLoader(range(8), num_workers=2)
    x = torch.randn(1, 1, 4, 4, requires_grad=True)
    upsample(x).sum().backward()
    pooled(x).sum().backward()
    buffer = torch.empty(3)
    return buffer.sum(), loader

if __name__ == "__main__":
    main()
""",
    "broken.py": "def oops(:\n    pass\n",
}
# Filler modules so that each share has several files to parse.
FILES.update({f"part{i}.py": f"from ops import upsample\n\ndef f{i}(x):\n    return upsample(x) * {i}\n" for i in range(8)})


def shard_project(tmp_path, monkeypatch):
    """FILES in a project that runs sharded from three files to parse, one process per file."""
    monkeypatch.setattr(protocol, "MIN_FILES", 3)
    monkeypatch.setattr(protocol, "FILES_PER_PROCESS", 1)
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.torchrepro-lint]\nselect = ['ALL']\n")
    for name, code in FILES.items():
        (project / name).write_text(code.lstrip("\n"))
    return project


def assign_ops_and_train_apart(jobs: int):
    """ops.py lowered (so its tree kept) by worker 1, train.py by the last process: the op rules
    on ops.py must then ask another process where its helpers are called from."""

    def assigned(source) -> int:
        if source.path.name == "ops.py":
            return 1
        if source.path.name == "train.py":
            return jobs - 1 if jobs > 2 else protocol.MAIN
        return protocol.MAIN

    return assigned
