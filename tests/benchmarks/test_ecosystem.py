"""benchmarks/ecosystem.py's comparison: normalising the JSON reporter's findings, diffing two runs
as multisets, and a report whose order does not depend on the order findings arrived in."""

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("ecosystem", REPO / "benchmarks" / "ecosystem.py")
ecosystem = importlib.util.module_from_spec(_spec)
sys.modules["ecosystem"] = ecosystem  # dataclasses look their module up there
_spec.loader.exec_module(ecosystem)


def finding(code, filename, row, message):
    return {"code": code, "filename": filename, "location": {"row": row, "column": 1}, "message": message}


def test_normalise_makes_paths_relative_to_the_checkout_in_filenames_and_messages():
    root = Path("/tmp/real/proj")
    keys = ecosystem.normalise([
        finding("TRP205", "/tmp/real/proj/train.py", 3, "runs on CUDA (`m.cuda()` at /tmp/real/proj/models/net.py:9)"),
        finding("TRP101", "./data.py", 7, "unseeded"),
    ], root)
    assert keys == [("TRP205", "train.py", 3, "runs on CUDA (`m.cuda()` at models/net.py:9)"),
                    ("TRP101", "data.py", 7, "unseeded")]


def test_diff_counts_a_repeated_finding_once_per_extra_copy_and_ignores_common_ones():
    same = ("TRP101", "a.py", 1, "m")
    twice = ("TRP303", "b.py", 5, "worker")
    gone = ("TRP602", "c.py", 2, "set order")
    new = ("TRP401", "a.py", 9, "reflect pad")
    added, removed = ecosystem.diff_findings([same, twice, gone], [new, twice, same, twice])
    assert added == [new, twice]  # sorted by path then row: a.py:9 before b.py:5
    assert removed == [gone]


def test_a_moved_or_reworded_finding_is_one_removed_and_one_added():
    added, removed = ecosystem.diff_findings([("TRP105", "t.py", 4, "seed late")], [("TRP105", "t.py", 4, "seed is late")])
    assert added == [("TRP105", "t.py", 4, "seed is late")]
    assert removed == [("TRP105", "t.py", 4, "seed late")]


def test_report_is_the_same_whatever_order_the_runs_listed_findings_in():
    base = [("TRP101", "z.py", 1, "x"), ("TRP201", "a.py", 2, "y"), ("TRP201", "a.py", 1, "w")]
    head = [("TRP303", "m.py", 8, "v"), ("TRP301", "m.py", 8, "u")]

    def report(b, h):
        diff = ecosystem.RepoDiff("proj", *ecosystem.diff_findings(b, h), base_count=len(b), head_count=len(h))
        broken = ecosystem.RepoDiff("broken", error="base exited 2: boom")
        return ecosystem.render([diff, broken], "ff75df1", "working tree")

    text = report(base, head)
    assert text == report(list(reversed(base)), list(reversed(head)))
    lines = text.splitlines()
    assert lines[2] == "proj: +2 -3 (base 3 findings, head 2)"
    assert lines[3:8] == [
        "  + TRP301 m.py:8 u",
        "  + TRP303 m.py:8 v",
        "  - TRP201 a.py:1 w",
        "  - TRP201 a.py:2 y",
        "  - TRP101 z.py:1 x",
    ]
    assert "broken: ERROR base exited 2: boom" in lines
    assert "total: +2 -3 in 1 of 1 repositories (base 3 findings, head 2)" in lines
    assert lines[-1] == "errors: broken"


def test_report_says_whether_the_outputs_were_byte_identical():
    same = ecosystem.RepoDiff("same", base_count=2, head_count=2, identical=True)
    moved = ecosystem.RepoDiff("moved", base_count=2, head_count=2, identical=False)  # e.g. a column changed
    lines = ecosystem.render([same, moved], "main", "working tree").splitlines()
    assert "same: +0 -0 (base 2 findings, head 2, output byte-identical)" in lines
    assert "moved: +0 -0 (base 2 findings, head 2, output differs)" in lines
    assert "byte-identical output: 1 of 2 repositories" in lines
