"""What the language server knows of each project: its configuration, its files, the editor's
unsaved buffers, and the program model kept in memory between requests. No LSP here: this is
the part that decides which findings each open file has, and it is tested without a client.

A project is found as the flake8 plugin finds it (`project_root.find_project`: the nearest
directory with a pyproject.toml or a VCS root); each is analysed as `torchrepro-lint check ROOT`
run from the server's working directory would analyse it, with every open buffer in place of
its file on disk, so a seed added in an unsaved `utils.py` counts for the `train.py` that
imports it. Each analysis runs the engine over the whole project on a MemoryCache: what an
edit did not touch is taken from memory, as the CLI takes it from its on-disk cache.

A buffer that does not compile is reported as TRP000 alone, and the rest of the project keeps
seeing that file's last text that did compile, so one half-typed line does not make every
program that imports the file lose its seed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from torchrepro_lint.pipeline.cache import DEFAULT_DIRECTORY, Cache, config_fingerprint
from torchrepro_lint.config import Config, installed_torch_version, load_config
from torchrepro_lint.pipeline.discovery import LINTED_SUFFIXES
from torchrepro_lint.findings import Finding, Statistics
from torchrepro_lint.integrations.project_cache import list_project
from torchrepro_lint.integrations.project_root import find_project
from torchrepro_lint.project.index import ProjectIndex
from torchrepro_lint.parsing.reparse import ParsedText
from torchrepro_lint.server.edited_source import EditedSource, edited_source
from torchrepro_lint.server.memory_cache import MemoryCache
from torchrepro_lint.server.recompile import Compiled, compile_text
from torchrepro_lint.parsing.source import ParseFailure, SourceError, SourceFile, read_source


@dataclass
class Analysis:
    findings: dict[Path, list[Finding]] = field(default_factory=dict)  # resolved path -> findings
    errors: list[str] = field(default_factory=list)  # files that could not be linted, rule bugs
    statistics: Statistics = field(default_factory=Statistics)


def _stat(path: Path):
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size)


def _mtime(path: Path):
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


class ProjectSession:
    """One project root and the buffers open in it. `standalone`: a file outside any project,
    linted alone, as `torchrepro-lint check FILE` would."""

    def __init__(self, root: Path, pyproject: Path | None, cwd: Path, *, standalone: bool = False, persistent: bool = True):
        self.root, self.pyproject, self.cwd = root, pyproject, cwd
        self.standalone, self.persistent = standalone, persistent
        self.key = root  # its Workspace's key for it (project_root.session_key)
        self.buffers: dict[Path, str] = {}  # open documents: resolved path -> text
        self._good: dict[Path, str] = {}  # open documents: the last text that compiled
        self._bad: dict[Path, tuple] = {}  # open documents: (text, ParseFailure) of a text that did not
        self._syntax: dict[Path, Compiled] = {}  # open documents: CPython's tree of the last good text
        self._parsed: dict[Path, ParsedText] = {}  # open documents: the last text LibCST parsed, and its tree
        self._texts: dict[Path, tuple] = {}  # files on disk: path -> (stat, text)
        self._displays: dict[Path, Path] = {}  # path -> display(path), asked for every file on every edit
        self._config: tuple | None = None  # (pyproject stat, Config)
        self._listing = None
        # Import candidates missing on disk, kept between analyses (project/module_finder.py); a
        # new set when the listing changes or the client says files changed, as a new file may be one
        # (a new object: values computed from the old one are no longer taken, read_values.py).
        self.absent: set[Path] = set()
        self.cache: MemoryCache | None = None
        self.last: Analysis | None = None
        self.runs = 0  # analyses done on `cache` (a new configuration makes a new one)
        self._modules: dict = {}  # the last analysis's modules, reused where unchanged
        self._recorded: tuple | None = None  # and its interpreter recordings (ProjectIndex.adopt_recordings)
        self._mentioning: dict | None = None  # and its modules_mentioning answers
        self._imports: tuple | None = None  # and its modules_imported answers (ProjectIndex.imports_kept)

    # -- configuration and files ------------------------------------------------------------
    def config(self) -> Config:
        """`[tool.torchrepro-lint]`, read again whenever pyproject.toml changed. Raises ConfigError."""
        stat = _stat(self.pyproject) if self.pyproject is not None else None
        if self._config is None or self._config[0] != stat:
            if self.standalone:
                config = load_config([self.root])
            elif self.pyproject is not None and stat is not None:
                config = load_config([self.root], self.pyproject)
            else:
                config = Config(root=self.root, torch_version=installed_torch_version())
            changed = self._config is None or config_fingerprint(config) != config_fingerprint(self._config[1])
            self._config = (stat, config)
            if changed:  # another configuration: other cache keys, other files
                self._listing = None
                self._modules = {}
                self._recorded = None
                self._mentioning = None
                self._imports = None
                self.cache = MemoryCache(self._disk_cache(config))
                self.runs = 0
        return self._config[1]

    def forget_config(self) -> None:
        """Read the configuration again on the next analysis (the client said pyproject.toml changed)."""
        self._config = None

    def files_changed(self) -> None:
        """The client saw files change on disk: one may be a module an import looked for."""
        self.absent = set()

    def _disk_cache(self, config: Config) -> Cache | None:
        if not self.persistent or self.standalone:
            return None
        return Cache(config.root / DEFAULT_DIRECTORY, config_fingerprint(config), lambda message: None)

    def files(self, config: Config) -> list[Path]:
        """What `check ROOT` lints (listed again when a directory changed), and every open buffer."""
        listed: list[Path] = []
        members: frozenset = frozenset()
        if not self.standalone:
            listing = self._listing
            if listing is None or any(_mtime(d) != m for d, m in listing.dirs.items()):
                listing = self._listing = list_project(self.root, config)
                self.absent = set()
                self._displays = {}
            listed, members = listing.files, listing.members
        extra = [p for p in self.buffers if p not in members and p.name.endswith(LINTED_SUFFIXES)]
        return [*listed, *sorted(extra, key=lambda p: p.as_posix())]

    def _disk_text(self, path: Path) -> str | None:
        stat = _stat(path)
        cached = self._texts.get(path)
        if stat is not None and cached is not None and cached[0] == stat:
            return cached[1]
        try:
            text = read_source(path)
        except SourceError:
            self._texts.pop(path, None)
            return None  # the engine reads it again and reports why
        self._texts[path] = (stat, text)
        return text

    def as_saved(self) -> dict[Path, str]:
        """The open buffers as their files are on disk (those on disk)."""
        texts = {path: self._disk_text(path) for path in self.buffers}
        return {path: text for path, text in texts.items() if text is not None}

    def display(self, path: Path) -> Path:
        """How `check`, run from the server's working directory, names the file."""
        found = self._displays.get(path)
        if found is None:
            try:
                found = path.relative_to(self.cwd)
            except ValueError:
                found = path
            self._displays[path] = found
        return found

    # -- analysis ---------------------------------------------------------------------------
    def analyse(self, *, open_only: bool = False, progress=None, jobs: int = 1) -> Analysis:
        """Every linted file's findings, with the open buffers in place of the files. Raises
        ConfigError for a broken configuration. `open_only`: the per-file rules run on the open
        buffers alone (an editor shows no other file's findings; checking the others' cached
        results cost 7-12 ms of an edit on pytorch-image-models), so the other files get their
        program rules' findings only. `progress` (pipeline/progress.py) hears of the stages;
        `jobs`: processes for a cold run, as `check --jobs` (server/cold_start.py, in a child: the
        next edit would find none of what the main process keeps for it)."""
        from torchrepro_lint.pipeline.engine import PARSE_ERROR, lint_sources, selection_from
        from torchrepro_lint.pipeline.progress import NO_PROGRESS

        config = self.config()
        sources: list[tuple[Path, str | None]] = []
        by_display: dict[str, Path] = {}
        broken: dict[Path, Finding] = {}
        edited: dict[Path, EditedSource] = {}
        unsaved = False
        for path in self.files(config):
            display = self.display(path)
            by_display[display.as_posix()] = path
            text = self.buffers.get(path)
            if text is None:
                text = self._unchanged_source(path, display, self._disk_text(path))
            else:
                unsaved = unsaved or text != self._disk_text(path)
                text = self._last_good(path, display, text, broken)
                if path.suffix != ".ipynb" and self._good.get(path) == text:
                    text = edited[path] = edited_source(display, text, self._parsed.get(path), self._syntax.get(path))
            sources.append((display, text))
        self.cache.persist = not unsaved
        statistics = Statistics()
        absent, reusable, indexes = self.absent, self._modules, []

        def make_index(root, helpers):
            indexes.append(
                ProjectIndex(
                    root, helpers, absent=absent, reusable=reusable, recorded_before=self._recorded,
                    mentioning_before=self._mentioning, imports_before=self._imports,
                )
            )
            return indexes[-1]

        checked = [self.display(path).as_posix() for path in self.buffers] if open_only else None
        result = lint_sources(
            sources, config, cache=self.cache, statistics=statistics, make_index=make_index, checked=checked,
            progress=progress or NO_PROGRESS, jobs=jobs,
        )
        self._modules = indexes[-1].modules if indexes else {}
        self._recorded = indexes[-1].recorded if indexes else None
        self._mentioning = indexes[-1]._mentioning if indexes else None
        self._imports = indexes[-1].imports_kept() if indexes else None
        self.cache.end_run()
        for path, source in edited.items():  # the next edit parses only what it touches
            if source.parsed is not None:
                self._parsed[path] = source.parsed
        analysis = Analysis(errors=result.errors, statistics=statistics)
        for finding in result.findings:
            path = by_display.get(finding.path) or Path(finding.path).resolve()
            analysis.findings.setdefault(path, []).append(finding)
        enabled = selection_from(config).enabled(PARSE_ERROR, True)
        for path, finding in broken.items():  # its other findings are of its last good text
            analysis.findings[path] = [finding] if enabled else []
        self.last = analysis
        self.runs += 1
        return analysis

    @property
    def warm(self) -> bool:
        """Whether an analysis has filled this configuration's memory cache: the next one takes
        what an edit did not change from it (the first reads the disk cache, or builds it all)."""
        return self.runs > 0

    def _unchanged_source(self, path: Path, display: Path, text: str | None) -> str | SourceFile | None:
        """The last analysis's SourceFile of a file whose text is the same object again (read
        once, unchanged on disk): the project takes that module again anyway, and a new
        SourceFile for each of 315 files cost about 1 ms of every edit in pytorch-image-models
        (its resolved path and key worked out again)."""
        previous = self._modules.get(path)
        source = previous.source if previous is not None else None
        if text is not None and type(source) is SourceFile and source.text is text and (source.path is display or source.path == display):
            return source
        return text

    def _last_good(self, path: Path, display: Path, text: str, broken: dict) -> str:
        if path.suffix == ".ipynb":
            return text  # the engine checks each cell and leaves out those that fail
        good = self._good.get(path)
        if good == text:
            return text  # compiled before: every open buffer is looked at in every analysis
        bad = self._bad.get(path)
        compiled = bad[1] if bad is not None and bad[0] == text else compile_text(display, text, self._syntax.get(path))
        if not isinstance(compiled, ParseFailure):
            self._good[path] = text
            self._syntax[path] = compiled
            self._bad.pop(path, None)
            return text
        failure = compiled
        self._bad[path] = (text, failure)
        if good is None:
            return text  # never compiled: the engine reports it, and the project goes without it
        from torchrepro_lint.pipeline.engine import parse_error_finding

        broken[path] = parse_error_finding(display, failure)
        return good

    def close(self, path: Path) -> None:
        self.buffers.pop(path, None)
        self._good.pop(path, None)
        self._bad.pop(path, None)
        self._syntax.pop(path, None)
        self._parsed.pop(path, None)
        if self.cache is not None:
            self.cache.ir_digest_parts.pop(path, None)  # (kept for the buffer's next edit)


