"""The language server keeps the calls an entry program makes into the rest of the project,
and the imports walked inside other imports (interpreter/kept_calls.py): an edit of `main()`
replays the calls whose paths and arguments are the same, and walks again those whose input, or
whose code, changed. Every analysis here must find what a new session finds."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

import pytest
from session_checks import analysed_like_fresh

import torchrepro_lint.project.interpreter.inert as inert
import torchrepro_lint.project.interpreter.kept_calls as kept_calls
from torchrepro_lint.server.session import Workspace

HELPERS = """import torch


def build_model(width):
    layer = torch.nn.Linear(width, width)
    if width > 4:
        torch.nn.init.normal_(layer.weight)
    return layer


def restore(model, path):
    model.load_state_dict(torch.load(path))


def make_noise():
    return torch.randn(4)
"""

MAIN = """import torch
import helpers


def main(args):
    torch.manual_seed(args.seed)
    model = helpers.build_model(8)
    helpers.restore(model, args.checkpoint)
    x = 1
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.ones(8)).sum().backward()
    opt.step()
    return model


if __name__ == "__main__":
    main(None)
"""


@pytest.fixture(autouse=True)
def in_the_workspace(tmp_path, monkeypatch):
    """The server runs in its workspace: display paths, and the modules found through them,
    resolve against it."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def recorded(monkeypatch):
    """How many calls each analysis walked and recorded (the others were replayed)."""
    counts: list[int] = [0]
    real = kept_calls._record

    def counting(*args):
        counts[-1] += 1
        return real(*args)

    monkeypatch.setattr(kept_calls, "_record", counting)
    return counts


def _project(tmp_path: Path, files: dict[str, str]):
    (tmp_path / "pyproject.toml").write_text("[tool.torchrepro-lint]\n")
    workspace = Workspace(tmp_path, persistent=False)
    paths = {}
    for name, text in files.items():
        path = paths[name] = (tmp_path / name).resolve()
        path.write_text(text)
        session = workspace.open(path, text)
    return session, paths


_analysed = analysed_like_fresh  # (`recorded` counts the session's own analyses)


def _codes(found) -> list[tuple[str, str]]:
    return sorted((path.name, finding.code) for path, findings in found.items() for finding in findings)


def test_an_edit_below_the_calls_in_main_replays_them_and_an_edit_of_the_callee_walks_it_again(tmp_path, recorded):
    session, paths = _project(tmp_path, {"helpers.py": HELPERS, "train.py": MAIN})
    train, helpers = paths["train.py"], paths["helpers.py"]
    session.analyse()
    assert recorded == [0]  # the first analysis keeps nothing
    steps = [
        (train, MAIN.replace("    x = 1\n", "    x = torch.randn(1)\n")),  # runs main() again: its calls are kept
        (train, MAIN.replace("    x = 1\n", "    x = 2\n    noise = torch.randn(3)\n")),  # below both calls
        (helpers, HELPERS.replace("    return layer\n", "    torch.randn(1)\n    return layer\n")),
        (train, MAIN.replace("    torch.manual_seed(args.seed)\n", "")),  # the calls' paths change
    ]
    for path, text in steps:
        recorded.append(0)
        session.buffers[path] = text
        _analysed(tmp_path, session)
    # walked and kept build_model and restore; replayed both; walked build_model again (its
    # code changed), inside main(), kept whole as train.py did not change, and replayed restore
    # (its code is the same, only shifted down a line: read_values._same_part); walked both
    # again (they are given unseeded paths now)
    assert recorded == [0, 2, 0, 2, 2]


CONFIGS = """import torch


def config(name):
    return {"name": name}


DEFAULTS = [config("small"), config("large")]
"""


