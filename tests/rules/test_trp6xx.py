"""Order of the environment (TRP601-603): sinks, traps and regressions from real code."""

from __future__ import annotations

from conftest import reported


def lines(lint, code_text, rule):
    result = lint(code_text, {"select": [rule]})
    assert not result.errors, result.errors
    return {row for _, row, _ in reported(result, lint.root, rule)}


# -- TRP601 ---------------------------------------------------------------------------------
def test_trp601_sinks(lint):
    assert lines(
        lint,
        """import glob
import os
import random
from pathlib import Path

def f(root, other):
    a = os.listdir(root)
    label = a.index("cat")
    b = glob.glob(root + "/*")
    random.shuffle(b)
    c = [p for p in Path(root).glob("*.png")]
    first = c[0]
    with os.scandir(root) as it:
        names = [e.name for e in it]
    head = names[:10]
    for name in os.listdir(other):
        if name.endswith(".pt"):
            return name, label, first, head
""",
        "TRP601",
    ) == {7, 9, 11, 13, 16}


def test_trp601_first_match_needs_a_selection(lint):
    assert lines(
        lint,
        """import os

def f(root):
    found = False
    for name in os.listdir(root):
        if name.endswith(".pt"):
            found = True
            break
    chosen = None
    for name in os.listdir(root):
        if name.endswith(".pt"):
            chosen = name
            break
    return found, chosen
""",
        "TRP601",
    ) == {10}


def test_trp601_unknown_consumers_and_receivers_stay_silent(lint):
    assert lines(
        lint,
        """import glob
import os

def listing(root, store):
    files = glob.glob(root + "/*.jpg")
    store.save(files)
    more = store.glob("*.jpg")
    return [os.path.join(root, f) for f in os.listdir(root)], more[0]

def stream(root):
    for f in os.listdir(root):
        yield f
""",
        "TRP601",
    ) == set()


def test_trp601_dataset_constructor_and_attribute(lint):
    assert lines(
        lint,
        """import os
from torch.utils.data import Dataset

class Files(Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __getitem__(self, i):
        return self.paths[i]

def build(root):
    return Files(os.listdir(root))
""",
        "TRP601",
    ) == {12}


def test_trp601_os_walk_forms(lint):
    assert lines(
        lint,
        """import os

def sorted_walk(root):
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for f in sorted(filenames):
            out.append(os.path.join(dirpath, f))
    return out[0]

def half_sorted_walk(root):
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for f in filenames:
            out.append(os.path.join(dirpath, f))
    return out[0]

def classes(root):
    names = next(os.walk(root))[1]
    top = next(os.walk(root))[0]
    _, dirs, _ = next(os.walk(root))
    return {c: i for i, c in enumerate(names)}, top, dirs[0]
""",
        "TRP601",
    ) == {13, 20, 22}


def test_trp601_parallel_lists_from_one_walk_pair_up_in_any_order(lint):
    # Regression (timm's folder reader): filenames and labels are appended side by side in the
    # same loop, so zip() pairs them correctly whatever the walk order; the result is sorted.
    assert lines(
        lint,
        """import os

def find_images(folder, sort=True):
    labels = []
    filenames = []
    for root, subdirs, files in os.walk(folder):
        label = os.path.basename(root)
        for f in files:
            filenames.append(os.path.join(root, f))
            labels.append(label)
    pairs = [(f, l) for f, l in zip(filenames, labels)]
    if sort:
        pairs = sorted(pairs)
    return pairs
""",
        "TRP601",
    ) == set()


def test_trp601_zip_of_independent_listings_is_still_reported(lint):
    assert lines(
        lint,
        """import glob

def pairs(root):
    images = []
    for p in glob.glob(root + "/img/*"):
        images.append(p)
    masks = sorted(glob.glob(root + "/mask/*"))
    return list(zip(images, masks))
""",
        "TRP601",
    ) == {5}


