"""Kept prefixes (kept_calls.kept_prefix): while `main()` of the entry is edited, its statements
above the edit are replayed from the last analysis, with the paths, returns and bindings they
left, and every analysis finds what a fresh session finds."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from session_checks import analysed_like_fresh

from torchrepro_lint.findings import Severity
from torchrepro_lint.project.interpreter import kept_calls
from torchrepro_lint.server.session import Workspace

# main(): a seed on one path only, an early return, bindings the later statements read, a
# call into a helper module, a try; the edits go below `EDIT HERE`.
HELPERS = """import torch


def build_model(width):
    layer = torch.nn.Linear(width, width)
    return layer


def make_loader(data, workers):
    return torch.utils.data.DataLoader(data, num_workers=workers)
"""

MAIN = """import argparse

import torch

import helpers


def main():
    parser = argparse.ArgumentParser()
    args = parser.parse_args()
    width = 8
    workers = 4
    benchmark = False
    if args.seeded:
        torch.manual_seed(args.seed)
    if args.dry_run:
        return None
    model = helpers.build_model(width)
    try:
        state = torch.load(args.checkpoint)
    except FileNotFoundError:
        state = None
    fast = args.fast
    # EDIT HERE
    loader = helpers.make_loader(range(10), workers)
    noise = torch.randn(3)
    torch.backends.cudnn.benchmark = benchmark
    if fast:
        torch.backends.cudnn.benchmark = True
    return model, loader, noise, state


if __name__ == "__main__":
    main()
