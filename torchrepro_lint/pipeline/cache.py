"""The persistent cache: `.torchrepro_lint_cache/` at the project root unless told otherwise.

Each entry is keyed by a hash of everything its value was computed from:

- "ir": one file's lowered IR, by its text, module identity, helper settings and tool version;
- "module": the per-file rules' findings in one file and what they read of the rest of the
  project (other modules' IR or text, the facts of the programs reaching it); reused while
  every one of those reads is unchanged;
- "program": one program's facts and what its run read of the modules (their top levels and
  the functions it ran: reads.IR_TOP, IR_FUNCTION);
- "programs": the program rules' findings, by the facts of every program;
- "run": a whole result by every file's text, so an unchanged tree is replayed without parsing
  (or importing LibCST).

Entries are pickles written to a temporary file and renamed into place, so concurrent runs
never see half an entry. Anything that fails to load is a miss, with one warning; a directory
that is not ours is neither read nor written.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import os
import pickle
import sys
import tempfile
from pathlib import Path

from torchrepro_lint import __version__

# The layout of the entries: what the IR classes hold, and how entries, facts and digests are
# pickled and computed. Entries live under v<FORMAT>/; raise it with any change to that layout, so
# that no run reads entries of another (an installed package keys its entries on its version
# only; a checkout on its sources too, sources_fingerprint).
FORMAT = 21  # raise with any change to what is cached (21: large constant tables read as blanks)
MARKER = "torchrepro-lint-cache"
DEFAULT_DIRECTORY = ".torchrepro_lint_cache"


def digest(*parts: object) -> str:
    """sha256 of the parts: bytes as they are, a text as its UTF-8 behind its length (repr of a
    model file's text took 8 times as long as hashing it, twice an edit in the language
    server), anything else as its repr."""
    hasher = hashlib.sha256()
    for part in parts:
        if type(part) is str:
            data = part.encode("utf-8", "surrogatepass")
            hasher.update(b"%d:" % len(data))
            hasher.update(data)
        else:
            hasher.update(part if isinstance(part, bytes) else repr(part).encode("utf-8", "surrogatepass"))
        hasher.update(b"\0")
    return hasher.hexdigest()


def structural_digest(value: object) -> str:
    """A digest of `value`'s pickle without the memo, so it depends on the values alone and not on
    which equal strings happen to be one object. For values without sets (their order changes
    with PYTHONHASHSEED): about 4x faster than digesting `canonical(value)`."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.fast = True  # no memo: shared and merely equal objects pickle alike
    pickler.dump(value)
    return hashlib.sha256(buffer.getbuffer()).hexdigest()


def canonical(value: object) -> object:
    """A form of `value` whose repr is the same in every process: sets sorted, modules by path.

    (Set iteration order depends on PYTHONHASHSEED, so a plain repr would change every run.)"""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if type(value).__name__ == "ProjectModule":
            return ("module", str(value.path))
        return (type(value).__name__, tuple(canonical(getattr(value, f.name)) for f in dataclasses.fields(value)))
    if isinstance(value, dict):
        return ("dict", tuple(sorted(((canonical(k), canonical(v)) for k, v in value.items()), key=repr)))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted((canonical(v) for v in value), key=repr)))
    if isinstance(value, (list, tuple)):
        return tuple(canonical(v) for v in value)
    if isinstance(value, Path):
        return str(value)
    return value


def config_fingerprint(config) -> str:
    """Everything in the configuration that can change a finding; with the tool version (in
    Cache's namespace) it also decides which rules are on. `fail_on` changes only the exit
    status: a run with another fail level replays the same findings."""
    return digest(canonical(dataclasses.replace(config, fail_on="")))


@functools.lru_cache(maxsize=None)
def sources_fingerprint(package: Path | None = None) -> str:
    """The linter's own source files (path, size, mtime) when it runs from a checkout (an
    editable install): a contributor who edits a rule gets fresh results instead of the cache's,
    which keys on the version alone. "" for an installed package (`site-packages`), whose code is
    its version's: no file is looked at there."""
    package = package or Path(__file__).resolve().parents[1]
    if "site-packages" in package.parts or "dist-packages" in package.parts:
        return ""
    stats = []
    for path in sorted([*package.rglob("*.py"), *package.rglob("*.toml")]):
        try:
            info = path.stat()
        except OSError:
            continue
        stats.append((path.relative_to(package).as_posix(), info.st_size, info.st_mtime_ns))
    return digest(stats)


