from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.dataflow.elements import STR, Elements
from torchrepro_lint.analysis.dataflow.hash_order import ordered, ordered_sets, sink_text
from torchrepro_lint.analysis.dataflow.order_flow import OrderFlow
from torchrepro_lint.analysis.names import dotted

from torchrepro_lint.rules.base import Example, Rule
from torchrepro_lint.rules.edits import make_fix, replace


class HashOrder(Rule):
    code = "TRP602"
    name = "hash-order"
    summary = "The iteration order of a set of strings decides indices, list order or an ordered API's input."
    why = (
        "String hashes are salted per process (`PYTHONHASHSEED`), so a set of strings iterates "
        "in a different order in every run. `list(set(labels))` or "
        "`{c: i for i, c in enumerate(set(classes))}` then assigns different class indices, "
        "vocabularies or feature columns each run, and a checkpoint no longer matches its label map."
    )
    fix_safety = "unsafe"
    fix = (
        "Iterate in a defined order: `sorted(set(x))` (or keep first-seen order with "
        "`list(dict.fromkeys(x))`). With `--unsafe-fixes`, `list(s)` becomes `sorted(s)` and "
        "`enumerate(s)`, `tuple(s)`, `zip(s, ...)` iterate `sorted(s)`: unsafe, because it changes "
        "which index each element gets, and `sorted` needs comparable elements."
    )
    where_reported = (
        "At the set where its order is first used (inside `list(...)`, `enumerate(...)`, a `for`), "
        "including a parameter annotated `set[str]` / `frozenset[str]`.",
        "Only sets whose elements are visibly strings: string literals, f-strings, `str(...)`, "
        "string methods, `.split()` and the names it is unpacked into (`path, label = "
        "line.split(\",\")`), lines of a file, `os.listdir`, a `dtype=str` array, parameters "
        "annotated `str` / `list[str]`.",
        "Also strings: the cells of a `csv.reader` row, the values of a `csv.DictReader` row, and a "
        "`Counter`'s keys (iterated, `.keys()`, the first of `.most_common()` / `.items()` pairs) "
        "when it counts strings. Elements are followed through variables, loop variables and lists "
        "filled by `.append` / `.extend` / `+=`.",
        "Text read from outside: a text-mode file's `.read()` / `.readline()` and `path.read_text()` "
        "(a string; its characters when iterated: `list(set(open(p).read()))`), the lines of a file "
        "bound by `with open(p) as f`, the keys of a `json.load` / `json.loads` document "
        "(`.keys()`, the first of `.items()` pairs, at any depth: JSON object keys are strings), "
        "`re.findall` / `re.split`, and `map(str, ...)`, `map(str.strip, ...)` or a lambda making "
        "strings. `set().union(*[l.split() for l in f])` and `itertools.chain.from_iterable(...)` "
        "hold what the inner lists hold; a set a nested callback fills (`def add(example): "
        "vocab.update(example[\"text\"].split())` handed to `dataset.map`) holds what it adds.",
        "Order-sensitive uses: `list` / `tuple` / a list comprehension whose result is then used or "
        "escapes, indexing, `enumerate`, `zip`, `next()`, `.pop()`, a first-match loop, "
        "accumulating in a loop, index maps built in iteration order.",
    )
    not_reported = (
        "`sorted(set(x))`, `len`, `in`, `sum` / `min` / `max`, set algebra (also `|=`, `-=`).",
        "Sets of ints, floats or tuples of them: they iterate in a fixed order. Iterating the bytes "
        "of a file opened `\"rb\"` yields ints; a file whose mode is not a literal is unknown.",
        "The values of a JSON document, and a document iterated directly (a list's items, which "
        "may be numbers): unknown.",
        "Sets of parameters or modules: TRP603 reports them.",
        "Loops with order-free bodies; a list started afresh on each turn (`lines = []`) and not "
        "read after the loop holds only that turn's items.",
        "Dict and set comprehensions keyed by the element.",
        "Text only: `str.join`, and a list of the set that only ends up in a message (an f-string, "
        "`\"...\" % ...`, `\"...\".format(...)`, `print`, `logging.*`, a logger's `debug` / `info` / "
        "`warning` / ... (a receiver named like `logger` / `log`, or bound to `getLogger(...)`), "
        "`warnings.warn`, an exception constructed in a `raise`). Such a list that is also indexed "
        "or returned is still reported.",
        "A set appended to a list as one element (`out.append(set(x))`); `out.extend(set(x))` "
        "copies its order and is reported.",
        "An index or `next()` on a set checked to hold one element (`len(s) == 1`, unittest's "
        "`self.assertEqual(len(s), 1)`), and `next()` whose value is only compared `is None` / "
        "`is not None` or tested for truth.",
        "Iterating a `Counter` itself (`counts.most_common()`): it keeps insertion order, not hash order.",
    )
    decisions = (
        "Sets of unknown elements are left alone, though some hold strings: precision before recall.",
        "A list rebound from the set it copies (`words = list(words)`) is followed as a new "
        "binding: its uses decide, as those of `itos = list(words)` would.",
    )
    reference = (
        ("PYTHONHASHSEED", "https://docs.python.org/3/using/cmdline.html#envvar-PYTHONHASHSEED"),
        ("object.__hash__ (hash randomization)", "https://docs.python.org/3/reference/datamodel.html#object.__hash__"),
    )
    # A candidate set is a set display or comprehension (`{`), a call resolving to
    # set/frozenset, or a parameter annotated set[str] and the like. Most files have a `{`: the
    # gate saves little here, but it costs nothing.
    triggers = ("{", "set", "frozenset", "Set", "FrozenSet", "AbstractSet")
    hazards = (
        Example(
            '''def build_vocab(lines):
    words = set()
    for line in lines:
        words.update(line.split())
    itos = list(words)  # <-- TRP602
    return {w: i for i, w in enumerate(itos)}
''',
            "A vocabulary indexed in hash order",
            fixed='''def build_vocab(lines):
    words = set()
    for line in lines:
        words.update(line.split())
    itos = sorted(words)
    return {w: i for i, w in enumerate(itos)}
''',
        ),
        Example(
            '''import numpy as np

def encode_onehot(labels):
    classes = set(labels)
    mapping = {c: np.identity(len(classes))[i] for i, c in enumerate(classes)}  # <-- TRP602
    return np.array([mapping[l] for l in labels])

def load(path):
    table = np.genfromtxt(path, dtype=np.dtype(str))
    return encode_onehot(table[:, -1])
''',
            "Class indices by enumerating a set of string labels",
        ),
        Example(
            '''def columns(rows: list[str]):
    names = {r.strip().lower() for r in rows}
    header = []
    for name in names:  # <-- TRP602
        header.append(name)
    return header
''',
            "A list accumulated while iterating a set",
        ),
        Example(
            '''import csv

def class_indices(path):
    labels = []
    with open(path, newline="") as f:
        for row in csv.reader(f):
            labels.append(row[-1])
    return {c: i for i, c in enumerate(set(labels))}  # <-- TRP602
''',
            "Class indices from the labels of a CSV file",
        ),
        Example(
            '''def char_vocab(path):
    text = open(path, "r").read()
    chars = list(set(text))  # <-- TRP602
    return {c: i for i, c in enumerate(chars)}
''',
            "A character vocabulary from a text file",
        ),
    )
    traps = (
        Example(
            '''def build_vocab(text):
    words = text.split()
    itos = sorted(set(words))
    return {w: i for i, w in enumerate(itos)}
''',
            "sorted(set(words))",
        ),
        Example(
            '''def stats(tokens: list[str], counts):
    unique = set(tokens)
    total = sum(counts[t] for t in unique)
    for t in unique:
        counts[t] += 1
    return len(unique), "cls" in unique, total
''',
            "len, in, sums and order-free loops",
        ),
        Example(
            '''def ids(batch):
    seen = set(range(10))
    labels = list(set(batch.tolist()))
    return list(seen), labels
''',
            "Sets of ints (or of unknown elements)",
        ),
        Example(
            '''import csv
from collections import Counter

def vocab(path):
    with open(path, newline="") as f:
        counts = Counter(row[0] for row in csv.reader(f))
    itos = [w for w, _ in counts.most_common()]
    return {w: i for i, w in enumerate(itos)}
''',
            "A Counter iterates in insertion order, not hash order",
        ),
        Example(
            '''def bags(answers):
    out = []
    for a in answers:
        out.append(set(a.split()))
    return out

def only_key(names: set[str], value):
    assert len(names) == 1
    return {next(iter(names)): value}
''',
            "A set stored as one element, and next() on a set asserted to hold one",
        ),
        Example(
            '''import logging

logger = logging.getLogger(__name__)

def select(columns: list[str], wanted: list[str]):
    missing = set(wanted) - set(columns)
    if missing:
        raise ValueError(f"columns not found: {list(missing)}")
    logger.info("selecting %s", list(set(wanted)))
    return [c for c in columns if c in wanted]
''',
            "A list of a set shown only in an error or a log message",
        ),
        Example(
            '''def byte_alphabet(path):
    with open(path, "rb") as f:
        data = f.read()
    return list(set(data))
''',
            "The bytes of a binary file iterate as ints",
        ),
        Example(
            '''import torch

def optimizer_for(model):
    params = list(set(model.parameters()))
    return torch.optim.SGD(params, lr=0.1)
''',
            "Sets of parameters belong to TRP603",
        ),
    )

    def check_module(self, module, context):
        index = module.index
        elements = Elements(index)
        order = OrderFlow(index)
        reported: set[int] = set()
        for at, verdict in ordered_sets(index, elements, order, STR, reported):
            yield self._report(context, module, at, verdict)
        for param in _set_parameters(index):
            verdict = order.of_binding(param.name, param)
            at = verdict.entry if verdict.entry is not None else param
            if ordered(verdict) and id(at) not in reported:
                reported.add(id(at))
                yield self._report(context, module, at, verdict)

    def _report(self, context, module, at, verdict):
        return context.report(
            self, module, at,
            f"the iteration order of a set of strings decides {sink_text(verdict)}: string hashes are salted per "
            f"process, so the order (and any index derived from it) changes every run; iterate "
            f"`sorted(...)` instead",
            fix=_sorted_fix(module, at),
        )


