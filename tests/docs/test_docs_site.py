"""The documentation site (mkdocs.yml, docs/) and the README: generated parts current, every
configuration key and command-line argument described, the site built with `mkdocs build --strict`
(a broken link, a missing page or a page left out of the nav fails), the demo output real."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from torchrepro_lint.cli import build_parser, main
from torchrepro_lint.config import KEYS, Config, load_config

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]

# Config fields that are not keys of [tool.torchrepro-lint]: where the file is, and what is read
# from the rest of pyproject.toml. Any other field must be a key, with a description.
NOT_KEYS = {"root", "path", "console_scripts", "library_packages"}


def _generate():
    spec = importlib.util.spec_from_file_location("docs_generate", REPO / "docs" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_pages_are_current():
    stale = [path.relative_to(REPO).as_posix() for path in _generate().stale(REPO)]
    assert stale == [], f"run `python docs/generate.py` to regenerate: {stale}"


def test_every_configuration_key_is_described():
    generate = _generate()
    fields = {f.name for f in dataclasses.fields(Config)}
    names = [key.name for key in KEYS]
    assert len(names) == len(set(names))
    assert {key.attribute for key in KEYS} == fields - NOT_KEYS, "a Config field without a ConfigKey in config.KEYS"
    for key in KEYS:
        assert key.description.strip() and key.example.strip(), f"{key.name}: needs a description and an example"
        assert key.type in generate.TOML_TYPES, f"{key.name}: type {key.type!r} has no name in docs/generate.py"
        assert key.example.split("=", 1)[0].strip() == key.name, f"{key.name}: the example sets another key"
        assert generate.default_text(key)


def test_configuration_examples_are_valid(tmp_path):
    """Each key's example, and all of them together, load as configuration."""
    for i, key in enumerate(KEYS):
        project = tmp_path / str(i)
        project.mkdir()
        (project / "pyproject.toml").write_text(f"[tool.torchrepro-lint]\n{key.example}\n", encoding="utf-8")
        config = load_config([project])
        value = tomllib.loads(key.example)[key.name]
        if key.name != "torch-version":  # (kept as a (major, minor) tuple)
            assert getattr(config, key.attribute) == value, key.name
    (tmp_path / "pyproject.toml").write_text(
        "[tool.torchrepro-lint]\n" + "\n".join(key.example for key in KEYS) + "\n", encoding="utf-8"
    )
    load_config([tmp_path])


def test_every_command_line_argument_is_described():
    generate = _generate()
    parser = build_parser()
    subcommands = list(generate._subcommands(parser))
    assert subcommands
    for name, text, sub in subcommands:
        assert text, f"`{name}` has no help"
        for action in generate._arguments(sub):
            assert action.help, f"`{name}` {action.option_strings or action.dest}: no help"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Material for MkDocs 9.8 (the `docs` extra) needs Python >= 3.11")
def test_site_builds_strictly(tmp_path):
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for page in ("index.html", "rules/index.html", "rules/TRP201/index.html", "reference/configuration/index.html"):
        assert (site / page).is_file(), page
    # Offline: no script, stylesheet or font is loaded from elsewhere.
    for html in site.rglob("*.html"):
        text = html.read_text(encoding="utf-8")
        assert not re.search(r'<(script|link)\b(?![^>]*rel="canonical")[^>]*(src|href)="https?://', text), html


def test_site_addresses_follow_the_project_homepage():
    yaml = pytest.importorskip("yaml")
    homepage = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"]["Homepage"]
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["repo_url"] == homepage
    owner, name = homepage.rstrip("/").split("/")[-2:]
    assert config["site_url"] == f"https://{owner}.github.io/{name}/"
    assert os.readlink(REPO / "docs" / "rules") == "../rules"


def _console_block(text: str) -> str:
    """The first console block's lines after its `$ torchrepro-lint check examples/demo` line."""
    found = re.search(r"```console\n\$ torchrepro-lint check examples/demo\n(.*?)```", text, re.S)
    assert found, "no console block of the demo"
    return found.group(1)


def test_readme_demo_output_is_a_real_run(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    code = main(["check", "--no-cache", "examples/demo"])
    printed = capsys.readouterr().out
    assert code == 1
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert _console_block(readme) == printed
    assert _console_block((REPO / "docs" / "index.md").read_text(encoding="utf-8")) == printed


def test_readme_is_short_and_has_no_history():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    assert "<details>" not in readme


PACKAGE = REPO / "torchrepro_lint"


def _defined(name: str, sources: str) -> bool:
    return re.search(rf"(def|class)\s+{name}\b|^\s*(self\.)?{name}\s*(:[^=\n]*)?=", sources, re.M) is not None


@pytest.mark.parametrize("page", ["how-it-works.md", "contributing.md", "getting-started.md"])
def test_modules_and_names_a_page_gives_exist(page):
    """The modules a page names (`parsing/reparse.py`, `project/extract/`, `hub.py`) are files or
    folders of the package or the repository, and its `module.name` / `Class.name` are defined
    there: a module moved or renamed fails here until the page follows it."""
    text = (REPO / "docs" / page).read_text(encoding="utf-8")
    files = [p.relative_to(REPO).as_posix() for p in REPO.rglob("*.py") if ".venv" not in p.parts]
    folders = {p.relative_to(REPO).as_posix() + "/" for p in REPO.rglob("*") if p.is_dir() and ".venv" not in p.parts}
    missing = []
    for path in set(re.findall(r"(?<![\w./-])((?:\w+/)*\w+\.py|(?:\w+/)+)(?![\w/])", text)):
        if "NNN" in path:  # (a placeholder: trpNNN_short_name.py)
            continue
        if path.endswith(".py"):
            found = any(f == path or f.endswith("/" + path) for f in files)
        else:
            found = any(f == path or f.endswith("/" + path) for f in folders)
        if not found:
            missing.append(path)
    sources = "\n".join((PACKAGE / f).read_text(encoding="utf-8") for f in (p.relative_to(PACKAGE) for p in PACKAGE.rglob("*.py")))
    stems = {p.stem for p in PACKAGE.rglob("*.py")} | set(re.findall(r"^class (\w+)", sources, re.M))
    for owner, name in set(re.findall(r"`(\w+)\.(\w+)`", text)):
        if owner in stems and name != "py" and not _defined(name, sources):
            missing.append(f"{owner}.{name}")
    assert missing == [], f"{page} names what the code no longer has: {sorted(missing)}"