def test_trp601_enumerate_counter_used_only_for_logging(lint):
    # Regression (timm's tar reader): the index only numbers progress messages.
    assert lines(
        lint,
        """import glob
import logging

_logger = logging.getLogger(__name__)

def scan(root):
    tars = glob.glob(root + "/*.tar")
    info = {"trees": []}
    for i, fn in enumerate(tars):
        _logger.debug(f"{i}/{len(tars)}: {fn}")
        info["trees"].append(fn)
    for j, fn in enumerate(glob.glob(root + "/*.idx")):
        info[fn] = j
    return info
""",
        "TRP601",
    ) == {12}


# -- TRP602 ---------------------------------------------------------------------------------
def test_trp602_string_evidence_and_sinks(lint):
    assert lines(
        lint,
        """import os

def f(path, names: set[str], words):
    lines = set(line.strip() for line in open(path))
    ordered = list(lines)
    first = next(iter(names))
    w2i = {}
    for w in frozenset(os.listdir(path)):
        w2i[w] = len(w2i)
    opaque = list(set(words))
    return ordered, first, w2i, opaque
""",
        "TRP602",
    ) == {5, 6, 8}


def test_trp602_order_free_uses(lint):
    assert lines(
        lint,
        """def f(text, counts):
    words = set(text.split())
    joined = ", ".join(words)
    lookup = {w: counts[w] for w in words}
    biggest = max(words, key=len)
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    return joined, lookup, biggest, sorted(words, key=str.lower)
""",
        "TRP602",
    ) == set()


def test_trp602_sets_grown_with_augmented_set_operators(lint):
    # Regression (torchtune's fusion models): names of trainable parameters gathered with `|=`
    # and only tested with `in` afterwards; `|=` keeps a set, it copies nothing into a list.
    source = """def set_trainable(model, names):
    for name, param in model.named_parameters():
        param.requires_grad_(name in names)


def freeze(model, encoder_trainable, head_names):
    names = set()
    if encoder_trainable:
        names |= {f"encoder.{n}" for n, _ in model.named_parameters()}
    names -= {f"head.{n}" for n in head_names}
    set_trainable(model, names)


def vocabulary(lines):
    words = set()
    for line in lines:
        words |= {w.lower() for w in line.split()}
    return {w: i for i, w in enumerate(words)}
"""
    assert lines(lint, source, "TRP602") == {18}


def test_trp602_sets_built_by_add_and_reported_once(lint):
    assert lines(
        lint,
        """def vocab(lines):
    seen = set()
    for line in lines:
        for token in line.split():
            seen.add(token.lower())
    extra = seen | {"<pad>", "<unk>"}
    return dict(enumerate(extra))
""",
        "TRP602",
    ) == {7}


# -- TRP603 ---------------------------------------------------------------------------------
def test_trp603_consumers(lint):
    assert lines(
        lint,
        """import torch
from torch.nn.utils import clip_grad_norm_

class Lion(torch.optim.Optimizer):
    pass

def f(model, head):
    clip_grad_norm_(set(model.parameters()), 1.0)
    modules = list(set(model.modules()))
    shared = set()
    for p in head.parameters():
        shared.add(p)
    opt = Lion(shared)
    count = len(set(model.parameters()))
    return modules, opt, count
""",
        "TRP603",
    ) == {8, 9, 13}


def test_trp603_named_parameter_names_are_strings_not_parameters(lint):
    result = lint(
        """def groups(model):
    names = {n for n, p in model.named_parameters() if p.ndim < 2}
    return list(names)
""",
        {"select": ["TRP602", "TRP603"]},
    )
    assert {(row, code) for _, row, code in reported(result, lint.root)} == {(3, "TRP602")}


