"""The flake8 plugin: `flake8 --select TRP` reports what `torchrepro-lint check` reports.

Registered as entry point `TRP` in the `flake8.extension` group. flake8 hands a plugin one file at
a time, as the lines it read (from disk, or from standard input when an editor pipes an unsaved
buffer), so the file itself is never read from disk here. The program rules still see the whole
project around the file: see `project_cache`, which keeps parsed modules for the process.

Selection: every rule the project's `[tool.torchrepro-lint]` enables is reported; flake8's own
`--select`/`--ignore`/`# noqa` then apply on top. The plugin never makes flake8 fail: a file LibCST
cannot parse is a TRP000 finding, and any internal error is logged and yields nothing.
"""

from __future__ import annotations

import logging
import sys
from typing import Iterator

from torchrepro_lint import __version__
from torchrepro_lint.config import ConfigError
from torchrepro_lint.integrations.project_cache import CACHE

LOG = logging.getLogger(__name__)
_reported_config_errors: set[str] = set()


class TorchReproChecker:
    """A flake8 AST plugin (flake8 classifies plugins by their parameters; `tree` is unused)."""

    name = "torchrepro-lint"
    version = __version__

    def __init__(self, tree, lines: list[str], filename: str = "stdin") -> None:
        self.lines = lines
        self.filename = filename

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        try:
            findings, errors = CACHE.findings_for(self.filename, "".join(self.lines))
        except ConfigError as exc:
            message = str(exc)
            if message not in _reported_config_errors:  # once per process, not once per file
                _reported_config_errors.add(message)
                print(f"torchrepro-lint (flake8 plugin): error: {message}; no TRP findings", file=sys.stderr)
            return
        except Exception as exc:  # noqa: BLE001 - a linter bug must never take flake8 down
            # One line on stderr (no flake8 handler is configured without -v); the traceback at -vv.
            LOG.warning("torchrepro-lint: internal error while checking %s: %s: %s", self.filename, type(exc).__name__, exc)
            LOG.debug("torchrepro-lint: traceback", exc_info=True)
            return
        for error in errors:
            LOG.info("torchrepro-lint: %s", error)
        for finding in findings:
            # flake8 columns are 0-based (it adds 1 when it prints); ours are 1-based.
            yield finding.row, max(finding.column - 1, 0), f"{finding.code} {finding.message}", type(self)
