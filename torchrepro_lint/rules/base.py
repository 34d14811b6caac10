"""The rule contract: metadata, examples, and the two kinds of check; and what rules share:
the words that gate a per-file rule (`last_names`, `occurs`) and the programs whose facts
decide a per-call finding's level (`programs_for`).

A rule's documentation page (rules/TRPxxx.md) is generated from the class attributes below,
and its examples run as tests: a hazard must be reported exactly on the lines marked
`# <-- TRPxxx`, a trap must not be reported at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, ClassVar, Iterable

import libcst as cst

from torchrepro_lint.analysis.identifiers import Identifiers
from torchrepro_lint.analysis.text_memo import TextMemo
from torchrepro_lint.findings import Finding, Severity

if TYPE_CHECKING:
    from torchrepro_lint.rules.context import LintContext
    from torchrepro_lint.project.modules import ProjectModule

MARKER = "# <-- "


@dataclass(frozen=True)
class Example:
    """Source of one example: a single file, or several (`{"train.py": ..., "utils.py": ...}`)."""

    code: str | dict[str, str]
    title: str = ""
    config: dict = field(default_factory=dict)  # [tool.torchrepro-lint] settings, e.g. torch-version
    # A hazard's same code with the hazard fixed (what `--fix` writes, where the rule has a fix):
    # shown beside it on the rule's page, and linted by the tests, which expect no finding of the rule.
    fixed: str | dict[str, str] | None = None

    @property
    def files(self) -> dict[str, str]:
        return {"example.py": self.code} if isinstance(self.code, str) else dict(self.code)


def last_names(*qualnames: Iterable[str]) -> tuple[str, ...]:
    """The words a call to any of `qualnames` must contain: their last components, sorted.

    A qualified name resolves from the file's own text (analysis/names.py): through its import,
    an alias assigned from it, or the dotted expression itself, and each spells the last
    component (`from numpy.random import default_rng as rng` still names `default_rng`)."""
    return tuple(sorted({name.rsplit(".", 1)[-1] for group in qualnames for name in group}))


@lru_cache(maxsize=None)
def _whole_word(word: str) -> re.Pattern:
    # The literal comes first so the regex engine can scan for it; the lookbehind then checks
    # the character before it, e.g. `put(?<!\wput)(?!\w)`. Ends that are not word characters
    # (`{`) are not checked.
    head = r"(?<!\w" + re.escape(word) + ")" if re.match(r"\w", word) else ""
    tail = r"(?!\w)" if re.search(r"\w$", word) else ""
    return re.compile(re.escape(word) + head + tail)


def occurs(word: str, text: str) -> bool:
    """`word` in `text`, not as part of a longer identifier: an identifier (or a string key
    such as "num_workers") always stands between characters that cannot continue it."""
    return _occurs(text, word)


def _occurs_in(text: str, word: str) -> bool:
    if _IDENTIFIER.fullmatch(word):
        return word in _identifiers(text)  # (one count of the text's runs for all of a rule set's words)
    return word in text and _whole_word(word).search(text) is not None


_IDENTIFIER = re.compile(r"\w+")
_identifiers = Identifiers()


_occurs = TextMemo(_occurs_in)


def any_may_fire(rules, text: str) -> bool:
    """Whether any of `rules` may fire in `text` (Rule.may_fire_in), remembered by the text and
    the rules' triggers: the engine asks it of every linted file in every run, and the language
    server runs the engine on every edit."""
    return _any_triggered(text, tuple(rule.triggers for rule in rules))


_any_triggered = TextMemo(lambda text, triggers: any(not words or any(occurs(w, text) for w in words) for words in triggers))


def programs_for(context, module, node) -> list:
    """The programs whose facts decide a per-call finding's level: those that run the
    function around `node`. For a method that no program is seen calling (hooks called by a
    framework, objects passed around), the programs that reach its module; for a plain
    function nobody calls, none (unknown)."""
    running = context.programs_running(module, node)
    if running:
        return running
    outer = None
    for ancestor in module.index.ancestors(node):
        if isinstance(ancestor, cst.FunctionDef):
            outer = ancestor
    if outer is None or module.index.enclosing(outer, cst.ClassDef) is not None:
        return context.programs_reaching(module)
    return []


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]  # kebab-case, as in the spec
    summary: ClassVar[str]  # "What it does": one to three sentences (the rules table shows it)
    why: ClassVar[str]  # "Why it matters": why it breaks reproducibility
    severity: ClassVar[Severity] = Severity.WARNING
    default_enabled: ClassVar[bool] = True
    fix_safety: ClassVar[str | None] = None  # "safe" | "unsafe" | None
    fix: ClassVar[str] = ""  # what to do (and what --fix will do, when it can)
    # The rule page's lists, one short item each (no item over about 120 words):
    not_reported: ClassVar[tuple[str, ...]] = ()  # look-alikes that are not hazards
    where_reported: ClassVar[tuple[str, ...]] = ()  # where a finding is placed, what evidence counts
    decisions: ClassVar[tuple[str, ...]] = ()  # where the spec is silent: what we decided and why
    options: ClassVar[tuple[str, ...]] = ()  # the `[tool.torchrepro-lint]` keys that change the rule
    reference: ClassVar[tuple[tuple[str, str], ...]] = ()  # (title, URL): PyTorch's documentation
    hazards: ClassVar[tuple[Example, ...]] = ()  # the first one is the page's example (with `fixed`)
    traps: ClassVar[tuple[Example, ...]] = ()
    tags: ClassVar[tuple[str, ...]] = ("reproducibility",)
    precision: ClassVar[str] = "high"
    # Per-file rules: words one of which a file's text must contain for the rule to have
    # anything to report there (the API names that make a candidate). Matched as whole words:
    # `glob` is not found in `global`, nor `put` in `input` (see `occurs`). Empty: no gate.
    triggers: ClassVar[tuple[str, ...]] = ()

    def may_fire_in(self, text: str) -> bool:
        """The cheap gate the engine asks before running check_module (and parsing for it)."""
        return not self.triggers or any(occurs(word, text) for word in self.triggers)

    def check_module(self, module: ProjectModule, context: LintContext) -> Iterable[Finding]:
        """Per-file rules: called once for every linted module."""
        return ()

    def check_programs(self, context: LintContext) -> Iterable[Finding]:
        """Program rules: called once per run, with every program's facts in `context`."""
        return ()
