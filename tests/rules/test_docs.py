"""rules/*.md and the README rule table are generated from the rules: they must be current, each
rule page in the fixed order of short sections, and every rule documented in full."""

import re
from pathlib import Path

import pytest

from torchrepro_lint.rules import all_rules
from torchrepro_lint.rules.pages import SECTIONS, expected_files, render_page

REPO = Path(__file__).resolve().parents[2]


def test_rule_pages_and_readme_table_are_current():
    stale = [
        path.relative_to(REPO).as_posix()
        for path, content in expected_files(REPO).items()
        if not path.exists() or path.read_text(encoding="utf-8") != content
    ]
    assert stale == [], f"run `python -m torchrepro_lint.rules.pages` to regenerate: {stale}"


def test_no_page_without_a_rule():
    codes = {rule.code for rule in all_rules()}
    pages = {p.stem for p in (REPO / "rules").glob("TRP*.md")}
    assert pages == codes


# -- the page's shape: fixed sections, short paragraphs ----------------------------------------
RULES = [pytest.param(rule, id=rule.code) for rule in all_rules()]
MAX_WORDS = 120
OPTIONAL = {"Decisions"}  # left out when a rule records none


def headings(page: str, level: str) -> list[str]:
    return [line[len(level) + 1 :] for line in prose_lines(page) if line.startswith(level + " ")]


def prose_lines(page: str) -> list[str]:
    """The page's lines outside fenced code blocks and tables (a fence's own lines included)."""
    lines, fenced = [], False
    for line in page.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not fenced and not line.startswith("|"):
            lines.append(line)
    return lines


def blocks(page: str) -> list[str]:
    """Paragraphs and list items outside code blocks and tables."""
    out, current = [], []
    for line in prose_lines(page) + [""]:
        if not line.strip() or line.startswith("- "):
            if current:
                out.append(" ".join(current))
            current = [line] if line.strip() else []
        else:
            current.append(line)
    return out


@pytest.mark.parametrize("rule", RULES)
def test_rule_page_has_its_sections_in_order(rule):
    page = render_page(rule)
    lines = page.splitlines()
    assert lines[0] == f"# {rule.code}: {rule.name}"
    assert lines[2].startswith("*Severity:*") and "*Fix:*" in lines[2] and "*Precision:*" in lines[2]
    found = headings(page, "##")
    assert found == [s for s in SECTIONS if s in found], f"out of order: {found}"
    assert set(SECTIONS) - OPTIONAL <= set(found), f"missing: {sorted(set(SECTIONS) - OPTIONAL - set(found))}"
    more = headings(page[page.index("## More examples") :], "###")
    assert more in (["Reported", "Not reported"], ["Reported"], ["Not reported"]), more
    example = page[page.index("## Example") : page.index("## Not reported")]
    assert "Fixed:" in example, "the example shows the fixed code"


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in expected_files(REPO) if p.parent.name == "rules"])
def test_no_paragraph_or_list_item_of_a_rule_page_is_long(path):
    page = expected_files(REPO)[path]
    long = [block[:80] + "..." for block in blocks(page) if len(block.split()) > MAX_WORDS]
    assert long == [], f"over {MAX_WORDS} words: {long}"


def _is_strs(value) -> bool:
    return isinstance(value, tuple) and all(isinstance(item, str) and item.strip() for item in value)


@pytest.mark.parametrize("rule", RULES)
def test_rule_documentation_is_complete(rule):
    assert rule.hazards and rule.hazards[0].fixed is not None, "the first hazard is the page's example: give it `fixed=`"
    assert rule.why.strip()
    assert rule.not_reported and _is_strs(rule.not_reported)
    assert rule.where_reported and _is_strs(rule.where_reported)
    assert _is_strs(rule.decisions), "`decisions` is a tuple of str, one decision each"
    assert _is_strs(rule.options), "`options` is a tuple of str, one key each"
    assert rule.reference and all(
        isinstance(item, tuple) and len(item) == 2 and item[0].strip() and re.match(r"https://\S+$", item[1])
        for item in rule.reference
    ), "`reference` is a tuple of (title, https URL)"
