"""TRP301 through a name bound to the loader class: each binding form that `reaching_value`
follows (plain, annotated, walrus, module level, conditional), and names bound to a call, which
stand for no class (classes._bound_to_references skips their dataflow)."""

from __future__ import annotations

from conftest import reported

SCRIPT = """from typing import Any
from torch.utils.data import DataLoader, Dataset

FAST_LOADER = DataLoader


def plain(ds):
    loader_class = DataLoader
    return loader_class(ds, num_workers=2)


def annotated(ds):
    annotated_class: Any = DataLoader
    return annotated_class(ds, num_workers=2)


def walrus(ds):
    if (walrus_class := DataLoader) is not None:
        return walrus_class(ds, num_workers=2)


def module_level(ds):
    return FAST_LOADER(ds, num_workers=2)


def conditional(ds, fast):
    chosen_class = DataLoader if fast else DataLoader
    return chosen_class(ds, num_workers=2)


def make(ds):
    return DataLoader


def built_by_a_call(ds):
    made_class = make(ds)
    return made_class(ds, num_workers=2)
"""


def test_a_loader_class_bound_to_a_name_is_followed_in_every_binding_form(lint):
    result = lint({"loaders.py": SCRIPT}, {"select": ["TRP301"]})
    rows = sorted(row for _, row, _ in reported(result, lint.root, "TRP301"))
    text = SCRIPT.splitlines()
    reported_in = [text[row - 1].strip() for row in rows]
    assert reported_in == [
        "return loader_class(ds, num_workers=2)",
        "return annotated_class(ds, num_workers=2)",
        "return walrus_class(ds, num_workers=2)",
        "return FAST_LOADER(ds, num_workers=2)",
        "return chosen_class(ds, num_workers=2)",
    ]
    assert rows[-1] < text.index("def make(ds):") + 1  # not the call of what make() returned
