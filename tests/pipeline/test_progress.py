"""Progress on long runs: on a terminal's stderr only, one line rewritten in place, erased at the
end. A pseudo-terminal stands in for the terminal; the 1 s delay is set to 0, so no test waits."""

from __future__ import annotations

import io
import os
import pty
import sys

import pytest

from conftest import write_project
from torchrepro_lint.pipeline import progress
from torchrepro_lint.cli import main

SCRIPT = "import torch\n\nif __name__ == '__main__':\n    torch.rand(3)\n"
HELPER = "import random\n\ndef pick():\n    return random.random()\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(progress, "DELAY", 0.0)
    monkeypatch.setattr(progress, "INTERVAL", 0.0)  # every step drawn
    write_project(tmp_path, {"train.py": SCRIPT, "helper.py": HELPER})
    return tmp_path


@pytest.fixture
def terminal():
    """A pseudo-terminal: `lint` runs with sys.stderr on it; `read()` returns what was written.
    (sys.stderr is replaced in the test's body: pytest's capture sets its own after fixtures.)"""
    leader, follower = pty.openpty()
    stream = io.TextIOWrapper(os.fdopen(follower, "wb", buffering=0), encoding="utf-8", write_through=True)
    TERMINALS.append(stream)

    def read() -> str:
        # Everything written is already there (the writes returned); read until it runs dry.
        os.set_blocking(leader, False)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode("utf-8")

    yield read
    TERMINALS.remove(stream)
    stream.close()
    os.close(leader)


TERMINALS: list = []  # the test's pseudo-terminal, if it has one


def lint(*args: str) -> int:
    """`check` with stderr on the test's pseudo-terminal, if any."""
    saved = sys.stderr
    sys.stderr = TERMINALS[-1] if TERMINALS else saved
    try:
        return main(["check", "--no-cache", "--jobs", "1", *args])
    finally:
        sys.stderr = saved


def test_a_terminal_sees_one_line_updated_then_erased(project, terminal, capsys):
    assert lint() == 1
    shown = terminal()
    assert shown.startswith(progress.ERASE + "torchrepro-lint: parsed 0/2")
    assert "torchrepro-lint: parsed 2/2, programs 1/1, checked 2/2" in shown
    assert shown.endswith("checked 2/2" + progress.ERASE)  # the last thing written clears the line
    assert "\n" not in shown  # never a second line
    assert "TRP101" in capsys.readouterr().out  # the report itself is untouched, on stdout


def test_the_add_noqa_run_shows_it_too(project, terminal, capsys):
    assert lint("--add-noqa") == 0
    shown = terminal()
    assert "programs 1/1" in shown and shown.endswith(progress.ERASE)


def test_a_fix_run_shows_it_and_erases_it(project, terminal, capsys):
    lint("--fix")
    shown = terminal()
    assert "torchrepro-lint: parsed 2/2" in shown and shown.endswith(progress.ERASE)


@pytest.mark.parametrize(
    "options, environment",
    [(["--quiet"], {}), (["--fix", "--diff"], {}), (["--output-format", "json"], {}), (["--output-format", "sarif"], {}), ([], {"CI": "true"}), ([], {"TERM": "dumb"})],
)
def test_nothing_appears_when_not_wanted(project, terminal, monkeypatch, options, environment):
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    lint(*options)
    assert terminal() == ""


def test_nothing_appears_in_a_pipe(project, capsys):
    assert lint() == 1
    assert capsys.readouterr().err == ""


def test_a_quick_run_shows_nothing(project, terminal, monkeypatch):
    monkeypatch.setattr(progress, "DELAY", 3600.0)  # a run shorter than the delay
    lint()
    assert terminal() == ""


def test_the_line_never_wraps():
    class Narrow(io.StringIO):
        def fileno(self):
            raise OSError  # no terminal size known: 80 columns

    stream = Narrow()
    line = progress.Progress(stream, delay=0, interval=0)
    line.start("parsed" + "x" * 100, 5)
    assert stream.getvalue() == progress.ERASE + line.line()[:79]
    line.finish()
    assert stream.getvalue().endswith(progress.ERASE)


def test_ci_false_is_not_ci():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    assert progress.wanted(Terminal(), {"CI": "false"}, quiet=False, output_format="text")
    assert not progress.wanted(Terminal(), {"CI": "1"}, quiet=False, output_format="text")