def _set_parameters(index):
    """Parameters annotated `set[str]` / `Set[str]` / `frozenset[str]`."""
    for node in index.nodes_of(cst.Param):  # in source order
        if node.annotation is not None:
            annotation = node.annotation.annotation
            if isinstance(annotation, cst.Subscript) and len(annotation.slice) == 1:
                base = (dotted(annotation.value) or "").rsplit(".", 1)[-1]
                inner = annotation.slice[0].slice
                if base in ("set", "Set", "frozenset", "FrozenSet", "AbstractSet") and isinstance(inner, cst.Index):
                    if isinstance(inner.value, cst.Name) and inner.value.value == "str":
                        yield node


def _sorted_fix(module, at):
    """`list(s)` -> `sorted(s)`, `tuple(s)`/`enumerate(s)`/`zip(s, ...)` -> over `sorted(s)`.
    Unsafe: it changes which index each element gets, and `sorted` needs comparable elements."""
    code = module.index.module.code_for_node
    parent = module.index.parents.get(at)
    holder = module.index.parents.get(parent) if isinstance(parent, cst.Arg) else None
    if isinstance(holder, cst.Call) and not parent.keyword and not parent.star:
        at, inner_node = holder, at  # the set sits directly in the consuming call
    elif isinstance(at, cst.Call) and len(at.args) == 1 and at.args[0].keyword is None and not at.args[0].star:
        inner_node = at.args[0].value
    else:
        return None
    callee = module.index.resolve(at.func, at)
    inner = code(inner_node)
    if callee == "builtins.list" and len(at.args) == 1:
        return make_fix("unsafe", "Iterate in sorted order", [replace(module, at, f"sorted({inner})")])
    if callee in ("builtins.tuple", "builtins.enumerate", "builtins.zip"):
        return make_fix("unsafe", "Iterate in sorted order", [replace(module, inner_node, f"sorted({inner})")])
    return None