"""

EDITS = [
    "extra_{n} = {n}",
    "torch.randn({n})",
    "torch.manual_seed({n})",
    "torch.use_deterministic_algorithms(True)",
    "torch.backends.cudnn.benchmark = True",
    "workers = 0",
    "model = helpers.build_model({n})",
    "if args.flag_{n}:\n        torch.manual_seed(1)",
]


def _session(tmp_path: Path, files: dict | None = None):
    (tmp_path / "pyproject.toml").write_text("[tool.torchrepro-lint]\n")
    workspace = Workspace(tmp_path, persistent=False)
    paths = {}
    for name, text in (files or {"helpers.py": HELPERS, "train.py": MAIN}).items():
        path = paths[name] = (tmp_path / name).resolve()
        path.write_text(text)
        session = workspace.open(path, text)
    return session, paths["train.py"]


_analysed = analysed_like_fresh


def _typed_once(tmp_path: Path, line: str):
    """A session whose main() was analysed, then edited once at `# EDIT HERE` (`line`)."""
    session, train = _session(tmp_path)
    session.analyse()
    text = _typed(MAIN, line)
    session.buffers[train] = text
    _analysed(tmp_path, session)
    return session, train, text


@pytest.fixture
def prefixes(monkeypatch):
    """For each analysis: (prefixes recorded, prefixes replayed), and their lengths."""
    counts: list[list[int]] = [[0, 0]]
    lengths: list[int] = []
    record, kept = kept_calls._record, kept_calls.kept_prefix

    def recording(interpreter, key, run, prefix=False):
        if prefix:
            counts[-1][0] += 1
        return record(interpreter, key, run, prefix)

    def keeping(interpreter, key, run):
        lengths.append(len(key.env[0][1]))
        counts[-1][1] += 1
        return kept(interpreter, key, run)

    monkeypatch.setattr(kept_calls, "_record", recording)
    monkeypatch.setattr("torchrepro_lint.project.interpreter.run.kept_prefix", keeping)
    return counts, lengths


def _typed(text: str, line: str) -> str:
    return text.replace("    # EDIT HERE\n", f"    # EDIT HERE\n    {line}\n")


def test_the_statements_above_an_edit_of_main_are_recorded_once_then_replayed(tmp_path, prefixes):
    counts, lengths = prefixes
    session, train = _session(tmp_path)
    _analysed(tmp_path, session)
    assert counts == [[0, 0]]  # the first analysis keeps nothing
    text = MAIN
    for n in range(3):
        counts.append([0, 0])
        text = _typed(text, f"noise_{n} = torch.randn({n + 1})")
        session.buffers[train] = text
        found = _analysed(tmp_path, session)
    assert counts[1:] == [[1, 1], [0, 1], [0, 1]]  # recorded at the first edit, replayed after
    assert len(set(lengths)) == 1  # the statements of main() above `# EDIT HERE`, each time
    # the seed in the replayed prefix still counts: the loader's finding stays a note
    (loader,) = [f for path, fs in found.items() for f in fs if f.code == "TRP301"]
    assert loader.severity == Severity.NOTE


def test_an_edit_above_the_kept_statements_records_a_shorter_prefix(tmp_path, prefixes):
    counts, lengths = prefixes
    session, train, text = _typed_once(tmp_path, "torch.randn(1)")
    counts.append([0, 0])
    text = text.replace("    workers = 4\n", "    workers = 4\n    torch.randn(2)\n")  # above all but 3
    session.buffers[train] = text
    _analysed(tmp_path, session)
    assert counts[-1] == [0, 0]  # 3 statements: too few to keep (PREFIX_KEPT_FROM)
    counts.append([0, 0])
    session.buffers[train] = _typed(text, "torch.randn(3)")
    _analysed(tmp_path, session)
    assert counts[-1] == [1, 1] and lengths[-1] > lengths[0]  # below the new line: recorded anew


def test_typing_line_after_line_replays_the_prefix_kept_above_the_first_line(tmp_path, prefixes):
    counts, _ = prefixes
    session, train = _session(tmp_path)
    session.analyse()
    text = MAIN
    typed = "    # EDIT HERE\n"
    for n in range(4):  # each line below the one typed before: the first changed statement moves down
        line = f"    noise_{n} = torch.randn({n + 1})\n"
        text = text.replace(typed, typed + line)
        typed = line
        counts.append([0, 0])
        session.buffers[train] = text
        _analysed(tmp_path, session)
    assert counts[1:] == [[1, 1], [0, 1], [0, 1], [0, 1]]
    # far below the kept statements (PREFIX_KEPT_FROM or more after them): recorded anew
    text = text.replace("    return model, loader, noise, state\n", "".join(
        f"    pad_{i} = torch.randn({i})\n" for i in range(kept_calls.PREFIX_KEPT_FROM)
    ) + "    return model, loader, noise, state\n")
    session.buffers[train] = text
    _analysed(tmp_path, session)
    counts.append([0, 0])
    session.buffers[train] = text.replace("    return model, loader,", "    torch.randn(9)\n    return model, loader,")
    _analysed(tmp_path, session)
    assert counts[-1] == [1, 1]


def test_a_prefix_kept_before_an_edit_above_it_is_not_replayed_after(tmp_path, prefixes):
    # An edit near the top of main() (too high to keep a prefix) leaves the prefix kept before
    # it among the recordings; a later edit below must not replay it: its statements are old
    # (they do not claim determinism, which the edit near the top added).
    counts, _ = prefixes
    session, train, text = _typed_once(tmp_path, "torch.randn(1)")
    text = text.replace("    args = parser.parse_args()\n", "    args = parser.parse_args()\n    torch.use_deterministic_algorithms(True)\n")
    session.buffers[train] = text
    assert "TRP201" in {f.code for f in _analysed(tmp_path, session)[train]}
    counts.append([0, 0])
    session.buffers[train] = _typed(text, "torch.randn(5)")
    found = _analysed(tmp_path, session)
    assert counts[-1] == [1, 1]  # recorded anew
    assert "TRP201" in {f.code for f in found[train]}


def test_a_prefix_is_replayed_only_for_the_paths_and_bindings_it_was_kept_for(tmp_path, prefixes):
    # main() given other paths (a module imported at the top claims determinism now, edited in
    # the same change as a line typed in main) runs its statements again: the prefix's
    # recording read nothing of that module, only its key tells.
    counts, _ = prefixes
    main = MAIN.replace("import helpers\n", "import configs\nimport helpers\n")
    configs = "import torch\n\nSETTING = 1\n"
    session, train = _session(tmp_path, {"helpers.py": HELPERS, "configs.py": configs, "train.py": main})
    session.analyse()
    text = _typed(main, "noise_0 = torch.randn(1)")
    session.buffers[train] = text
    _analysed(tmp_path, session)
    counts.append([0, 0])
    session.buffers[train] = _typed(text, "noise_1 = torch.randn(2)")
    session.buffers[(tmp_path / "configs.py").resolve()] = configs + "torch.use_deterministic_algorithms(True)\n"
    found = _analysed(tmp_path, session)
    assert counts[-1] == [1, 1]
    assert "TRP201" in {f.code for f in found[train]}  # `if fast:` benchmark, determinism claimed


def test_a_prefix_kept_for_other_paths_is_not_replayed_once_main_changed_above_its_end(tmp_path, prefixes, monkeypatch):
    # A prefix kept for one input of main() stays among the recordings while main() runs with
    # another; if main() changed above that prefix's end in the meantime, the prefix is stale
    # when the first input comes back, and is not replayed.
    monkeypatch.setattr(kept_calls, "PREFIX_KEPT_FROM", 3)  # (main is short: the edits are close)
    counts, _ = prefixes
    main = MAIN.replace("import helpers\n", "import configs\nimport helpers\n")
    configs = "import torch\n\nSETTING = 1\n"
    claimed = configs + "torch.use_deterministic_algorithms(True)\n"
    session, train = _session(tmp_path, {"helpers.py": HELPERS, "configs.py": configs, "train.py": main})
    configs_path = (tmp_path / "configs.py").resolve()
    session.analyse()
    text = _typed(main, "torch.randn(1)")  # kept for paths without a claim
    session.buffers[train] = text
    _analysed(tmp_path, session)
    session.buffers[configs_path] = claimed  # other paths, and main() changed near its top
    text = text.replace("    workers = 4\n", "    workers = 4\n    torch.manual_seed(3)\n")
    session.buffers[train] = text
    _analysed(tmp_path, session)
    session.buffers[configs_path] = configs  # the first paths again
    counts.append([0, 0])
    session.buffers[train] = _typed(text, "torch.randn(2)")
    _analysed(tmp_path, session)
    assert counts[-1] == [1, 1]  # not the stale prefix: recorded anew


def test_paths_that_returned_in_the_prefix_and_its_bindings_reach_the_rest_of_main(tmp_path, prefixes):
    counts, _ = prefixes
    session, train = _session(tmp_path)
    session.analyse()
    # `workers` (bound in the prefix) makes the loader's workers; `fast` (bound there) gates
    # cudnn.benchmark; the dry-run return ends some paths inside the prefix
    text = _typed(MAIN, "torch.use_deterministic_algorithms(True)")
    for step in range(3):
        session.buffers[train] = analysed = text
        found = _analysed(tmp_path, session)
        text = _typed(text, f"count_{step} = {step}")
    assert counts  # (the fresh-session comparison is the check)
    benchmarks = [f for f in found[train] if f.code == "TRP201"]
    # cudnn.benchmark under `fast`, with determinism claimed above; not where it is set to
    # `benchmark`, which the prefix bound to False
    rows = analysed.split("\n")
    assert [rows[f.row - 1].strip() for f in benchmarks] == ["torch.backends.cudnn.benchmark = True"]


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_edits_inside_main_find_what_a_fresh_session_finds(tmp_path, seed):
    rng = random.Random(seed)
    session, train = _session(tmp_path)
    session.analyse()
    text = MAIN
    for n in range(8):
        lines = text.split("\n")
        first = lines.index("def main():") + 2
        last = lines.index("    return model, loader, noise, state")
        # before a statement of main's own block (not inside its `if`/`try`)
        starts = [i for i in range(first, last + 1) if lines[i].startswith("    ") and lines[i][4] not in " #"]
        starts = [i for i in starts if not lines[i].lstrip().startswith(("except", "else", "elif"))]
        at = rng.choice(starts)
        lines.insert(at, "    " + rng.choice(EDITS).format(n=n))
        text = "\n".join(lines)
        compile(text, "train.py", "exec")  # (valid code only: a broken buffer keeps its last good text)
        session.buffers[train] = text
        _analysed(tmp_path, session)
