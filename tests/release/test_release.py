"""The release: the sdist and wheel build, `twine check` accepts them, and the wheel, installed
into a fresh virtual environment, lints the example project as the source tree does.

The build runs without network (`python -m build --no-isolation`: the setuptools of this
environment, from the test extra). Installing the wheel takes its dependencies (libcst, flake8,
...) from the package index, as CI does; torch is not one of them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import torchrepro_lint

REPO = Path(__file__).resolve().parents[2]
VERSION = torchrepro_lint.__version__
# The example project's findings (tests/test_demo_project.py checks them against the README).
DEMO_FINDINGS = [
    ("data.py", 10, "TRP601"),
    ("data.py", 11, "TRP303"),
    ("train.py", 18, "TRP105"),
    ("train.py", 19, "TRP201"),
    ("train.py", 22, "TRP301"),
    ("utils.py", 12, "TRP204"),
    ("utils.py", 14, "TRP202"),
]
EXIT_FINDINGS = 1


def _run(command: list, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(part) for part in command], cwd=cwd, env=env, capture_output=True,
                          text=True, encoding="utf-8", errors="replace")


def _report(completed: subprocess.CompletedProcess) -> str:
    """The command, its exit status and everything it printed: the message of a failed check."""
    return (f"\n$ {' '.join(completed.args)}\nexit status {completed.returncode}\n"
            f"--- stdout ---\n{completed.stdout}\n--- stderr ---\n{completed.stderr}")


def _clean_env() -> dict:
    """The environment for the fresh virtual environment's programs: nothing that would make them
    import the source tree (or this environment's packages) instead of the installed wheel."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> dict[str, Path]:
    """{"sdist": ..., "wheel": ...}, built from the source tree (the wheel from the sdist)."""
    if importlib.util.find_spec("build") is None or importlib.util.find_spec("twine") is None:
        pytest.skip("needs `build` and `twine` (the test extra, on Python >= 3.10)")
    out = tmp_path_factory.mktemp("dist")
    built = _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", out, REPO], REPO)
    assert built.returncode == 0, "python -m build failed" + _report(built)
    sdists, wheels = sorted(out.glob("*.tar.gz")), sorted(out.glob("*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, f"expected one sdist and one wheel in {out}: {sorted(out.iterdir())}"
    return {"sdist": sdists[0], "wheel": wheels[0]}


def test_documented_pre_commit_rev_is_the_version():
    """A pre-commit `rev:` cannot read __version__: the pages that show one must say it."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    revs = {(page.relative_to(REPO).as_posix(), rev) for page in pages if page.is_file()
            for rev in re.findall(r"^\s*rev:\s*(\S+)", page.read_text(encoding="utf-8"), re.M)}
    if not revs:
        pytest.skip("no page shows a pre-commit `rev:`")
    assert {rev for _, rev in revs} == {f"v{VERSION}"}, sorted(revs)


def test_twine_check_accepts_both(dists):
    checked = _run([sys.executable, "-m", "twine", "check", "--strict", dists["sdist"], dists["wheel"]], REPO)
    assert checked.returncode == 0, "twine check refused the distributions" + _report(checked)
    assert checked.stdout.count("PASSED") == 2, _report(checked)


def test_distributions_carry_the_version(dists):
    assert dists["sdist"].name == f"torchrepro_lint-{VERSION}.tar.gz"
    assert dists["wheel"].name == f"torchrepro_lint-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(dists["wheel"]) as wheel:
        metadata = wheel.read(f"torchrepro_lint-{VERSION}.dist-info/METADATA").decode("utf-8")
        entry_points = wheel.read(f"torchrepro_lint-{VERSION}.dist-info/entry_points.txt").decode("utf-8")
    assert f"\nVersion: {VERSION}\n" in metadata
    assert "\nLicense-Expression: MIT\n" in metadata
    assert "torchrepro-lint = torchrepro_lint.cli:run" in entry_points, entry_points
    assert "TRP = torchrepro_lint.integrations.flake8_plugin:TorchReproChecker" in entry_points, entry_points


def test_wheel_holds_the_package_and_its_catalogue_only(dists):
    with zipfile.ZipFile(dists["wheel"]) as wheel:
        names = wheel.namelist()
    dist_info = f"torchrepro_lint-{VERSION}.dist-info/"
    strays = [n for n in names if not n.startswith(("torchrepro_lint/", dist_info))]
    assert not strays, f"files outside the package in the wheel (tests, benchmarks, docs?): {strays}"
    assert "torchrepro_lint/catalog/ops.toml" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".pyo"))]
    # Every module of the source tree's package, and nothing else.
    source = {p.relative_to(REPO).as_posix() for p in (REPO / "torchrepro_lint").rglob("*.py") if "__pycache__" not in p.parts}
    packed = {n for n in names if n.endswith(".py")}
    assert packed == source, f"only in the source tree: {sorted(source - packed)}; only in the wheel: {sorted(packed - source)}"


def test_sdist_holds_what_the_tests_need(dists):
    with tarfile.open(dists["sdist"]) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    needed = ["README.md", "pyproject.toml", "MANIFEST.in", ".pre-commit-hooks.yaml", "torchrepro_lint/__init__.py",
              "torchrepro_lint/catalog/ops.toml", "torchrepro_lint/catalog/NOTES.md", "tests/conftest.py",
              "tests/catalog/cuda/torch-2.11.0+cu130-h200.json", "examples/demo/train.py",
              "examples/demo/pyproject.toml", "benchmarks/run.py", "rules/TRP201.md"]
    assert not [n for n in needed if n not in names], f"missing from the sdist: {[n for n in needed if n not in names]}"
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc") or ".torchrepro_lint_cache" in n]


@pytest.fixture(scope="module")
def installed(dists, tmp_path_factory) -> Path:
    """The bin/ directory of a fresh virtual environment with the wheel installed."""
    root = tmp_path_factory.mktemp("venv")
    venv = root / "venv"
    created = _run([sys.executable, "-m", "venv", venv], root, _clean_env())
    assert created.returncode == 0, "python -m venv failed" + _report(created)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    python = bin_dir / ("python.exe" if os.name == "nt" else "python")
    pip = _run([python, "-m", "pip", "install", dists["wheel"]], root, _clean_env())
    assert pip.returncode == 0, "pip could not install the wheel" + _report(pip)
    where = _run([python, "-c", "import torchrepro_lint; print(torchrepro_lint.__file__)"], root, _clean_env())
    assert where.returncode == 0, _report(where)
    assert Path(where.stdout.strip()).resolve().is_relative_to(venv.resolve()), (
        "the fresh environment imports torchrepro_lint from outside itself" + _report(where))
    return bin_dir


def _cli(bin_dir: Path, *args) -> list:
    return [bin_dir / ("torchrepro-lint.exe" if os.name == "nt" else "torchrepro-lint"), *args]


def _source_tree(*args, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """The same command run from the source tree, for comparison."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return _run([sys.executable, "-m", "torchrepro_lint", *args], cwd, env)


def _demo_copy(into: Path) -> Path:
    shutil.copytree(REPO / "examples" / "demo", into / "examples" / "demo",
                    ignore=shutil.ignore_patterns("__pycache__", ".torchrepro_lint_cache"))
    return into


def test_installed_version(installed):
    shown = _run(_cli(installed, "--version"), installed, _clean_env())
    assert shown.returncode == 0 and shown.stdout.strip() == f"torchrepro-lint {VERSION}", _report(shown)


def test_installed_wheel_lints_the_demo(installed, tmp_path):
    project = _demo_copy(tmp_path / "installed")
    checked = _run(_cli(installed, "check", "examples/demo"), project, _clean_env())
    assert checked.returncode == EXIT_FINDINGS, "expected exit status 1 (the demo has findings)" + _report(checked)
    found = [(m[1], int(m[2]), m[3]) for m in re.finditer(r"^examples/demo/(\w+\.py):(\d+):\d+: (TRP\d{3})\b", checked.stdout, re.M)]
    assert found == DEMO_FINDINGS, _report(checked)
    # Word for word what the source tree prints. (Its environment has torch, the new one does
    # not; the demo's findings do not depend on the torch version the linter assumes.)
    reference = _source_tree("check", "examples/demo", cwd=_demo_copy(tmp_path / "source"))
    assert reference.returncode == EXIT_FINDINGS, _report(reference)
    assert checked.stdout == reference.stdout, "the installed wheel and the source tree disagree" + _report(checked) + _report(reference)


# Prints {code: [exit status, page]} for the codes given, in one process.
PAGES = """
import contextlib, io, json, sys
from torchrepro_lint.cli import main
pages = {}
for code in sys.argv[1:]:
    with contextlib.redirect_stdout(io.StringIO()) as page:
        status = main(["rule", code])
    pages[code] = [status, page.getvalue()]
print(json.dumps(pages))
"""


def test_installed_wheel_prints_rule_pages(installed, tmp_path):
    shown = _run(_cli(installed, "rule", "TRP201"), tmp_path, _clean_env())
    assert shown.returncode == 0, _report(shown)
    assert "TRP201" in shown.stdout, _report(shown)
    assert shown.stdout == _source_tree("rule", "TRP201").stdout, _report(shown)
    # Every rule's page as the source tree prints it (nothing a page needs is left out of the wheel).
    listed = _run(_cli(installed, "rules"), tmp_path, _clean_env())
    assert listed.returncode == 0, _report(listed)
    codes = re.findall(r"^(TRP\d{3})\s", listed.stdout, re.M)
    assert {"TRP201", "TRP401", "TRP402"} <= set(codes), _report(listed)
    python = installed / ("python.exe" if os.name == "nt" else "python")
    pages = _run([python, "-c", PAGES, *codes], tmp_path, _clean_env())
    reference = _run([sys.executable, "-c", PAGES, *codes], REPO, {**os.environ, "PYTHONPATH": str(REPO)})
    assert pages.returncode == 0 and reference.returncode == 0, _report(pages) + _report(reference)
    installed_pages, source_pages = json.loads(pages.stdout), json.loads(reference.stdout)
    for code in codes:
        assert installed_pages[code] == source_pages[code], f"`rule {code}` differs between the wheel and the source tree"
        assert installed_pages[code][0] == 0 and code in installed_pages[code][1], code


def test_installed_wheel_reads_its_catalogue(installed, tmp_path):
    catalog = _run(_cli(installed, "catalog", "--torch-version", "2.13"), tmp_path, _clean_env())
    assert catalog.returncode == 0 and "verified on CPU" in catalog.stdout, _report(catalog)
    assert catalog.stdout == _source_tree("catalog", "--torch-version", "2.13").stdout, _report(catalog)
