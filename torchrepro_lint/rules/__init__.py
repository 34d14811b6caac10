"""Every rule lives in its own module here (`trp101_missing_seed.py`, ...), found automatically.

What rules share: base (the Rule class), context (what a rule sees of the project and its
programs), edits (building the fixes they attach), statements (what a fix that moves or adds a
statement checks: blocks, names bound and changed), late_seed_fix (TRP105's move), pages (their
documentation), _ops (TRP401 and TRP402's op matches) and uninitialized_memory (TRP501's
analysis).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

from torchrepro_lint.rules.base import Example, Rule

__all__ = ["Example", "Rule", "all_rules", "rule_by_code"]


@lru_cache(maxsize=1)
def all_rules() -> tuple[Rule, ...]:
    rules: dict[str, Rule] = {}
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("trp"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Rule) and value is not Rule and "code" in vars(value):
                if value.code in rules:
                    raise RuntimeError(f"two rules claim {value.code}")
                rules[value.code] = value()
    return tuple(sorted(rules.values(), key=lambda r: r.code))


def rule_by_code(code: str) -> Rule | None:
    return next((r for r in all_rules() if r.code == code.upper()), None)