def test_main_is_kept_whole_while_an_edit_elsewhere_leaves_its_input_as_it_was(tmp_path, recorded):
    # As in a model file of timm that every script imports: each edit adds a draw to a function
    # its import runs. The first draw changes the paths main() is given; later ones do not (the
    # first draw is the one a path remembers), so main() replays whole, calls and all.
    main = MAIN.replace("import helpers\n", "import helpers\nimport configs\n")
    session, paths = _project(tmp_path, {"helpers.py": HELPERS, "configs.py": CONFIGS, "train.py": main})
    configs = paths["configs.py"]
    before = _codes(session.analyse().findings)
    found = []
    for draws in range(1, 4):
        recorded.append(0)
        drawn = "".join(f"    d{n} = torch.randn({n})\n" for n in range(draws))
        session.buffers[configs] = CONFIGS.replace("    return {", drawn + "    return {")
        found.append(_codes(_analysed(tmp_path, session)))
    recorded.append(0)
    session.buffers[paths["train.py"]] = main.replace("    x = 1\n", "    x = 2\n")  # the entry edited:
    found.append(_codes(_analysed(tmp_path, session)))  # main() runs, its calls replay
    # main() kept (with its two calls, given other paths now); replayed; replayed; not kept
    assert recorded == [0, 3, 0, 0, 0]
    # (the draw at import comes before main()'s seed: a late seed)
    assert ("train.py", "TRP105") not in before
    assert ("train.py", "TRP105") in found[0] and found[0] == found[1] == found[2] == found[3]


def test_a_replayed_call_gives_the_findings_of_a_walked_one_as_its_input_changes(tmp_path):
    # Each step changes what reaches or leaves the kept calls; the session must follow as a
    # fresh one does, and the steps must change the findings (else the test shows nothing).
    session, paths = _project(tmp_path, {"helpers.py": HELPERS, "train.py": MAIN})
    train, helpers = paths["train.py"], paths["helpers.py"]
    unseeded = MAIN.replace("    torch.manual_seed(args.seed)\n", "")
    init_first = unseeded.replace("    model = helpers", "    torch.manual_seed(0)\n    model = helpers")
    late_seed = MAIN.replace(
        "    torch.manual_seed(args.seed)\n    model = helpers.build_model(8)\n",
        "    model = helpers.build_model(8)\n    torch.manual_seed(args.seed)\n",
    )
    no_restore = late_seed.replace("    helpers.restore(model, args.checkpoint)\n", "")
    noisy = MAIN.replace("    x = 1\n", "    x = helpers.make_noise()\n")
    reseeding = MAIN.replace("    x = 1\n", "    torch.manual_seed(2)\n")
    drawing = reseeding.replace("torch.manual_seed(args.seed)", "torch.randn(args.seed)")  # (no ref moves)
    steps = [(train, reseeding), (train, drawing), (train, reseeding),
        (train, MAIN + "# edit\n"), (train, unseeded), (train, unseeded + "# edit\n"), (train, init_first),
        (train, late_seed), (train, late_seed + "# edit\n"), (train, no_restore), (train, no_restore + "# edit\n"),
        (train, noisy), (helpers, HELPERS.replace("torch.randn(4)", "torch.zeros(4)")), (train, noisy + "# edit\n"),
        (train, MAIN),
    ]
    seen = []
    for path, text in [(train, MAIN), *steps]:
        session.buffers[path] = text
        found = _analysed(tmp_path, session)
        seen.append(tuple(_codes(found)))
    assert len(set(seen)) >= 3


