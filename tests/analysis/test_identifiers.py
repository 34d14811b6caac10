"""analysis/identifiers.py: the runs of word characters of a text counted from the last text's,
where the two differ in one stretch, are the runs a scan of the whole text counts."""

from __future__ import annotations

import random
import re

import pytest

from torchrepro_lint.analysis import identifiers as identifiers_module
from torchrepro_lint.analysis.identifiers import Identifiers, changed_stretch

PIECES = ["x", "_", "seed", "torch", "é", "9", " ", "\n", ".", "(", ")", "=", "'", "#", "ab_c", "\t", "put_"]


def _scanned(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for run in re.findall(r"\w+", text):
        counts[run] = counts.get(run, 0) + 1
    return counts


def _text(rng: random.Random, length: int) -> str:
    return "".join(rng.choice(PIECES) for _ in range(length))


@pytest.mark.parametrize("seed", range(20))
def test_runs_counted_from_the_last_text_are_those_of_a_scan(seed):
    rng = random.Random(seed)
    text = _text(rng, 400)
    identifiers = Identifiers()
    assert identifiers(text) == _scanned(text)
    from_last = 0
    for _ in range(60):
        at = rng.randrange(len(text) + 1)
        cut = rng.randrange(0, 6)
        text = text[:at] + _text(rng, rng.randrange(0, 6)) + text[at + cut :]  # (an insertion, deletion or both)
        stretch = changed_stretch(next(reversed(identifiers._counts)), text)  # (the only text of its length)
        assert identifiers(text) == _scanned(text), text
        from_last += stretch is not None
    assert from_last > 40  # (most edits were counted from the last text)


def test_the_stretch_is_widened_to_whole_runs():
    # `seed` -> `seeds`: the run changed though its first four characters did not
    assert changed_stretch("a = seed + 1", "a = seeds + 1") == (4, 8, 9)
    assert changed_stretch("x(1)", "x(12)") == (2, 3, 4)
    assert changed_stretch("same", "same") is None


def test_an_unrelated_text_is_scanned_whole():
    identifiers = Identifiers()
    identifiers("import torch\n" * 50)
    assert identifiers("seed = 1\n" * 40) == {"seed": 40, "1": 40}


def test_two_buffers_edited_in_turn_are_each_counted_from_their_own_last_text(monkeypatch):
    scans = []
    monkeypatch.setattr(identifiers_module, "scanned", lambda text: scans.append(text) or _scanned(text))
    identifiers = Identifiers()
    short, long = "lr = 0.1\n" * 20, "import torch\nx = torch.randn(3)\n" * 60
    identifiers(short), identifiers(long)
    for number in range(5):
        short, long = short + f"a{number} = 1\n", long + f"b{number} = 2\n"
        assert identifiers(short) == _scanned(short) and identifiers(long) == _scanned(long)
    assert len(scans) == 2  # (the first text of each)


def test_a_text_asked_on_every_edit_stays_kept(monkeypatch):
    # (an open file the edits do not touch is asked about on every edit of another)
    scans = []
    monkeypatch.setattr(identifiers_module, "scanned", lambda text: scans.append(text) or _scanned(text))
    identifiers = Identifiers()
    other, edited = "import os\n" * 30, "y = 1\n" * 50
    for number in range(3 * Identifiers.kept):
        identifiers(other)
        edited = "".join(f"v{i} = {i}\n" for i in range(number)) + "y = 1\n" * 50 if number % 2 else edited + "z = 2\n"
        identifiers(edited)
    assert scans.count(other) == 1
