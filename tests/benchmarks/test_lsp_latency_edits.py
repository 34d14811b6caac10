"""The edits lsp_latency.py sends: `--kind typing` inserts one line, then types each new number
over the last one in place, so the text stays one line longer than the file's."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from lsp_latency import inserted_change, typed_change  # noqa: E402


def apply(text: str, change: dict) -> str:
    lines = text.split("\n")
    start, end = change["range"]["start"], change["range"]["end"]
    offset = lambda p: sum(len(line) + 1 for line in lines[: p["line"]]) + p["character"]  # noqa: E731
    return text[: offset(start)] + change["text"] + text[offset(end) :]


def test_typing_types_each_number_over_the_last_in_one_line():
    text = "def f():\n    a = 1\n    return a\n"
    for number in range(12):
        text = apply(text, typed_change(1, "    ", number))
    assert text == "def f():\n    edit = torch.randn(11)\n    a = 1\n    return a\n"


def test_other_kinds_insert_a_line_each_time():
    text = "x = 1\n"
    for number, line in ((0, 0), (1, 1)):
        text = apply(text, inserted_change(line, "", "draw", number))
    assert text == "edit_0 = torch.randn(0)\nedit_1 = torch.randn(1)\nx = 1\n"