# -- TRP602: strings from csv rows, unpacked split tokens and Counter keys (issue 16) ----------
def test_trp602_strings_from_csv_rows_split_tokens_and_counter_keys(lint):
    assert lines(
        lint,
        """import csv
from collections import Counter

def label_map(path):
    names = []
    with open(path, newline="") as handle:
        for record in csv.reader(handle):
            names.append(record[2])
    return {n: i for i, n in enumerate(set(names))}

def species(path):
    with open(path) as handle:
        table = list(csv.DictReader(handle))
    return list({entry["species"] for entry in table})

def header_columns(path):
    with open(path) as handle:
        header = next(csv.reader(handle))
    return list(set(header))

def tags(lines):
    found = []
    for line in lines:
        image, tag = line.rstrip().split("\\t")
        found.append(tag)
    return tuple(set(found))

def tokens(corpus):
    freq = Counter()
    for sentence in corpus:
        freq.update(sentence.lower().split())
    return list(set(freq))

def frequent(corpus):
    seen = Counter()
    for sentence in corpus:
        for word in sentence.split():
            seen[word] += 1
    keep = set(w for w, n in seen.most_common(1000))
    return list(keep), dict(enumerate(set(seen.keys())))
""",
        "TRP602",
    ) == {9, 14, 19, 26, 32, 40}


def test_trp602_csv_numbers_counter_order_and_sorted_sets_are_left_alone(lint):
    assert lines(
        lint,
        """import csv
from collections import Counter

def ids(path):
    numbers = []
    with open(path) as handle:
        for record in csv.reader(handle):
            numbers.append(int(record[0]))
    return list(set(numbers))

def vocab(corpus):
    freq = Counter(w for line in corpus for w in line.split())
    itos = [w for w, _ in freq.most_common()]
    return {w: i for i, w in enumerate(itos)}, sorted(set(freq))

def sizes(arrays):
    shapes = []
    for a in arrays:
        rows, cols = a.shape
        shapes.append(cols)
    return list(set(shapes))

def fields(path):
    with open(path) as handle:
        header = next(csv.reader(handle))
    return len(set(header)), "label" in set(header), sorted(set(header))
""",
        "TRP602",
    ) == set()


def test_trp601_a_single_result_asserted_with_unittest(lint):
    # torchtitan's tests: `self.assertEqual(len(py_files), 1, ...)` then `py_files[0]`.
    source = """import os
import unittest

class T(unittest.TestCase):
    def test_one(self, out):
        files = [f for f in os.listdir(out) if f.endswith(".py")]
        self.assertEqual(len(files), 1, f"expected one file, got {files}")
        return files[0]

    def test_two(self, out):
        files = [f for f in os.listdir(out) if f.endswith(".py")]
        self.assertEqual(len(files), 2)
        return files[0]
"""
    assert lines(lint, source, "TRP601") == {11}


# -- Regressions from lingua, OLMo and nanotron ----------------------------------------------
def test_trp601_next_that_only_asks_whether_an_entry_exists(lint):
    # Checkpoint probes: whether a run directory holds any match, not which one comes first.
    source = """import glob
import os
from pathlib import Path

def resumable(run_dir):
    return next(Path(run_dir).glob("*.pth"), None) is not None

def fresh(run_dir):
    return None is next(glob.iglob(os.path.join(run_dir, "*.pt")), None)

def probe(run_dir):
    if next(Path(run_dir).glob("step_*"), None):
        return "resume"
    return not next(os.scandir(run_dir), None)

def empty(d):
    try:
        next(Path(d).iterdir())
    except StopIteration:
        return True
    return False

def any_config(d):
    return next((n for n in os.listdir(d) if n.endswith(".yaml")), None) is None

def newest(d):
    first = next(Path(d).glob("*.pth"))
    return torch.load(first)

def same_name(d, wanted):
    return next(glob.iglob(d + "/*"), None) is wanted

def maybe(d):
    return next(Path(d).glob("*.pth"), None)

def chained(d):
    return next(Path(d).glob("*.pth"), None) is not None is not False
"""
    assert lines(lint, source, "TRP601") == {27, 31, 34, 37}


def test_trp602_a_set_appended_as_one_element(lint):
    source = """def bags(answers: list[str]):
    out = []
    for a in answers:
        out.append(set(a.split()))
    out.insert(0, {"<none>"})
    return [len(b) for b in out], out

def flat(answers: list[str]):
    out = []
    for a in answers:
        out.extend(set(a.split()))
    return out

def looped(answers: list[str]):
    out = []
    for a in answers:
        for w in set(a.split()):
            out.append(w)
    return out

def copied(answers: list[str]):
    out = []
    for a in answers:
        out.append(list(set(a.split())))
    return out
"""
    assert lines(lint, source, "TRP602") == {11, 17, 24}