def test_a_kept_call_that_imports_a_module_replays_only_where_that_module_is_imported_as_before(tmp_path):
    # load_extra() imports extra.py, whose top level draws: what that does to the program depends
    # on whether train.py imported extra itself before the call.
    extra = "import torch\n\nTABLE = torch.randn(4)\n"
    helpers = "def load_extra():\n    import extra\n    return extra.TABLE\n"
    main = "import torch\nimport helpers\n\n\ndef main():\n    t = helpers.load_extra()\n    return t\n\n\nmain()\n"
    session, paths = _project(tmp_path, {"extra.py": extra, "helpers.py": helpers, "train.py": main})
    train = paths["train.py"]
    importing_first = main.replace("import helpers\n", "import helpers\nimport extra\n")
    seeded_first = main.replace("    t = helpers", "    torch.manual_seed(0)\n    t = helpers")
    seen = []
    for text in (main, main + "# edit\n", importing_first, importing_first + "# edit\n", seeded_first, main):
        session.buffers[train] = text
        found = _analysed(tmp_path, session)
        seen.append(tuple(_codes(found)))
    assert len(set(seen)) >= 2

    # The kept run of load_extra() from the last analysis (extra not imported before it) is
    # replayed only where extra is still not imported.
    session.buffers[train] = main.replace("    return t\n", "    return None\n")  # (its program runs again)
    session.analyse()
    kept_runs = [run for runs in session._recorded[2].values() for run in runs if run.key.callee.path == "load_extra"]
    (kept,) = [run for run in kept_runs if not run.key.states[0].torch_seeded]  # (the seeded one is kept too)
    (extra_module,) = [m for m in kept.looked_up if m.path.name == "extra.py"]
    assert kept.replays_in(SimpleNamespace(steps=0, imported=set()))
    assert not kept.replays_in(SimpleNamespace(steps=0, imported={id(extra_module)}))


def test_a_finding_at_a_kept_call_moves_with_the_lines_typed_above_it(tmp_path, recorded):
    # seed_torch() seeds torch only, and main() draws from `random`: TRP102 is reported at the
    # call in main(), which the kept run holds as its anchor. A line typed above it moves the
    # call; the replayed run must report it where it now is. (The paths it is given carry the
    # benchmark switch of main()'s first line: they must move to the new module too.)
    helpers = "import torch\n\n\ndef seed_torch(seed):\n    torch.manual_seed(seed)\n"
    main = (
        "import random\nimport torch\nimport helpers\n\n\ndef main(args):\n"
        "    torch.backends.cudnn.benchmark = True\n    x = random.random()\n"
        "    helpers.seed_torch(args.seed)\n    return x\n\n\nmain(None)\n"
    )
    session, paths = _project(tmp_path, {"helpers.py": helpers, "train.py": main})
    train = paths["train.py"]
    rows = []
    for typed in range(4):
        text = main.replace("    x = random.random()\n", "    x = random.random()\n" * (typed + 1))
        session.buffers[train] = text.replace("return x", f"return x + {typed}")  # (main runs again)
        recorded.append(0)
        found = _analysed(tmp_path, session)
        rows.append([f.row for f in found[train] if f.code == "TRP102"])
    assert rows == [[9], [10], [11], [12]]
    assert recorded == [0, 0, 1, 0, 0]  # kept at the second analysis, then replayed where it moved


def test_a_kept_call_registers_its_callbacks_even_where_they_were_registered_before_it(tmp_path):
    # setup() registers report(), which draws, as an exit hook. Kept while main() had already
    # registered report() itself, its replay must still register it once main() no longer does.
    helpers = (
        "import atexit\nimport torch\n\n\ndef report():\n    torch.randn(2)\n\n\ndef other():\n    pass\n\n\n"
        "def setup():\n    atexit.register(report)\n"
    )
    main = (
        "import atexit\nimport torch\nimport helpers\n\n\ndef main():\n    atexit.register(helpers.report)\n"
        "    helpers.setup()\n    opt = torch.optim.SGD([], lr=0.1)\n    opt.step()\n    return 0\n\n\nmain()\n"
    )
    session, paths = _project(tmp_path, {"helpers.py": helpers, "train.py": main})
    train = paths["train.py"]
    claiming = main.replace("    return 0\n", "    torch.backends.cudnn.deterministic = True\n    return 0\n")
    not_before = claiming.replace("helpers.report)", "helpers.other)")  # (the same shape: no ref moves)
    seen = []
    for text in (main, claiming, not_before):
        session.buffers[train] = text
        found = _analysed(tmp_path, session)
        seen.append(_codes(found))
    assert ("train.py", "TRP101") in seen[0] and ("train.py", "TRP101") in seen[2]


@pytest.fixture
def walked(monkeypatch):
    """The modules whose top level each kept walk recorded walked (by file name)."""
    names: list[str] = []
    real = kept_calls._record

    def noting(interpreter, key, run, *prefix):
        if key.callee.path == "":
            names.append(key.callee.module.path.name)
        return real(interpreter, key, run, *prefix)

    monkeypatch.setattr(kept_calls, "_record", noting)
    return names


