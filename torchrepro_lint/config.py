"""`[tool.torchrepro-lint]` in the nearest pyproject.toml: read, validated, merged with the CLI."""

from __future__ import annotations

import re

import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on older Pythons only
    import tomli as tomllib

NEWEST_TORCH = (2, 13)

# Which findings make the exit status 1 (README, "Exit status"): errors and warnings are
# hazards; a note is hygiene (reproducible today, fragile), reported but not failing the build.
FAIL_LEVELS = ("error", "warning", "note")  # most severe first
DEFAULT_FAIL_ON = "warning"  # the newest release the rules and the op catalogue know

DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "__pycache__", "build", "dist",
    "node_modules", "site-packages", ".eggs", "*.egg-info", ".ipynb_checkpoints", "_build",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".torchrepro_lint_cache",
)


class ConfigError(Exception):
    """A broken configuration: the message names the file and the key."""


@dataclass
class Config:
    root: Path  # the project root: the pyproject's directory, else the common parent of the paths
    path: Path | None = None  # the pyproject.toml read, if any
    select: list[str] | None = None  # None: every rule that is on by default
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    exclude: list[str] = field(default_factory=lambda: list(DEFAULT_EXCLUDE))
    extend_exclude: list[str] = field(default_factory=list)
    seed_functions: list[str] = field(default_factory=list)
    deterministic_functions: list[str] = field(default_factory=list)
    torch_version: tuple[int, int] = NEWEST_TORCH
    seed: int = 0
    console_scripts: dict[str, str] = field(default_factory=dict)
    # Top-level packages the project distributes (pyproject's [project] name, setuptools' or
    # Poetry's package lists): their modules are library code (TRP101's "library modules").
    library_packages: list[str] = field(default_factory=list)
    fail_on: str = DEFAULT_FAIL_ON  # one of FAIL_LEVELS: findings this severe or more fail the run

    def fails(self, severity) -> bool:
        """Whether a finding of `severity` makes the exit status 1."""
        return FAIL_LEVELS.index(str(severity)) <= FAIL_LEVELS.index(self.fail_on)


@dataclass(frozen=True)
class ConfigKey:
    """One key of `[tool.torchrepro-lint]`: what validation checks (`type`, `choices`) and what the
    configuration reference says (docs/generate.py writes docs/reference/configuration.md from
    KEYS; a test fails when a key lacks a description or an example)."""

    name: str  # the key in pyproject.toml
    attribute: str  # the Config field it sets
    type: str  # "list of str", "str", "int" or "table of str -> list of str" (see _has_type)
    description: str  # Markdown, for the reference
    example: str  # TOML lines under [tool.torchrepro-lint]
    default: str = ""  # the default in words, where the Config field's own default does not say it
    choices: tuple[str, ...] = ()  # the values allowed, where the type allows more


KEYS = (
    ConfigKey(
        "select", "select", "list of str",
        "The rules to run, as codes or code prefixes (`TRP2` is every rule whose code starts with "
        "it; `ALL` is every rule). Replaces the default set; a more specific `ignore` still wins.",
        'select = ["TRP1", "TRP201"]',
        default="every rule that is on by default",
    ),
    ConfigKey(
        "extend-select", "extend_select", "list of str",
        "Codes or prefixes to run in addition to `select` (or to the default set).",
        'extend-select = ["TRP4"]',
    ),
    ConfigKey(
        "ignore", "ignore", "list of str",
        "Codes or prefixes not to run. Where `select` and `ignore` both match a code, the more "
        "specific prefix decides; `ignore` wins a tie.",
        'ignore = ["TRP205"]',
    ),
    ConfigKey(
        "per-file-ignores", "per_file_ignores", "table of str -> list of str",
        "Codes or prefixes not reported in the files a glob pattern matches (matched against the "
        "path relative to the project root, or the file name). `ALL` ignores every code.",
        'per-file-ignores = { "tests/*" = ["TRP1"], "scripts/legacy_*.py" = ["ALL"] }',
    ),
    ConfigKey(
        "exclude", "exclude", "list of str",
        "Glob patterns of files and directories not to lint, matched against the relative path or "
        "any part of it. Replaces the defaults; use `extend-exclude` to add to them. Files named on "
        "the command line are linted anyway, unless `--force-exclude` is given.",
        'exclude = [".git", ".venv", "build"]',
    ),
    ConfigKey(
        "extend-exclude", "extend_exclude", "list of str",
        "Patterns excluded in addition to `exclude`.",
        'extend-exclude = ["third_party", "examples"]',
    ),
    ConfigKey(
        "seed-functions", "seed_functions", "list of str",
        "Dotted names of functions that seed Python's `random`, NumPy and torch. Functions defined "
        "in the project are followed without this; it is for helpers the linter cannot read, such "
        "as those of an installed package. Well-known framework helpers are built in.",
        'seed-functions = ["mylab.utils.fix_seeds"]',
    ),
    ConfigKey(
        "deterministic-functions", "deterministic_functions", "list of str",
        "Dotted names of functions that turn on deterministic mode "
        "(`torch.use_deterministic_algorithms(True)` and the cuDNN switches), for helpers the "
        "linter cannot read.",
        'deterministic-functions = ["mylab.utils.strict_mode"]',
    ),
    ConfigKey(
        "torch-version", "torch_version", "str",
        "The torch release the code runs on, as `MAJOR.MINOR`: which catalogue entries apply "
        "(TRP401, TRP402) and whether `CUBLAS_WORKSPACE_CONFIG` is still needed (TRP203).",
        'torch-version = "2.9"',
        default="the installed torch's release, read from package metadata (torch is never imported); 2.13 without torch",
    ),
    ConfigKey(
        "seed", "seed", "int",
        "The seed that fixes insert (`torch.manual_seed(0)`, a DataLoader's generator).",
        "seed = 1234",
    ),
    ConfigKey(
        "fail-on", "fail_on", "str",
        "The least severe findings that make the exit status 1: `error`, `warning` or `note`. "
        "Every finding is reported whatever the level; the command line's `--fail-on` overrides it. "
        "It applies to every output format and to the pre-commit hooks.",
        'fail-on = "note"',
        choices=FAIL_LEVELS,
    ),
)
_KEYS = {key.name: key for key in KEYS}


