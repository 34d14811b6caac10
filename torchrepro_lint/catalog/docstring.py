"""Read the two bullet lists of ``torch.use_deterministic_algorithms.__doc__``.

The catalogue is checked against torch's own documentation: every bullet must be mapped to
a catalogue entry of the same kind, or listed in ``[docstring_exclusions]`` with a reason.
This module only parses text; it never imports torch (the caller passes the docstring).
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from . import Catalog, DocstringExclusion

# Section of the docstring -> the deterministic_mode its bullets describe.
_SECTION_HEADERS = {
    "deterministic_alternative": re.compile(r"operations\s+will\s+act\s+deterministically"),
    "throws": re.compile(r"operations\s+will\s+throw\s+a\s+\S*RuntimeError"),
}
_ROLE = re.compile(r":[a-z]+:`([^`]+)`")  # :class:`torch.nn.Conv1d` -> torch.nn.Conv1d
_LITERAL = re.compile(r"``([^`]*)``|`([^`]*)`")  # ``mode=True`` / `src` -> text


def normalize(text: str) -> str:
    """Drop reST markup and collapse whitespace: the form bullets are compared in."""
    text = _ROLE.sub(r"\1", text)
    text = _LITERAL.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), text)
    return " ".join(text.split())


@dataclass(frozen=True)
class DocBullet:
    section: str  # "deterministic_alternative" | "throws"
    text: str  # normalized; a nested "- item" is appended to its parent bullet's text


def parse_bullets(doc: str) -> list[DocBullet]:
    """Every bullet of the "act deterministically" and "throw a RuntimeError" lists.

    Raises ValueError when a section header is missing, so a restructured docstring
    cannot silently yield zero bullets.
    """
    lines = inspect.cleandoc(doc).splitlines()
    bullets: list[DocBullet] = []
    found: set[str] = set()
    section: str | None = None
    section_indent = 0
    paragraph: list[str] = []
    paragraph_indent = 0
    current: list[str] | None = None  # text lines of the open "*" bullet
    subitems: list[str] = []
    bullet_indent = 0

    def close_bullet() -> None:
        nonlocal current, subitems
        if current is not None and section is not None:
            head = normalize(" ".join(current))
            if subitems:
                bullets.extend(DocBullet(section, f"{head} {normalize(s)}") for s in subitems)
            else:
                bullets.append(DocBullet(section, head))
        current, subitems = None, []

    for line in lines + [""]:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if section is not None and stripped:
            if stripped.startswith("* "):
                close_bullet()
                current, bullet_indent = [stripped[2:]], indent
                continue
            if current is not None and stripped.startswith("- "):
                subitems.append(stripped[2:])
                continue
            if current is not None and indent > bullet_indent:  # continuation line
                target = subitems if subitems else current
                target[-1] += " " + stripped
                continue
            if indent <= section_indent:  # a new top-level paragraph ends the list
                close_bullet()
                section = None
        if section is None:
            if stripped:
                if not paragraph:
                    paragraph_indent = indent
                paragraph.append(stripped)
                continue
            text = " ".join(paragraph)
            paragraph = []
            for name, header in _SECTION_HEADERS.items():
                if header.search(text):
                    section, section_indent = name, paragraph_indent
                    found.add(name)
    close_bullet()
    missing = set(_SECTION_HEADERS) - found
    if missing:
        raise ValueError(f"docstring has no {', '.join(sorted(missing))} section")
    return bullets


@dataclass
class BulletMapping:
    """How the bullets of one docstring relate to the catalogue."""

    mapped: dict[DocBullet, tuple[str, ...]] = field(default_factory=dict)  # -> entry ids
    excluded: dict[DocBullet, DocstringExclusion] = field(default_factory=dict)
    unmapped: list[DocBullet] = field(default_factory=list)
    # mapped to an entry whose deterministic_mode contradicts the docstring section
    wrong_section: list[tuple[DocBullet, str]] = field(default_factory=list)
    # bullets the catalogue records that this docstring does not have (another torch release's)
    not_in_docstring: list[DocBullet] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.unmapped or self.wrong_section)


def map_bullets(doc: str, catalog: Catalog) -> BulletMapping:
    """Map each bullet of ``doc`` to catalogue entries or documented exclusions."""
    by_text: dict[DocBullet, list[str]] = {}
    for entry in catalog.entries:
        for text in entry.docstring.bullets:
            by_text.setdefault(DocBullet(entry.docstring.section, text), []).append(entry.id)
    exclusions = {DocBullet(x.section, x.bullet): x for x in catalog.docstring_exclusions}

    result = BulletMapping()
    parsed = parse_bullets(doc)
    for bullet in parsed:
        if bullet in exclusions:
            result.excluded[bullet] = exclusions[bullet]
        elif bullet in by_text:
            ids = tuple(by_text[bullet])
            result.mapped[bullet] = ids
            for entry_id in ids:
                if catalog.entry(entry_id).deterministic_mode != bullet.section:
                    result.wrong_section.append((bullet, entry_id))
        else:
            result.unmapped.append(bullet)
    seen = set(parsed)
    result.not_in_docstring = [b for b in [*by_text, *exclusions] if b not in seen]
    return result