def test_trp602_next_of_a_set_asserted_to_hold_one_element(lint):
    source = """import unittest

def only_key(names: set[str], value):
    assert len(names) == 1
    return {next(iter(names)): value}

def only_word(text):
    words = set(text.split())
    if len(words) != 1:
        raise ValueError(text)
    return next(w for w in words)

def two(text):
    words = set(text.split())
    assert len(words) == 2
    return next(iter(words))

class T(unittest.TestCase):
    def test_one(self, text):
        words = set(text.split())
        self.assertEqual(len(words), 1)
        return next(iter(words))
"""
    assert lines(lint, source, "TRP602") == {16}


def test_trp601_zip_with_a_list_derived_from_the_same_listing(lint):
    source = """import os

def upload(root, client):
    srcs = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs]
    for s, t in zip(srcs, [os.path.relpath(s, root) for s in srcs]):
        client.upload_file(s, t)
    for s, base in zip(map(os.path.basename, srcs), srcs):
        client.upload_file(s, base)

def filtered(root):
    names = os.listdir(root)
    return list(zip(names, [n for n in names if n.endswith(".pt")]))

def two_listings(root, other):
    names = os.listdir(root)
    return list(zip(names, [n.upper() for n in os.listdir(other)]))

def nested(root, parts):
    names = os.listdir(root)
    return list(zip(names, [n + p for n in names for p in parts]))

def indexed(root):
    names = os.listdir(root)
    return list(zip(names, [len(n) for n in names]))[0]
"""
    assert lines(lint, source, "TRP601") == {11, 15, 16, 19, 23}


def test_trp601_zip_with_a_variable_derived_from_the_same_listing(lint):
    # Regression (OLMo's checkpoint upload): destination keys computed from the local paths in
    # a list of their own, then zipped back with them.
    source = """import os

def upload(local_dir, prefix, client):
    local_paths = [os.path.join(r, f) for r, _, files in os.walk(local_dir) for f in files]
    keys = [os.path.join(prefix, os.path.relpath(p, local_dir)) for p in local_paths]
    print(len(local_paths), "files")
    for path, key in zip(local_paths, keys):
        client.upload_file(path, key)

def reversed_between(root):
    names = os.listdir(root)
    sizes = [os.path.getsize(n) for n in names]
    names.reverse()
    return list(zip(names, sizes))

def rebound_between(root, other):
    names = os.listdir(root)
    sizes = list(map(os.path.getsize, names))
    names = os.listdir(other)
    return list(zip(names, sizes))

def derived_reordered(root):
    names = os.listdir(root)
    sizes = [os.path.getsize(n) for n in names]
    sizes.reverse()
    return list(zip(names, sizes))
"""
    assert lines(lint, source, "TRP601") == {11, 17, 19, 23}


def test_trp603_a_param_group_appended_to_a_list_of_groups_is_still_followed(lint):
    # Appending stores one element, but a param group's "params" is what the optimizer iterates.
    source = """import torch

def optimizer(model, head):
    params = set(model.parameters()) | set(head.parameters())
    groups = []
    groups.append({"params": params, "lr": 0.1})
    return torch.optim.Adam(groups)
"""
    assert lines(lint, source, "TRP603") == {6}


def test_trp602_list_made_anew_on_each_turn_of_a_set_loop(lint):
    # Each language gets its own file, written from a list started afresh on each turn: the
    # set's order decides only which file is written first. A list that outlives the loop keeps
    # the last turn's contents, and which turn is last is the set's order.
    source = """def write_splits(rows):
    for lang in {"en", "fr", "de"}:
        chunk = []
        for row in rows:
            chunk.append(f"{lang} {row}")
        with open(f"{lang}.txt", "w") as f:
            f.writelines(chunk)

def last_split(rows):
    for lang in {"en", "fr", "de"}:
        chunk = []
        chunk.append(lang)
    with open("last.txt", "w") as f:
        f.writelines(chunk)

def all_splits():
    chunk = []
    for lang in {"en", "fr", "de"}:
        chunk.append(lang)
    with open("all.txt", "w") as f:
        f.writelines(chunk)
"""
    assert lines(lint, source, "TRP602") == {10, 18}


