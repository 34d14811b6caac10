from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.dataflow.classes import DATASET_BASES, DATASET_PREFIXES, derives_from
from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint.analysis.dataflow.order_flow import HAZARD, OrderFlow, Verdict, combine
from torchrepro_lint.analysis.syntax import int_value, method_name
from torchrepro_lint.rules.base import Example, Rule, last_names
from torchrepro_lint.rules.edits import make_fix, replace

LISTING_CALLS = {
    "os.listdir": "os.listdir",
    "os.scandir": "os.scandir",
    "glob.glob": "glob.glob",
    "glob.iglob": "glob.iglob",
    "os.walk": "os.walk",
}
PATH_METHODS = frozenset({"glob", "rglob", "iterdir"})
ANY_RECEIVER_METHODS = frozenset({"rglob", "iterdir"})  # pathlib-only names
PATH_CLASSES = frozenset({"pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath", "pathlib.WindowsPath"})
ZIP_PATH_CLASSES = frozenset({"zipfile.Path", "zipfile._path.Path"})  # an archive's entries, in the order written
PATH_RETURNING_METHODS = frozenset({"resolve", "absolute", "expanduser", "with_suffix", "with_name", "joinpath", "with_stem"})


class UnsortedListing(Rule):
    code = "TRP601"
    name = "unsorted-listing"
    summary = "A directory listing's order decides indices, pairings or a dataset without `sorted()`."
    why = (
        "`os.listdir`, `os.scandir`, `glob`, `Path.glob`/`rglob`/`iterdir` and `os.walk` return "
        "entries in the order the file system stores them: it differs between ext4, XFS, NFS and "
        "macOS, and after files are copied. When that order decides which sample has which "
        "index, which label goes with which image, which split a file lands in, or which file "
        "is 'the first match', the same code on another machine trains on different data."
    )
    fix_safety = "safe"
    fix = (
        "Wrap the listing in `sorted(...)`; `--fix` does (`next(iter(sorted(...)))` under `next`). "
        "For `os.walk`, sort `dirs` in place and iterate `sorted(files)`; `os.walk` and `os.scandir` "
        "get no automatic fix (a walk is sorted in place, and `DirEntry` objects do not compare)."
    )
    where_reported = (
        "At the listing call, when its order reaches: indexing or slicing, `enumerate`, `zip`, "
        "`.index()`, `next()` or a loop that returns or breaks at the first match, a seeded "
        "`random.shuffle` / `choice` / `sample` (they permute by position), a map of indices built "
        "in iteration order, or a project Dataset's constructor. The message gives that line.",
        "The order is followed through variables, `self.<attr>` across a class (a dataset's file "
        "list indexed in `__getitem__`), list comprehensions, `list()`, and lists accumulated in a "
        "loop (`append`, `extend`, `+=`).",
    )
    not_reported = (
        "`sorted()` or `.sort()` anywhere on the way, or later on the accumulated list.",
        "`len`, `in`, sets, truthiness.",
        "Loops with order-free bodies (deleting, copying, counting), and a worklist emptied with "
        "`.pop()` in `while todo:` whose body appends nothing but more work and neither breaks nor "
        "returns.",
        "A result checked to be single: `len(files) == 1`, unittest's "
        "`self.assertEqual(len(files), 1)`.",
        "`next()` whose value only says whether there is an entry: compared `is None` / "
        "`is not None`, tested for truth, or thrown away for its `StopIteration`.",
        "`zip` of a list with a list derived from it element by element (`zip(xs, [f(x) for x in "
        "xs])`, `map(f, xs)`, no filter); also through a variable, when neither list is touched "
        "before the zip but by `len`, `in` or a loop.",
        "The entries of a zip archive (`zipfile.Path(zf).iterdir()`): they come in the order they "
        "were written.",
        "A list returned or passed to another function: the caller may sort it.",
    )
    decisions = (
        "`Path.glob` is reported only on a receiver that is visibly a `Path`; `rglob` and "
        "`iterdir` are pathlib names and are accepted on any receiver.",
        "A seeded `random.shuffle`, `choice` or `sample` of a listing is a hazard: they permute by "
        "position, so the same seed picks different files when the listing's order differs.",
    )
    reference = (
        ("os.listdir (\"in arbitrary order\")", "https://docs.python.org/3/library/os.html#os.listdir"),
        ("glob.glob", "https://docs.python.org/3/library/glob.html#glob.glob"),
        ("pathlib.Path.iterdir", "https://docs.python.org/3/library/pathlib.html#pathlib.Path.iterdir"),
        ("os.walk", "https://docs.python.org/3/library/os.html#os.walk"),
    )
    # Candidates are calls resolving to one of LISTING_CALLS, or the Path methods by name.
    triggers = last_names(LISTING_CALLS, PATH_METHODS)
    hazards = (
        Example(
            '''import os
from torch.utils.data import Dataset

class Frames(Dataset):
    def __init__(self, root):
        self.paths = [os.path.join(root, f) for f in os.listdir(root) if f.endswith(".png")]  # <-- TRP601

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        return self.paths[i]
''',
            "A dataset's file list indexed in __getitem__",
            fixed='''import os
from torch.utils.data import Dataset

class Frames(Dataset):
    def __init__(self, root):
        self.paths = [os.path.join(root, f) for f in sorted(os.listdir(root)) if f.endswith(".png")]

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        return self.paths[i]
''',
        ),
        Example(
            '''import glob
from pathlib import Path

def pairs(root):
    images = glob.glob(f"{root}/images/*.jpg")  # <-- TRP601
    masks = sorted(glob.glob(f"{root}/masks/*.png"))
    classes = {name: i for i, name in enumerate(Path(root).iterdir())}  # <-- TRP601
    return list(zip(images, masks)), classes
''',
            "zip pairing and class indices by enumeration",
        ),
        Example(
            '''import glob
import os

def latest_checkpoint(run_dir):
    return next(glob.iglob(os.path.join(run_dir, "*.pt")))  # <-- TRP601

def collect(root):
    files = []
    for dirpath, dirnames, filenames in os.walk(root):  # <-- TRP601
        for name in filenames:
            files.append(os.path.join(dirpath, name))
    train = files[: int(0.9 * len(files))]
    return train
''',
            "First match, and an os.walk accumulation split by position",
        ),
    )
    traps = (
        Example(
            '''import glob

def all_images(dirs):
    files = []
    for d in dirs:
        files += glob.glob(f"{d}/*.jpg")
    files = sorted(files)
    return files[0], files
''',
            "sorted() later over the accumulated list",
        ),
        Example(
            '''import os

def names(root):
    entries = os.listdir(root)
    entries.sort()
    return {n: i for i, n in enumerate(entries)}
''',
            "A later .sort() in place",
        ),
        Example(
            '''import glob
import os

def cleanup(run_dir, keep):
    for path in glob.glob(os.path.join(run_dir, "*.tmp")):
        os.remove(path)
    n = len(os.listdir(run_dir))
    present = "config.yaml" in os.listdir(run_dir)
    files = glob.glob(os.path.join(run_dir, "*.yaml"))
    assert len(files) == 1, "expected one config"
    return n, present, files[0], set(os.listdir(keep))
''',
            "Order-free uses, membership, len, sets, and a single asserted result",
        ),
        Example(
            '''from pathlib import Path

def can_resume(run_dir):
    return next(Path(run_dir).glob("*.pth"), None) is not None

def is_empty(d):
    try:
        next(Path(d).iterdir())
        return False
    except StopIteration:
        return True
''',
            "next() that only asks whether an entry exists",
        ),
        Example(
            '''import os

def upload(root, client):
    sources = [os.path.join(d, f) for d, _, files in os.walk(root) for f in files]
    for src, key in zip(sources, [os.path.relpath(s, root) for s in sources]):
        client.upload_file(src, key)
''',
            "zip with a list derived from the same listing, element by element",
        ),
    )

    def check_module(self, module, context):
        index = module.index
        data = flow(index)
        order = OrderFlow(index, self._dataset_sink(context, module), sets=False)
        for site in index.calls:
            call = site.node
            name = self._listing(index, data, site.qualname, call)
            if name is None:
                continue
            verdict = self._verdict(index, data, order, site.qualname, call)
            if verdict.kind != HAZARD:
                continue
            where = verdict.node if verdict.node is not None else call
            line = module.source.span(where)[0]
            yield context.report(
                self, module, call,
                f"`{name}(...)` lists entries in file-system order, which differs between machines and "
                f"copies, and that order decides {verdict.sink} (line {line}): the same code sees "
                f"different data elsewhere; wrap it in `sorted(...)`",
                fix=sorted_fix(module, call),
            )

    def _listing(self, index, data, qualname, call: cst.Call) -> str | None:
        if qualname in LISTING_CALLS:
            return LISTING_CALLS[qualname]
        method = method_name(call)
        if method in PATH_METHODS and (method in ANY_RECEIVER_METHODS or _is_path(index, data, call.func.value, 0)):
            if qualname and qualname.startswith(("glob.", "os.")):
                return None
            if _is_path(index, data, call.func.value, 0, ZIP_PATH_CLASSES):
                return None  # a zip's entries come in the order they were written, on every machine
            return f"Path.{method}"
        return None

    def _verdict(self, index, data, order: OrderFlow, qualname, call: cst.Call) -> Verdict:
        if qualname != "os.walk":
            return order.of(call)
        parent = data.parents.get(call)
        if isinstance(parent, cst.For) and parent.iter is call:
            target = parent.target
            names = [e.value for e in target.elements] if isinstance(target, cst.Tuple) else []
            if len(names) == 3 and _sorts_in_place(data, names[1], parent):
                # The walk order is fixed; only the order of each directory's files remains.
                files = names[2]
                if not isinstance(files, cst.Name):
                    return Verdict("safe")
                uses = [u for u in data.name_uses(files.value, data.owner(parent)) if data.inside(u, parent.body)]
                return combine([order.of(u) for u in uses]) if uses else Verdict("safe")
            return order.of(call)
        # next(os.walk(d)): the top directory's (root, dirs, files).
        holder = parent
        call_next = data.parents.get(holder) if isinstance(holder, cst.Arg) else None
        if isinstance(call_next, cst.Call) and index.resolve(call_next.func, call_next) == "builtins.next":
            outer = data.parents.get(call_next)
            if isinstance(outer, cst.Subscript) and outer.value is call_next and len(outer.slice) == 1:
                inner = outer.slice[0].slice
                if isinstance(inner, cst.Index) and int_value(inner.value) in (1, 2):
                    return order.of(outer)
                return Verdict("safe")
            if isinstance(outer, cst.Assign) and isinstance(outer.targets[0].target, cst.Tuple):
                elements = outer.targets[0].target.elements
                verdicts = [order.of_binding(e.value, outer) for e in elements[1:3]]
                return combine(verdicts)
            return Verdict("safe")
        return order.of(call)

    @staticmethod
    def _dataset_sink(context, module):
        project = context.project

        def sink(call: cst.Call, qualname: str | None, arg_node) -> str | None:
            if qualname and derives_from(project, module, qualname, DATASET_BASES, DATASET_PREFIXES) not in (None, True):
                return "the sample order of a dataset"
            return None

        return sink