def test_an_edit_of_one_imported_module_walks_again_only_the_imports_that_read_it(tmp_path, walked):
    # train.py's first import walks pkg, whose top level imports a, b and c: an edit of b walks
    # pkg and b again and replays the kept walks of a and c. The walk of pkg, kept for the
    # other programs of the run, must know what the replayed walk of a tested: d.
    files = {
        "pkg/__init__.py": "from . import a, b, c\n",
        "pkg/a.py": "import torch\nfrom . import d\n\ntorch.backends.cudnn.benchmark = True\n",
        "pkg/d.py": "X = 1\n",
        "pkg/b.py": "import torch\n\nNOISE = torch.randn(2)\n",
        "pkg/c.py": "import torch\n\ntorch.use_deterministic_algorithms(True)\n",
        "train.py": "import torch\nimport pkg\n\ntorch.manual_seed(0)\nx = torch.randn(3, device='cuda')\n",
    }
    (tmp_path / "pkg").mkdir()
    session, paths = _project(tmp_path, files)
    b = paths["pkg/b.py"]
    session.analyse()
    seen = []
    drawn = "import torch\n\nNOISE = torch.randn(2)\n"
    more = drawn + "MORE = torch.rand(2)\n"
    for text in (more, more + "LAST = torch.rand(2)\n", "import torch\n"):
        before = len(walked)
        session.buffers[b] = text
        _analysed(tmp_path, session)
        seen.append(sorted(walked[before:]))
    # Nothing was kept before the first edit. The last leaves b with nothing to walk (an inert
    # import), and c, imported after it, is given paths on which nothing drew: walked again.
    assert seen == [["a.py", "b.py", "c.py"], ["b.py"], ["c.py"]]
    (package,) = [m for m in session._modules.values() if m.path.parent.name == "pkg" and m.path.name == "__init__.py"]
    (pkg_walk,) = session._recorded[0][id(package)]
    assert {m.path.name for m in session._modules.values() if id(m) in pkg_walk.looked_up} >= {"a.py", "c.py", "d.py"}


def test_a_very_deep_chain_of_imports_is_kept_only_near_the_top_and_never_crashes(tmp_path, walked):
    # 400 modules, each importing the next and drawing: the run stops at the import bound, as
    # check's does. Keeping each level's walk would add Python frames to every level of a
    # chain that already fills most of the recursion limit.
    files = {f"m{i}.py": f"import torch\nimport m{i + 1}\nX = torch.randn(1)\n" for i in range(400)}
    files["m400.py"] = "import torch\ntorch.manual_seed(0)\n"
    files["train.py"] = "import torch\nimport m0\n\nif __name__ == '__main__':\n    torch.rand(2)\n"
    session, paths = _project(tmp_path, files)
    session.analyse()
    for extra in range(1, 3):
        session.buffers[paths["m5.py"]] = files["m5.py"] + "Y = torch.randn(2)\n" * extra
        _analysed(tmp_path, session)
    assert 0 < len(walked) <= 2 * kept_calls.KEPT_IMPORT_DEPTH


SNIPPETS = [
    "torch.manual_seed(1)", "torch.randn(2)", "torch.use_deterministic_algorithms(True)",
    "torch.backends.cudnn.benchmark = True", "model = helpers.build_model(2)", "helpers.restore(model, 'w.pt')",
    "helpers.make_noise()", "if args.fast:\n        torch.backends.cudnn.benchmark = False", "x = 3",
]


@pytest.mark.parametrize("seed", range(3))
def test_random_edits_of_main_find_what_a_fresh_session_finds(tmp_path, seed):
    rng = random.Random(seed)
    session, paths = _project(tmp_path, {"helpers.py": HELPERS, "train.py": MAIN})
    train = paths["train.py"]
    lines = MAIN.split("\n")
    first, end = "def main(args):", "    opt = torch.optim.SGD(model.parameters(), lr=0.1)"
    body = range(lines.index(first) + 1, lines.index(end))
    session.analyse()
    for _ in range(12):
        at = rng.randrange(body.start, body.start + len(body) + 1)
        if rng.random() < 0.7 or len(body) < 3:
            lines.insert(at, "    " + rng.choice(SNIPPETS))
            body = range(body.start, body.stop + 1)
        elif at < body.stop:
            del lines[at]
            body = range(body.start, body.stop - 1)
        session.buffers[train] = "\n".join(lines)
        _analysed(tmp_path, session)


