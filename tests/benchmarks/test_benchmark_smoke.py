"""The benchmark harness runs (smoke mode: a few files, one repeat). Not a timed test: it checks
that every row and JSON key is there, never how fast anything was."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NUMBERS = ("wall_median_s", "cpu_median_s", "peak_rss_mib", "runs", "command")


def test_benchmark_smoke_mode_reports_every_measured_tool(tmp_path):
    out = tmp_path / "bench.json"
    command = [sys.executable, str(REPO / "benchmarks" / "run.py"), "--smoke", str(REPO / "examples" / "demo")]
    proc = subprocess.run([*command, "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("4 files, 78 lines"), lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr

    report = json.loads(out.read_text())
    assert {"targets", "files", "lines", "repeat", "versions", "rows", "per_file", "notes"} <= set(report)
    assert report["files"] == 4 and report["repeat"] == 1
    rows = report["rows"]
    expected = {"libcst.parse_module", "torchrepro-lint cold --jobs 1", "torchrepro-lint cold",
                "torchrepro-lint (filling the cache)", "torchrepro-lint warm", "torchrepro-lint after touching 1 file"}
    assert expected <= set(rows), (sorted(rows), report["notes"])
    for name, row in rows.items():
        assert all(key in row for key in NUMBERS), name
        assert row["runs"] and not row["failed"], name
    for name in expected - {"libcst.parse_module"}:  # `check --statistics` counted the same 4 files
        assert rows[name]["files_reported"] == "4 files", name
    touched = rows["torchrepro-lint after touching 1 file"]
    assert {"files", "parsed", "programs", "programs_resolved", "cache_hits"} <= set(touched["statistics"][0])
    assert rows["libcst.parse_module"]["files_reported"] == "4 files (0 failed)"
    # Competitors are measured when their venv has them, else skipped with a note: never faked.
    for tool in ("torchfix", "flake8 --select TOR"):
        assert tool in rows or any(tool.split()[0] in note for note in report["notes"])

    per_file = report["per_file"]
    assert {"flake8 --select E999 FILE (no TRP)", "flake8 --select TRP FILE (no project)",
            "flake8 --select TRP FILE (in a 4-file project)"} <= set(per_file)
    for name, row in per_file.items():
        assert row["files_sampled"] >= 1 and "wall_p90_s" in row and "cpu_p90_s" in row, name
    # The plugin really ran: the demo file it was timed on has findings.
    assert any(run["stdout_lines"] for run in per_file["flake8 --select TRP FILE (in a 4-file project)"]["runs"])
    for name in expected | {"torchfix"} & set(rows):
        assert name in proc.stdout