def parse_version(text: str) -> tuple[int, int] | None:
    """"2.13.0+cpu" -> (2, 13)."""
    parts = text.strip().split(".")
    try:
        return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or "x")
    except (IndexError, ValueError):
        return None


def installed_torch_version() -> tuple[int, int]:
    """The installed torch's release, from package metadata: torch itself is never imported."""
    try:
        return parse_version(metadata.version("torch")) or NEWEST_TORCH
    except metadata.PackageNotFoundError:
        return NEWEST_TORCH


def find_pyproject(start: Path) -> Path | None:
    start = start.resolve()
    for directory in (start, *start.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_config(paths: list[Path], explicit: Path | None = None) -> Config:
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(f"{explicit}: configuration file not found")
        pyproject = explicit
    else:
        starts = [p if p.is_dir() else p.parent for p in paths if p.exists()] or [Path.cwd()]
        pyproject = find_pyproject(_common_parent(starts))
    if pyproject is None:
        starts = [p.resolve() if p.is_dir() else p.resolve().parent for p in paths if p.exists()]
        return Config(root=_common_parent(starts) if starts else Path.cwd().resolve(), torch_version=installed_torch_version())
    return _read(pyproject)


def _common_parent(paths: list[Path]) -> Path:
    resolved = [p.resolve() for p in paths]
    common = resolved[0]
    for path in resolved[1:]:
        while not path.is_relative_to(common):
            common = common.parent
    return common


def distributed_packages(data: dict) -> list[str]:
    """The top-level package names a pyproject says the project ships: its distribution name
    (`vit-pytorch` -> `vit_pytorch`), `[tool.setuptools] packages`, the `include` patterns of
    `[tool.setuptools.packages.find]`, and `[tool.poetry] packages`. Names only: whether such a
    package exists is the file tree's business. Malformed entries are skipped (they are the
    packaging tool's to report)."""
    names: list[str] = []
    project = data.get("project", {})
    if isinstance(project, dict) and isinstance(project.get("name"), str):
        names.append(re.sub(r"[-.]+", "_", project["name"]).lower())
    tool = data.get("tool", {}) if isinstance(data.get("tool"), dict) else {}
    setuptools = tool.get("setuptools", {}) if isinstance(tool.get("setuptools"), dict) else {}
    packages = setuptools.get("packages")
    if isinstance(packages, list):
        names.extend(p for p in packages if isinstance(p, str))
    elif isinstance(packages, dict) and isinstance(packages.get("find"), dict):
        include = packages["find"].get("include")
        names.extend(p for p in include if isinstance(p, str)) if isinstance(include, list) else None
    poetry = tool.get("poetry", {}) if isinstance(tool.get("poetry"), dict) else {}
    for entry in poetry.get("packages", []) if isinstance(poetry.get("packages"), list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("include"), str):
            names.append(entry["include"])
    top = (re.split(r"[./*]", name, maxsplit=1)[0] for name in names)
    return sorted({name for name in top if name.isidentifier()})


def _read(pyproject: Path) -> Config:
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{pyproject}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{pyproject}: invalid TOML: {exc}") from None
    config = Config(root=pyproject.parent.resolve(), path=pyproject, torch_version=installed_torch_version())
    scripts = data.get("project", {}).get("scripts", {})
    if isinstance(scripts, dict):
        config.console_scripts = {k: v for k, v in scripts.items() if isinstance(v, str)}
    config.library_packages = distributed_packages(data)
    table = data.get("tool", {}).get("torchrepro-lint", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{pyproject}: [tool.torchrepro-lint] must be a table")
    for key, value in table.items():
        if key not in _KEYS:
            known = ", ".join(sorted(_KEYS))
            raise ConfigError(f"{pyproject}: unknown key 'tool.torchrepro-lint.{key}' (known keys: {known})")
        spec = _KEYS[key]
        if not _has_type(value, spec.type):
            raise ConfigError(f"{pyproject}: 'tool.torchrepro-lint.{key}' must be a {spec.type}, got {value!r}")
        if key == "torch-version":
            version = parse_version(value)
            if version is None:
                raise ConfigError(f"{pyproject}: 'tool.torchrepro-lint.torch-version' must look like \"2.13\", got {value!r}")
            value = version
        if spec.choices and value not in spec.choices:
            raise ConfigError(f"{pyproject}: 'tool.torchrepro-lint.{key}' must be one of {', '.join(spec.choices)}, got {value!r}")
        if key == "exclude":
            value = list(value)
        setattr(config, spec.attribute, value)
    return config


def _has_type(value: object, expected: str) -> bool:
    if expected == "list of str":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if expected == "str":
        return isinstance(value, str)
    if expected == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected.startswith("table"):
        return isinstance(value, dict) and all(
            isinstance(v, list) and all(isinstance(c, str) for c in v) for v in value.values()
        )
    return False
