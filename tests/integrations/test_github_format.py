"""`--output-format github`: workflow-command annotations, escaped as the Actions runner unescapes them."""

from __future__ import annotations

import sys

import pytest

from integration_support import copy_project, run
from torchrepro_lint.findings import Finding, LintResult, Severity
from torchrepro_lint.reporters.github import annotation, escape_data, escape_property, render_github


def unescape(text: str) -> str:
    """The runner's own decoding (actions/runner ActionCommand.cs), to check the round trip."""
    for encoded, decoded in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
        text = text.replace(encoded, decoded)
    return text


def test_escape_data():
    assert escape_data("100% of\r\nruns: a, b") == "100%25 of%0D%0Aruns: a, b"


def test_escape_property():
    assert escape_property("a:b,c%d\ne") == "a%3Ab%2Cc%25d%0Ae"


@pytest.mark.parametrize("text", ["%0A is not a newline", "50%,: done\r\n", "%25"])
def test_escapes_round_trip(text):
    assert unescape(escape_data(text)) == text and "\n" not in escape_data(text)
    assert unescape(escape_property(text)) == text and "," not in escape_property(text) and ":" not in escape_property(text)


def test_single_line_annotation():
    finding = Finding("TRP101", "program never seeds torch", Severity.WARNING, "train.py", 3, 1, 3, 27)
    assert annotation(finding) == (
        "::warning file=train.py,line=3,col=1,endLine=3,endColumn=27,title=TRP101 (missing-seed)::program never seeds torch"
    )


def test_multi_line_range_has_no_columns():
    finding = Finding("TRP000", "bad", Severity.ERROR, "a.py", 2, 5, 4, 1)
    assert annotation(finding) == "::error file=a.py,line=2,endLine=4,title=TRP000 (parse-error)::bad"


def test_levels_and_escaping_in_a_whole_report():
    findings = [
        Finding("TRP301", "50% of\nthe workers", Severity.NOTE, "dir,with:odd/x.py", 1, 2, 1, 3),
        Finding("TRP206", "an error", Severity.ERROR, "b.py", 1, 1, 1, 2),
    ]
    lines = render_github(LintResult(findings=findings), quiet=False).splitlines()
    assert lines == [
        "::notice file=dir%2Cwith%3Aodd/x.py,line=1,col=2,endLine=1,endColumn=3,title=TRP301 (dataloader-worker-seed)::50%25 of%0Athe workers",
        "::error file=b.py,line=1,col=1,endLine=1,endColumn=2,title=TRP206 (no-op-determinism-switch)::an error",
    ]


def test_no_findings_prints_nothing():
    assert render_github(LintResult(files_checked=3)) == ""


def test_cli_github_format(tmp_path):
    root = copy_project(tmp_path / "proj")
    completed = run([sys.executable, "-m", "torchrepro_lint", "check", "--output-format", "github", "."], root)
    assert completed.returncode == 1, completed.stderr
    lines = completed.stdout.splitlines()
    assert lines and all(line.startswith(("::warning ", "::error ", "::notice ")) for line in lines)
    assert any(line.startswith("::warning file=scripts/make_noise.py,line=1,col=1,") and "title=TRP101 (missing-seed)::" in line
               for line in lines)
    assert not any("evaluate.py" in line for line in lines)  # suppressed with noqa