REGISTRY = """def register(name):
    return name
"""

LIBRARY = """import registry

try:
    import extras
except ImportError:
    extras = None

NAMES = [registry.register("small"), registry.register("large")]
"""


def test_an_import_found_inert_is_taken_again_only_while_what_decided_it_holds(tmp_path, monkeypatch):
    # library.py's import does nothing tracked while registry.register does nothing and its
    # optional import finds no module: the server takes that answer from the analysis before
    # (interpreter/inert.py), unless an edit of the helper it calls or of its own top level, or
    # a module file that appears, makes the import draw (before main()'s seed: a late seed, TRP105).
    main = MAIN.replace("import helpers\n", "import helpers\nimport library\n")
    files = {"helpers.py": HELPERS, "registry.py": REGISTRY, "library.py": LIBRARY, "train.py": main}
    session, paths = _project(tmp_path, files)
    drawing_helper = REGISTRY.replace("    return name\n", "    import torch\n    torch.randn(1)\n    return name\n")
    drawing_top = "import torch\n" + LIBRARY + "torch.randn(1)\n"
    steps = [
        (paths["train.py"], main.replace("    x = 1\n", "    x = 2\n")),  # inert, as before
        (paths["registry.py"], drawing_helper), (paths["registry.py"], REGISTRY), (paths["train.py"], main),
        (paths["library.py"], drawing_top), (paths["library.py"], LIBRARY),
        (tmp_path / "extras.py", "import torch\n\ntorch.randn(1)\n"),  # a new file, which the try imports
    ]
    taken = []
    real = inert._from_before
    monkeypatch.setattr(inert, "_from_before", lambda *args: taken.append(real(*args)) or taken[-1])
    late = []
    for path, text in [(paths["train.py"], main), *steps]:
        if not path.exists():
            path.write_text(text)
        session.buffers[path.resolve()] = text
        late.append(("train.py", "TRP105") in _codes(_analysed(tmp_path, session)))
    assert late == [False, False, True, False, False, True, False, True]
    assert any(found is not None for found in taken)  # (answers were taken from the analysis before)


IMPORT_TIME_SNIPPETS = ["torch.randn(2)", "torch.manual_seed(3)", "y = 2", "torch.backends.cudnn.benchmark = True"]


@pytest.mark.parametrize("seed", range(3))
def test_random_edits_of_main_and_of_what_it_imports_find_what_a_fresh_session_finds(tmp_path, seed):
    # Edits of a function every import runs (configs.config), of an inert import's helper
    # (registry.register) and of main(), in random order: main() kept whole or not, inert
    # answers taken again or not, each analysis as a fresh session's.
    rng = random.Random(seed)
    main = MAIN.replace("import helpers\n", "import helpers\nimport configs\nimport library\n")
    files = {"helpers.py": HELPERS, "configs.py": CONFIGS, "registry.py": REGISTRY, "library.py": LIBRARY, "train.py": main}
    session, paths = _project(tmp_path, files)
    texts = dict(files)
    places = {"configs.py": "    return {", "registry.py": "    return name", "train.py": "    x = 1"}
    session.analyse()
    for _ in range(15):
        name = rng.choice(sorted(places))
        lines = texts[name].split("\n")
        anchor = next(i for i, line in enumerate(lines) if line.startswith(places[name]))
        if rng.random() < 0.75:
            lines.insert(anchor, "    " + rng.choice(SNIPPETS if name == "train.py" else IMPORT_TIME_SNIPPETS))
        elif lines[anchor - 1].startswith("    ") and not lines[anchor - 1].lstrip().startswith(("def ", "return")):
            del lines[anchor - 1]
        texts[name] = "\n".join(lines)
        session.buffers[paths[name]] = texts[name]
        _analysed(tmp_path, session)


