from __future__ import annotations

from torchrepro_lint.project.known_apis import Kind
from torchrepro_lint.rules.base import Example, Rule
from torchrepro_lint.rules.edits import insert_after_imports, insert_before, make_fix, module_name_for

FIXED_IN = (2, 10)


class CublasWorkspaceConfig(Rule):
    code = "TRP203"
    name = "cublas-workspace-config"
    summary = "Deterministic mode on torch < 2.10 without `CUBLAS_WORKSPACE_CONFIG` set."
    why = (
        "Before torch 2.10, deterministic mode made every cuBLAS call (matmul, linear layers) raise "
        "unless `CUBLAS_WORKSPACE_CONFIG` was `:4096:8` or `:16:8`: the first forward pass fails. "
        "The check is in 2.9.1's library and gone from 2.10.0, so only older releases are affected."
    )
    fix_safety = "safe"
    fix = (
        'Set the variable before cuBLAS is first used. The fix adds `os.environ.setdefault('
        '"CUBLAS_WORKSPACE_CONFIG", ":4096:8")` after the imports of the entry module (importing '
        '`os` if needed), or, when deterministic mode is enabled in a helper module, right before '
        "the enabling call."
    )
    not_reported = (
        "A program that sets the variable (`os.environ[...] =`, `setdefault`, `putenv`, `update`) "
        "on any path.",
        "A helper that sets it too: `transformers.enable_full_determinism`, Lightning's "
        "`Trainer(deterministic=True)`.",
        "Anything on torch 2.10 and newer.",
    )
    where_reported = (
        "At each call that enables deterministic mode: `torch.use_deterministic_algorithms(True)` "
        "(also with `warn_only=True`, which makes cuBLAS calls warn instead of raise), "
        '`torch.set_deterministic_debug_mode("error"|"warn"|2|1)` (or a mode that is not a '
        "literal), or a helper that enables it.",
        "Only in a program that never sets `CUBLAS_WORKSPACE_CONFIG`, and only when `torch-version` "
        "is older than 2.10.",
    )
    decisions = (
        "Setting the variable anywhere in the program counts; whether it comes before the first "
        "cuBLAS use is not checked (precision first).",
        "A variable exported by a launcher script or a job's environment is invisible to a "
        "linter: silence the finding with `# noqa: TRP203` on the reported line.",
    )
    options = (
        "`torch-version`: the release the code runs on (default: the installed torch, else the "
        "newest); the rule is silent on 2.10 and newer.",
        "`deterministic-functions`: calls to these helpers enable deterministic mode (and are "
        "reported like `use_deterministic_algorithms(True)`).",
    )
    reference = (
        ("torch.use_deterministic_algorithms (torch 2.9)", "https://docs.pytorch.org/docs/2.9/generated/torch.use_deterministic_algorithms.html"),
        ("CUDA semantics: cuBLAS workspaces", "https://pytorch.org/docs/stable/notes/cuda.html#cublas-workspaces"),
    )
    hazards = (
        Example(
            '''import torch

if __name__ == "__main__":
    torch.use_deterministic_algorithms(True)  # <-- TRP203
''',
            "torch 2.9, variable never set",
            {"torch-version": "2.9"},
            fixed='''import torch
import os
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

if __name__ == "__main__":
    torch.use_deterministic_algorithms(True)
''',
        ),
        Example(
            '''import torch

def setup():
    torch.set_deterministic_debug_mode("error")  # <-- TRP203

if __name__ == "__main__":
    setup()
''',
            "Debug mode 'error' is deterministic mode too",
            {"torch-version": "2.8"},
        ),
        Example(
            '''from accelerate.utils import set_seed

if __name__ == "__main__":
    set_seed(0, deterministic=True)  # <-- TRP203
''',
            "A helper that enables deterministic mode but leaves the variable alone",
            {"torch-version": "2.9"},
        ),
    )
    traps = (
        Example(
            '''import os
import torch

os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"

if __name__ == "__main__":
    torch.use_deterministic_algorithms(True)
''',
            "Variable set",
            {"torch-version": "2.9"},
        ),
        Example(
            '''import torch

if __name__ == "__main__":
    torch.use_deterministic_algorithms(True)
''',
            "torch 2.10 and newer do not need it",
            {"torch-version": "2.13"},
        ),
        Example(
            '''import lightning as L

if __name__ == "__main__":
    trainer = L.Trainer(deterministic=True)
''',
            "Lightning sets the variable itself",
            {"torch-version": "2.9"},
        ),
    )

    def check_programs(self, context):
        if context.config.torch_version >= FIXED_IN:
            return
        for program in context.programs:
            facts = program.facts
            if any(o.detail[:1] == ("CUBLAS_WORKSPACE_CONFIG",) for o in facts.of(Kind.ENV_SET)):
                continue
            for occurrence in facts.of(Kind.DET_MODE, Kind.DET_MODE_WARN):
                module, ref = occurrence.site
                major, minor = context.config.torch_version
                yield context.report(
                    self,
                    module,
                    ref,
                    f"on torch {major}.{minor} deterministic mode makes cuBLAS calls raise unless "
                    'CUBLAS_WORKSPACE_CONFIG is set: add `os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")` '
                    "at the top of the entry module",
                    fix=_fix(module, module.nodes[ref], module is program.entry),
                )


def _fix(module, node, is_entry: bool):
    """At the top of the entry module, or right before the enabling call in a helper module."""
    os_name, imports = module_name_for(module, "os")
    line = f'{os_name}.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")'
    where = insert_after_imports(module, line) if is_entry else insert_before(module, node, line)
    return make_fix("safe", "Set CUBLAS_WORKSPACE_CONFIG before cuBLAS is used", [*imports, where])