class Cache:
    """One cache directory, for one tool version and one effective configuration."""

    def __init__(self, directory: Path, configuration: str, warn) -> None:
        self.directory = directory
        self.namespace = directory / f"v{FORMAT}" / digest(__version__, sys.version_info[:2], configuration, sources_fingerprint())[:20]
        self._warn = warn
        self._warned = False
        self.usable = self._claim()

    def _claim(self) -> bool:
        marker = self.directory / "CACHEDIR.TAG"
        if self.directory.exists():
            try:
                ours = MARKER in marker.read_text(encoding="utf-8")
            except OSError:
                ours = False
            if not ours:
                self.warning(f"{self.directory} exists but is not a torchrepro-lint cache; not using it")
                return False
            return True
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            _write_atomically(
                marker,
                b"Signature: 8a477f597d28d172789f06886806bc55\n# " + MARKER.encode() + b": safe to delete\n",
            )
            _write_atomically(self.directory / ".gitignore", b"*\n")
        except OSError as exc:
            self.warning(f"cannot create cache directory {self.directory}: {exc.strerror or exc}")
            return False
        return True

    def warning(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            self._warn(message)

    def _path(self, kind: str, key: str) -> Path:
        return self.namespace / kind / key[:2] / key

    def get(self, kind: str, key: str, load=pickle.loads):
        if not self.usable:
            return None
        try:
            data = self._path(kind, key).read_bytes()
        except OSError:
            return None
        try:
            return load(data)
        except Exception as exc:  # truncated, foreign or stale: recompute
            self.warning(f"ignoring unreadable cache entry {self._path(kind, key)} ({type(exc).__name__})")
            return None

    def put(self, kind: str, key: str, value, dump=pickle.dumps) -> None:
        if not self.usable:
            return
        try:
            data = dump(value)
        except Exception:
            return  # something unpicklable: simply not cached
        try:
            path = self._path(kind, key)
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_atomically(path, data)
        except OSError as exc:
            self.warning(f"cannot write to cache {self.directory}: {exc.strerror or exc}")
            self.usable = False


def _write_atomically(path: Path, data: bytes) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


# -- whole runs --------------------------------------------------------------------------------------
def missing_files_witnesses(paths) -> dict[str, str]:
    """What tells a replay that no file among `paths` (import candidates that were missing) has
    appeared: the modification time of the deepest directory above each that exists, which
    changes when an entry is created in it. A few directories stand for thousands of files
    (4,754 candidates in one run on pytorch-image-models: 13 directories), so a replay checks
    them at the cost of a few stats."""
    existing: dict[str, str] = {}  # a directory -> the deepest existing one at or above it

    def deepest(directory: str) -> str:
        chain = []
        while directory not in existing:
            parent = os.path.dirname(directory)
            if parent == directory or os.path.isdir(directory):
                existing[directory] = directory
                break
            chain.append(directory)
            directory = parent
        for step in chain:
            existing[step] = existing[directory]
        return existing[directory]

    # by string, once per directory: torch's source has about 43,000 missing candidates
    directories = sorted({os.path.dirname(str(path)) for path in paths})
    found = sorted({deepest(directory) for directory in directories})
    return {_DIRECTORY + directory: _modified(directory) for directory in found}


_DIRECTORY = "directory:"  # a witness key, beside the paths of files whose bytes are digested


def _modified(directory: Path | str) -> str:
    try:
        return str(os.stat(directory).st_mtime_ns)
    except OSError:
        return "gone"  # never a modification time: no replay


def run_key(configuration: str, files: list[Path], errors: list[str]) -> str:
    """Key of a whole run: the configuration and the bytes of every file it lints."""
    contents = []
    for path in files:
        try:
            contents.append((path.as_posix(), digest(path.read_bytes())))
        except OSError as exc:
            contents.append((path.as_posix(), str(exc)))
    return digest(configuration, contents, errors)


def replay(cache: Cache, key: str):
    """(findings, errors) of this exact run, if the modules it imported without linting are
    unchanged too, and the files its imports looked for in vain still missing; None otherwise."""
    entry = cache.get("run", key)
    if entry is None:
        return None
    outside, findings, errors = entry
    for path, content in outside.items():
        if path.startswith(_DIRECTORY):
            if _modified(path[len(_DIRECTORY):]) != content:
                return None
            continue
        try:
            if digest(Path(path).read_bytes()) != content:
                return None
        except OSError:
            return None
    return findings, errors


# -- pickling values that point into the project --------------------------------------------------
def dumps_with_modules(value) -> bytes:
    """Pickle `value`, writing each ProjectModule as its path (the project is rebuilt each run).
    (Through the pickler's dispatch table, which asks only about ProjectModule objects: a
    `persistent_id` hook is called from C for every object, a third of the pickling time of
    the language server's re-run programs.) A path is written as its text: pathlib's own
    `__reduce__` is Python code that gives each part as a string, and a program's facts hold
    the paths of every module it imported (219 in a timm script: half the pickling time), and
    those of the functions it called. Facts write those two sets as texts (`_set_text`).)"""
    from torchrepro_lint.project.modules import ProjectModule
    from torchrepro_lint.project.interpreter.states import Facts

    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = {ProjectModule: _by_path, _PATH_CLASS: _path_by_text, Facts: _facts_by_fields}
    pickler.dump(value)
    return buffer.getvalue()


def _by_path(module) -> tuple:
    return _module_at, (str(module.path),)


_PATH_CLASS = type(Path())  # (PosixPath or WindowsPath: the dispatch table matches the exact class)


def _path_by_text(path) -> tuple:
    return path_of_text, (str(path),)


# Paths unpickled, by text: the language server unpickles the facts of the programs an edit left
# valid on every edit (their modules are new objects), each naming every module and function it
# ran, and building 5,000 Path objects an edit was a third of an edit of timm's resnet.py. A path
# is immutable and keeps its hash: one object serves every unpickling. Cleared when full.
_PATHS: dict[str, Path] = {}
_PATHS_KEPT = 65536


def path_of_text(text: str) -> Path:
    found = _PATHS.get(text)
    if found is None:
        if len(_PATHS) >= _PATHS_KEPT:
            _PATHS.clear()
        found = _PATHS[text] = _PATH_CLASS(text)
    return found


# A set written as text (Facts.modules, Facts.functions) -> that text, for the last sets
# pickled: a program's sets are the same from one edit to the next, and programs share modules.
_SET_TEXTS: dict[frozenset, str] = {}
_SET_TEXTS_KEPT = 128


def _facts_by_fields(f) -> tuple:
    modules, functions = _set_text(f.modules, str), _set_text(f.functions, _called_text)
    return _facts_from_fields, (f.effects, f.late_seeds, f.final_states, f.spawns, f.truncated, modules, functions)


def _facts_from_fields(effects, late_seeds, final_states, spawns, truncated, modules: str, functions: str):
    from torchrepro_lint.project.interpreter.states import Facts

    parts = functions.split("\0") if functions else []
    called = set(zip(map(path_of_text, parts[::2]), parts[1::2]))
    return Facts(effects, late_seeds, final_states, spawns, truncated, _paths_from_text(modules), called)


def _called_text(called: tuple) -> str:
    path, name = called  # (module path, function path)
    return f"{path}\0{name}"


def _set_text(members: set, text_of) -> str:
    """The members' texts, sorted, joined by NUL (which no path holds): equal sets, equal bytes."""
    frozen = frozenset(members)  # (a set's hashes are copied, not computed again)
    text = _SET_TEXTS.get(frozen)
    if text is None:
        if len(_SET_TEXTS) >= _SET_TEXTS_KEPT:
            del _SET_TEXTS[next(iter(_SET_TEXTS))]
        text = _SET_TEXTS[frozen] = "\0".join(sorted(map(text_of, frozen)))
    return text


def _paths_from_text(text: str) -> set:
    return set(map(path_of_text, text.split("\0"))) if text else set()


# While loads_with_modules unpickles: (this run's modules by path, the pairs used, or None)
_LOADING: list[tuple] = []


def _module_at(path: str):
    """A ProjectModule written by dumps_with_modules: the module now at that path."""
    modules, used = _LOADING[-1]
    found = modules[path_of_text(path)]  # (KeyError if gone)
    if used is not None:
        used.append((found.path, found))
    return found


def loads_with_modules(data: bytes, modules: dict[Path, object], used: list | None = None):
    """Unpickle, mapping each module path back to this run's ProjectModule (KeyError if gone).
    `used` receives the (path, module) pairs it mapped."""
    _LOADING.append((modules, used))
    try:
        return pickle.loads(data)
    finally:
        _LOADING.pop()
