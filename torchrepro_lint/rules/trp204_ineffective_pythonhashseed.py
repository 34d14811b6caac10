from __future__ import annotations

from torchrepro_lint.project.known_apis import Kind
from torchrepro_lint.rules.base import Example, Rule


class IneffectivePythonHashSeed(Rule):
    code = "TRP204"
    name = "ineffective-pythonhashseed"
    summary = "`PYTHONHASHSEED` set from inside the running program, too late to change its hashing."
    why = (
        "Python reads `PYTHONHASHSEED` once, at interpreter start-up. Setting it in `os.environ` "
        "cannot change this process's string hashing (so set iteration order stays randomised); "
        "it only reaches child processes started afterwards. The line gives a false sense of safety."
    )
    fix = (
        "Set it where Python is launched (`PYTHONHASHSEED=0 python train.py`, the job script, the "
        "container's environment), or avoid depending on set order (`sorted(...)`)."
    )
    not_reported = (
        "Other environment variables, such as `CUBLAS_WORKSPACE_CONFIG`.",
        "An environment built for a child process: `subprocess.run(..., env=dict(os.environ, "
        'PYTHONHASHSEED="0"))`.',
        "An assignment in code that no program runs.",
    )
    where_reported = (
        'At the statement that sets it: `os.environ["PYTHONHASHSEED"] = ...`, '
        '`os.environ.setdefault(...)`, `os.environ.update(...)`, or `os.putenv(...)`.',
        "Only when a program runs it; once, however many programs reach it.",
    )
    reference = (
        ("Python: PYTHONHASHSEED", "https://docs.python.org/3/using/cmdline.html#envvar-PYTHONHASHSEED"),
        ("Python: object.__hash__", "https://docs.python.org/3/reference/datamodel.html#object.__hash__"),
    )
    hazards = (
        Example(
            '''import os
import random

def seed_everything(seed):
    random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)  # <-- TRP204

if __name__ == "__main__":
    seed_everything(42)
''',
            "The popular seed_everything recipe",
            fixed='''import random

def seed_everything(seed):
    random.seed(seed)
    # PYTHONHASHSEED is set where Python starts: `PYTHONHASHSEED=0 python train.py`

if __name__ == "__main__":
    seed_everything(42)
''',
        ),
        Example(
            '''import os

os.environ.setdefault("PYTHONHASHSEED", "0")  # <-- TRP204
print(hash("abc"))
''',
            "setdefault in a script",
        ),
        Example(
            '''import os

if __name__ == "__main__":
    os.putenv("PYTHONHASHSEED", "0")  # <-- TRP204
''',
            "putenv",
        ),
    )
    traps = (
        Example(
            '''import os

if __name__ == "__main__":
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
''',
            "Other environment variables",
        ),
        Example(
            '''import os

def seed_everything(seed):
    os.environ["PYTHONHASHSEED"] = str(seed)
''',
            "Not reachable from any program",
        ),
        Example(
            '''import os
import subprocess

if __name__ == "__main__":
    env = dict(os.environ, PYTHONHASHSEED="0")
    subprocess.run(["python", "child.py"], env=env)
''',
            "Passed to a child's environment explicitly",
        ),
    )

    def check_programs(self, context):
        for program in context.programs:
            for occurrence in program.facts.of(Kind.ENV_SET):
                if occurrence.detail[:1] != ("PYTHONHASHSEED",):
                    continue
                module, ref = occurrence.site
                yield context.report(
                    self,
                    module,
                    ref,
                    "PYTHONHASHSEED is read once at interpreter start-up: setting it here leaves this "
                    "process's hash seed random (only children see it); set it where Python is launched",
                )