def _sorts_in_place(data, target: cst.BaseExpression, loop: cst.For) -> bool:
    """`dirs.sort()` or `dirs[:] = sorted(dirs)` in the loop body."""
    if not isinstance(target, cst.Name):
        return False
    for use in data.name_uses(target.value, data.owner(loop)):
        if not data.inside(use, loop.body):
            continue
        parent = data.parents.get(use)
        if isinstance(parent, cst.Attribute) and parent.attr.value == "sort":
            return True
        if isinstance(parent, cst.Subscript) and data._is_store(parent):
            return True
    return False


def _is_path(index, data, expr: cst.BaseExpression, depth: int, classes=PATH_CLASSES) -> bool:
    """Visibly a pathlib path (or one of `classes`: ZIP_PATH_CLASSES): `Path(...)`, `p / "x"`,
    `p.parent`, a variable holding one, or a parameter annotated `Path`."""
    if depth > 5:
        return False
    if isinstance(expr, cst.Call):
        if isinstance(expr.func, (cst.Name, cst.Attribute)) and index.resolve(expr.func, expr) in classes:
            return True
        method = method_name(expr)
        return method in PATH_RETURNING_METHODS and _is_path(index, data, expr.func.value, depth + 1, classes)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide):
        return _is_path(index, data, expr.left, depth + 1, classes)
    if isinstance(expr, cst.Attribute) and expr.attr.value == "parent":
        return _is_path(index, data, expr.value, depth + 1, classes)
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "parents":
        return _is_path(index, data, expr.value.value, depth + 1, classes)
    if isinstance(expr, cst.Name):
        param = data.parameter(expr)
        if param is not None:
            annotation = param.annotation.annotation if param.annotation is not None else None
            return annotation is not None and index.resolve(annotation, param) in classes
        value = data.reaching_value(expr)
        return value is not None and _is_path(index, data, value, depth + 1, classes)
    return False


def sorted_fix(module, call):
    """Wrap the listing in `sorted(...)` (`iter(sorted(...))` under `next`). `os.walk` and
    `os.scandir` are left alone: a walk is sorted in place, and DirEntry objects do not compare."""
    qualname = module.index.resolve(call.func, call) if isinstance(call, cst.Call) else None
    if qualname in ("os.walk", "os.scandir") or not isinstance(call, cst.Call):
        return None
    code = module.index.module.code_for_node(call)
    parent = module.index.parents.get(call)
    holder = module.index.parents.get(parent) if isinstance(parent, cst.Arg) else None
    if isinstance(holder, cst.Call) and module.index.resolve(holder.func, holder) == "builtins.next":
        return make_fix("safe", "Take the first entry in sorted order", [replace(module, call, f"iter(sorted({code}))")])
    return make_fix("safe", "Wrap the listing in `sorted(...)`", [replace(module, call, f"sorted({code})")])
