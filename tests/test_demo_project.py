"""The example project shipped in the repository gives the findings the README shows."""

from pathlib import Path

from torchrepro_lint.config import load_config
from torchrepro_lint.pipeline.engine import lint_paths

DEMO = Path(__file__).resolve().parent.parent / "examples" / "demo"


def test_demo_findings_match_the_readme():
    result = lint_paths([DEMO], load_config([DEMO]))
    found = [(Path(f.path).name, f.row, f.code, str(f.severity)) for f in result.findings]
    assert result.errors == []
    assert found == [
        ("data.py", 10, "TRP601", "warning"),
        ("data.py", 11, "TRP303", "warning"),
        ("train.py", 18, "TRP105", "warning"),
        ("train.py", 19, "TRP201", "warning"),
        ("train.py", 22, "TRP301", "note"),
        ("utils.py", 12, "TRP204", "warning"),
        ("utils.py", 14, "TRP202", "warning"),
    ]
    readme = (DEMO.parent.parent / "README.md").read_text(encoding="utf-8")
    for name, row, code, severity in found:
        assert f"examples/demo/{name}:{row}:" in readme and code in readme