def test_trp602_a_list_of_a_set_that_only_becomes_a_message(lint):
    # Regression (composer's `raise ValueError(f"...{list(unseen)}")`): a list copied from a set
    # of strings only to be shown in an error, a log line or a warning changes the text of the
    # message, not what the program computes. Kept: such a list that is also indexed or returned.
    source = """import logging
import warnings

log = logging.getLogger(__name__)

def check(requested: list[str], known):
    unknown = set(requested) - set(known)
    if unknown:
        raise ValueError(f"unknown names: {list(unknown)}")

def percent(tags: list[str]):
    print("tags: %s (%d)" % (list(set(tags)), len(tags)))

def formatted(tags: list[str]):
    return "tags: {}".format(list(set(tags)))

def logged(tags: list[str]):
    log.warning("dropping %s", list(set(tags)))
    logging.info("dropping %s", [t for t in set(tags)])
    warnings.warn("dropping " + ", ".join(list(set(tags))))

def raised(tags: list[str]):
    raise KeyError(list(set(tags)))

def shown_then_returned(tags: list[str]):
    ordered = list(set(tags))
    print(f"tags: {ordered}")
    return ordered

def logged_then_indexed(tags: list[str]):
    ordered = list(set(tags))
    log.info("tags: %s", ordered)
    return ordered[0]

def not_a_logger(tags: list[str], trainer):
    trainer.log("tags", list(set(tags)))
"""
    assert lines(lint, source, "TRP602") == {26, 31, 36}


def test_trp601_listing_appended_whole_keeps_its_order_inside(lint):
    # A dataset keeps one listing per concept in a list of lists and later picks by position
    # inside one: the listing's file-system order still decides the pick. (A set appended
    # whole is another matter: TRP602 stops there.)
    source = """from pathlib import Path

class Concepts:
    def __init__(self, roots):
        self.images = []
        for root in roots:
            self.images.append(list(Path(root).iterdir()))

    def pick(self, concept, i):
        return self.images[concept][i % len(self.images[concept])]
"""
    assert lines(lint, source, "TRP601") == {7}


def test_trp601_a_worklist_drained_with_pop_is_order_free(lint):
    # Regression (llm-foundry's hub export): a directory listing is a worklist emptied with
    # `.pop()` in `while todo:`; each file is handled once, whatever the order. Popping into a
    # result list, or stopping at the first match, keeps an order and stays reported.
    source = """import os

def clean(folder, seen):
    todo = [os.path.join(folder, n) for n in os.listdir(folder)]
    while len(todo) > 0:
        path = todo.pop()
        seen.add(path)
        if os.path.isdir(path):
            todo.extend(os.path.join(path, n) for n in os.listdir(path))
        else:
            os.remove(path)

def ordered(folder):
    todo = os.listdir(folder)
    out = []
    while todo:
        out.append(todo.pop())
    return out

def first_large(folder):
    todo = os.listdir(folder)
    while todo:
        name = todo.pop()
        if os.path.getsize(name) > 100:
            return name
"""
    assert lines(lint, source, "TRP601") == {14, 21}


def test_trp601_a_zip_archives_entries_are_not_a_directory_listing(lint):
    # Regression (audiocraft's cache): `zipfile.Path(zf).iterdir()` lists an archive's entries
    # in the order they were written, the same on every machine; a folder's iterdir is not.
    source = """import zipfile
from pathlib import Path

def archive_head(archive, n):
    with zipfile.ZipFile(archive) as zf:
        root = zipfile.Path(zf)
        inner = list((root / "shards").iterdir())
        return list(root.iterdir())[:n], inner[0]

def folder_head(folder: Path, n):
    return list(folder.iterdir())[:n]
"""
    assert lines(lint, source, "TRP601") == {11}
