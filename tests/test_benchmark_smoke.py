"""The benchmark harness runs (smoke mode: a few files, one repeat). Not a timed test."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_benchmark_smoke_mode_reports_every_measured_tool():
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "run.py"), "--smoke", str(REPO / "examples" / "demo")],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "libcst.parse_module" in proc.stdout and "torchrepro-lint (cold)" in proc.stdout
    assert proc.stdout.splitlines()[0].startswith("4 files,")