class Workspace:
    """Every project the editor has a file open in, by root."""

    def __init__(self, cwd: Path | None = None, *, persistent: bool = True) -> None:
        self.cwd = (cwd or Path.cwd()).resolve()
        self.persistent = persistent
        self.sessions: dict[Path, ProjectSession] = {}

    def session_for(self, path: Path) -> ProjectSession:
        root, pyproject = find_project(path)
        key = root if root is not None else path  # (project_root.session_key)
        session = self.sessions.get(key)
        if session is None:
            if root is None:
                session = ProjectSession(path.parent, None, self.cwd, standalone=True, persistent=self.persistent)
            else:
                session = ProjectSession(root, pyproject, self.cwd, persistent=self.persistent)
            session.key = key
            self.sessions[key] = session
        return session

    def open(self, path: Path, text: str) -> ProjectSession:
        session = self.session_for(path)
        session.buffers[path] = text
        return session

    def close(self, path: Path) -> ProjectSession | None:
        for key, session in list(self.sessions.items()):
            if path in session.buffers:
                session.close(path)
                if not session.buffers:
                    del self.sessions[key]  # nothing open: its model is not worth the memory
                return session
        return None

    def session_holding(self, path: Path) -> ProjectSession | None:
        return next((s for s in self.sessions.values() if path in s.buffers), None)
