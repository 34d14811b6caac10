"""The language server's analysis thread (server/analyst.py), without a client: what it hands
the server for each event, in order. The sink records each call as the thread makes it; a test
waits for the thread to be idle (with a guard against a hang), never for time to pass."""

from __future__ import annotations

import re
import shutil
import threading
from pathlib import Path

import pytest

from torchrepro_lint.server import analyst as analyst_module
from torchrepro_lint.server.analyst import Analyst, Closed, Opened
from torchrepro_lint.server.session import Workspace

REPO = Path(__file__).resolve().parents[2]
GUARD = 120  # seconds: only a hung thread ever reaches it


class Recorder:
    """A Sink (analyst.Sink) that keeps every call; `on_progress` may act from the thread."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.on_progress = None
        self.lock = threading.Lock()

    def publish(self, uri, version, text, findings, diagnostics, *, final, force, notebook=None):
        with self.lock:
            self.calls.append(("publish", uri, version, sorted(f.code for f in findings), final))

    def unanswered(self, uris):
        with self.lock:
            self.calls.append(("unanswered", sorted(uris)))

    def progress(self, key, message, percentage):
        with self.lock:
            self.calls.append(("progress", key, message, percentage))
        if self.on_progress is not None:
            self.on_progress(message)

    def progress_done(self, key):
        with self.lock:
            self.calls.append(("done", key))

    def log(self, message, kind="info"):
        with self.lock:
            self.calls.append(("log", message, kind))

    def of(self, kind: str) -> list[tuple]:
        return [call for call in self.calls if call[0] == kind]


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    project = tmp_path / "demo"
    shutil.copytree(REPO / "examples" / "demo", project)
    return project.resolve()


@pytest.fixture(autouse=True)
def every_count(monkeypatch):
    monkeypatch.setattr(analyst_module, "INTERVAL", 0.0)  # every count of the pipeline reported


def start(project: Path, **options) -> tuple[Analyst, Recorder]:
    sink = Recorder()
    return Analyst(project, False, sink, lambda: "utf-16", **options), sink


def opened(path: Path, version: int = 1, text: str | None = None) -> Opened:
    return Opened(path, path.as_uri(), path.read_text() if text is None else text, version)


def settle(analyst: Analyst) -> None:
    assert analyst.idle.wait(GUARD), "the analysis thread hung"


def fresh_codes(project: Path, path: Path, text: str | None = None) -> list[str]:
    session = Workspace(project, persistent=False).open(path, path.read_text() if text is None else text)
    return sorted(f.code for f in session.analyse(open_only=True).findings.get(path, []))


def test_a_first_analysis_reports_its_counts_then_publishes_the_complete_set(demo: Path):
    analyst, sink = start(demo)
    train = demo / "train.py"
    analyst.post(opened(train))
    settle(analyst)
    kinds = [call[0] for call in sink.calls]
    assert kinds[0] == "progress" and kinds[-1] == "done"
    assert sink.calls[0] == ("progress", demo, "analysing the project", 0)
    messages = [call[2] for call in sink.of("progress")[1:]]
    assert "analysing 4/4 files" in messages
    assert all(re.fullmatch(r"analysing \d/4 files(, programs \d/\d(, checking \d/1 open files)?)?", m) for m in messages), messages
    percentages = [call[3] for call in sink.of("progress")]
    assert percentages == sorted(percentages) and percentages[-1] < 100
    (published,) = sink.of("publish")
    assert published == ("publish", train.as_uri(), 1, fresh_codes(demo, train), True)
    assert published[3] == ["TRP105", "TRP201", "TRP301"]
    assert kinds.index("publish") < kinds.index("done")
    (log,) = sink.of("log")
    assert re.search(r"analysed 4 files of .* 4 parsed, 0 entries read from the cache on disk", log[1])
    assert demo in analyst.warm

    # The next analysis (an edit) is quick: no progress.
    sink.calls.clear()
    analyst.post(opened(train, 2, train.read_text() + "\n# edited\n"))
    settle(analyst)
    assert [call[0] for call in sink.calls] == ["publish"]


def test_edits_during_an_analysis_make_one_more_analysis_of_the_last_text(demo: Path):
    """Two edits typed while the first analysis runs: its results (for version 1) are handed
    over, then one analysis of version 3; version 2 is never analysed, and the progress lasts
    until the last analysis is published."""
    analyst, sink = start(demo)
    utils = demo / "utils.py"
    text = utils.read_text()

    def edit_once(message: str) -> None:
        if message.startswith("analysing 1/"):
            sink.on_progress = None
            analyst.post(opened(utils, 2, text + "\nx = 1\n"))
            analyst.post(opened(utils, 3, text + "\nx = 2\n"))

    sink.on_progress = edit_once
    analyst.post(opened(utils))
    settle(analyst)
    assert [call[2] for call in sink.of("publish")] == [1, 3]
    assert all(call[4] for call in sink.of("publish"))
    kinds = [call[0] for call in sink.calls]
    assert kinds.count("done") == 1 and kinds[-1] == "done"
    assert len({call[1] for call in sink.of("progress")}) == 1  # one progress, one session
    assert len(sink.of("log")) == 2  # each analysis said what it read


def test_without_the_early_process_first_findings_come_before_the_analysis(demo: Path):
    analyst, sink = start(demo, first_findings_here=True)
    data = demo / "data.py"
    analyst.post(opened(data))
    settle(analyst)
    assert sink.of("publish") == [
        ("publish", data.as_uri(), 1, ["TRP601"], False),
        ("publish", data.as_uri(), 1, ["TRP303", "TRP601"], True),
    ]
    kinds = [call[0] for call in sink.calls]
    assert kinds.index("progress") < kinds.index("publish")  # first findings only under progress


def test_a_broken_configuration_is_said_once_and_leaves_requests_unanswered(demo: Path):
    (demo / "pyproject.toml").write_text("[tool.torchrepro-lint\n")
    analyst, sink = start(demo)
    train = demo / "train.py"
    analyst.post(opened(train))
    settle(analyst)
    assert sink.of("publish") == []
    assert sink.of("unanswered") == [("unanswered", [train.as_uri()])]
    (error,) = sink.of("log")
    assert "invalid TOML" in error[1] and error[2] == "error"
    assert sink.calls[-1] == ("done", demo)
    analyst.post(opened(train, 2, train.read_text() + "\n"))
    settle(analyst)
    assert len(sink.of("log")) == 1  # said once


def test_closing_the_last_document_forgets_the_project(demo: Path):
    analyst, sink = start(demo)
    train = demo / "train.py"
    analyst.post(opened(train))
    settle(analyst)
    assert demo in analyst.warm
    analyst.post(Closed(train))
    settle(analyst)
    assert analyst.model.sessions == {} and demo not in analyst.warm
    assert sink.calls[-1] == ("done", demo)  # (of the first analysis: nothing since)
