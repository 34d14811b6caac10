"""Entry points and the programs they start, as the spec defines them.

Entry points: a module with `if __name__ == "__main__":`, a `__main__.py`, a console-script
target declared in pyproject, a script with top-level work that no project module imports, and
every notebook (nothing imports one; Jupyter runs it top to bottom as `__main__`).
"""

from __future__ import annotations

from dataclasses import dataclass

from torchrepro_lint.project.index import ProjectIndex
from torchrepro_lint.project.modules import ProjectModule
from torchrepro_lint.project.interpreter.run import Interpreter
from torchrepro_lint.project.interpreter.states import Facts
from torchrepro_lint.project.known_apis import ADAPTER, DROPOUT, Kind


@dataclass
class Program:
    entry: ProjectModule
    kind: str  # "main-guard" | "dunder-main" | "console-script" | "script"
    anchor_ref: int | None  # the `__main__` guard; None: line 1 of the file
    facts: Facts
    function: str | None = None  # console-script target function
    imported: bool = False  # the entry module is also imported by project code (a library)

    @property
    def name(self) -> str:
        return self.entry.source.path.as_posix() + (f":{self.function}" if self.function else "")


def interpret(project: ProjectIndex, module: ProjectModule, as_main: bool, function: str | None = None) -> Facts:
    return Interpreter(project, module).run_module(as_main=as_main, function=function)


@dataclass(frozen=True)
class Entry:
    """A program before it runs: where it starts and how."""

    module: ProjectModule
    kind: str
    anchor_ref: int | None
    as_main: bool
    function: str | None = None
    imported: bool = False

    def program(self, facts: Facts) -> Program:
        return Program(self.module, self.kind, self.anchor_ref, facts, self.function, self.imported)


def program_entries(
    project: ProjectIndex, console_scripts: dict[str, str] | None = None, library_packages=()
) -> list[Entry]:
    """Every program's entry, in a fixed order; found from the IR alone (no program runs).
    A module is library code when the project imports it or it belongs to a package the
    project distributes (`library_packages`, config.distributed_packages)."""
    entries: list[Entry] = []
    imported = project.imported_by_project()
    for module in project.linted_modules:
        # (a package's `__main__.py` is its command, `python -m pkg`: a program, not a smoke test)
        distributed = module.package is not None and not module.is_dunder_main and module.name.split(".")[0] in library_packages
        library = module.path in imported or distributed
        guard = module.table.main_guard
        if guard is not None or module.is_dunder_main:
            kind = "main-guard" if guard is not None else "dunder-main"
            entries.append(Entry(module, kind, guard, True, imported=library))
        elif module.table.has_top_level_work or module.path.suffix == ".ipynb":  # Jupyter runs every notebook
            if not library and not is_pytest_module(module):
                entries.append(Entry(module, "script", None, True))
    for target in (console_scripts or {}).values():
        module_name, _, function = target.partition(":")
        module = _module_from_root(project, module_name.strip())
        if module is not None and module.linted and function:
            symbol = module.function(function.strip())
            entries.append(Entry(module, "console-script", symbol.ref if symbol else None, False, function.strip()))
    return entries


def is_pytest_module(module: ProjectModule) -> bool:
    """A guard-less file pytest collects (`test_*.py` / `*_test.py` defining `test*` functions or
    `Test*` classes): pytest imports it, with whatever seeding its fixtures do, so its top-level
    code is test setup, not a script's run."""
    name = module.path.name
    if not (name.startswith("test_") or name.endswith("_test.py")):
        return False
    table = module.table
    return any(f.startswith("test") for f in table.functions) or any(c.startswith("Test") for c in table.classes)


def _module_from_root(project: ProjectIndex, name: str) -> ProjectModule | None:
    for module in project.modules.values():
        found = project.module_named(name, module)
        if found is not None:
            return found
    return None


# -- program facts shared by the rules -------------------------------------------------------
SEEDS_TORCH = (Kind.SEED_TORCH,)
CLAIMS = (Kind.CLAIM, Kind.CUDNN_DETERMINISTIC, Kind.DET_MODE, Kind.DET_MODE_WARN)
DET_MODE = (Kind.DET_MODE, Kind.DET_MODE_WARN)


def torch_randomness(facts: Facts):
    """The first thing that makes this program's results depend on torch's generator, or None.

    Building modules counts unless the program only evaluates weights it loads: no training
    and a checkpoint (or only pretrained models) behind every module. Their dropout layers
    then do not count either: they draw only in a training-mode forward pass.
    """
    inits = facts.of(Kind.MODULE_INIT)
    # A fresh adapter matters only to training: LoRA's default leaves B at zero, so the
    # model computes what its base does until B is trained (a LoftQ notebook replaces it).
    evaluated = [o for o in inits if o.detail[:1] != ADAPTER]
    loaded_only = not facts.has(Kind.TRAINING) and (
        facts.has(Kind.CHECKPOINT) or bool(evaluated) and all(o.detail == ("pretrained",) for o in evaluated)
    )
    for occurrence in facts.of(Kind.DRAW, Kind.RANDOMNESS):
        if not (loaded_only and occurrence.detail == DROPOUT):
            return occurrence
    if not inits:
        return None
    if facts.has(Kind.TRAINING):
        return inits[0]
    if not evaluated or loaded_only:
        return None
    return evaluated[0]


def seeds_torch(facts: Facts) -> bool:
    return facts.has(Kind.SEED_TORCH)


def main_path_seeds(facts: Facts):
    """Seeding on the program's own path: a `worker_init_fn` that seeds each worker does not
    make the main process seeded."""
    return [o for o in facts.of(Kind.SEED_TORCH) if o.ordered]


def trains(facts: Facts) -> bool:
    return any(o.detail == ("optimizer",) for o in facts.of(Kind.TRAINING))


def claims_determinism(facts: Facts) -> bool:
    return facts.has(*CLAIMS)