EPOCHS = """import torch
import helpers


def main(args):
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    model = helpers.build_model(8)
    x = 1
    for epoch in range(3):
        train_one_epoch(model, epoch)
    return model


def train_one_epoch(model, epoch):
    torch.backends.cudnn.benchmark = True
    helpers.restore(model, "last.pt")
    step(model)
    return model


def step(model):
    model.zero_grad()
    return model


if __name__ == "__main__":
    main(None)
"""


def test_a_call_of_an_unchanged_entry_function_is_kept_while_main_is_edited(tmp_path, recorded):
    # main() calls train_one_epoch(), defined below it in the same script. An edit of main()
    # shifts train_one_epoch() down without changing its code: its call is replayed, and the
    # TRP201 it holds (benchmark switched on under main()'s determinism) moves with it. An edit
    # of train_one_epoch() itself walks it again; an edit of step(), which it calls, records it
    # again (a claim of determinism there: the TRP201 is back).
    session, paths = _project(tmp_path, {"helpers.py": HELPERS, "train.py": EPOCHS})
    train = paths["train.py"]
    session.analyse()
    rows = []
    best = EPOCHS.replace('    helpers.restore(model, "last.pt")\n', '    helpers.restore(model, "best.pt")\n')
    unclaimed = best.replace("    torch.use_deterministic_algorithms(True)\n", "")
    steps = [
        EPOCHS.replace("    x = 1\n", "    x = torch.randn(1)\n"),
        EPOCHS.replace("    x = 1\n", "    x = torch.randn(1)\n    noise = torch.randn(2)\n"),
        EPOCHS.replace("    x = 1\n", "    x = 2\n    noise = torch.randn(2)\n    y = 3\n"),
        best,
        unclaimed,  # (no TRP201 without a claim of determinism)
        unclaimed.replace("    model.zero_grad()\n", "    model.zero_grad()\n    torch.use_deterministic_algorithms(True)\n"),
    ]
    for text in steps:
        recorded.append(0)
        session.buffers[train] = text
        found = _analysed(tmp_path, session)
        rows.append([f.row for f in found.get(train, ()) if f.code == "TRP201"])
    assert rows == [[16], [17], [18], [16], [], [15]]
    # recorded build_model, train_one_epoch, and restore and step inside it; replayed them
    # twice; walked train_one_epoch again when it changed (not kept while it is the one being
    # edited), with restore inside it recorded anew (its argument changed), step and
    # build_model replayed; recorded all four again when the paths they are given changed (no
    # claim of determinism on them); recorded train_one_epoch again when step() changed under
    # it, and walked step() inside it (not kept while it is the one being edited)
    assert recorded == [0, 4, 0, 0, 1, 4, 1]


@pytest.mark.parametrize("seed", range(3))
def test_random_edits_of_main_and_of_the_entry_functions_it_calls_find_what_a_fresh_session_finds(tmp_path, seed):
    # A kept call of train_one_epoch() holds while its code and step()'s are the same, and
    # is walked again when either changes.
    rng = random.Random(seed)
    session, paths = _project(tmp_path, {"helpers.py": HELPERS, "train.py": EPOCHS})
    train = paths["train.py"]
    lines = EPOCHS.split("\n")
    session.analyse()
    for _ in range(15):
        # in main(), in train_one_epoch() (which main() calls), in step() (which it calls)
        at = lines.index(rng.choice(["    x = 1", "    step(model)", "    model.zero_grad()"]))
        if rng.random() < 0.75:
            lines.insert(at, "    " + rng.choice(SNIPPETS))
        elif lines[at - 1].startswith("    ") and not lines[at - 1].startswith("        "):
            if not lines[at - 1].lstrip().startswith(("def ", "for ", "return", "if ")):
                del lines[at - 1]  # (a line typed before, or one of the function's own)
        session.buffers[train] = "\n".join(lines)
        _analysed(tmp_path, session)
