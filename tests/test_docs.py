"""rules/*.md and the README rule table are generated from the rules: they must be current."""

from pathlib import Path

from torchrepro_lint.rules.pages import expected_files
from torchrepro_lint.rules import all_rules

REPO = Path(__file__).resolve().parent.parent


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
