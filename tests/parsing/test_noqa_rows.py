"""`# noqa` read by SourceFile.is_suppressed: on the reported line, or on the last line of the
multi-line string the reported line is part of; a noqa that names other codes suppresses nothing."""

from __future__ import annotations

from pathlib import Path

from torchrepro_lint.parsing.source import SourceFile

TEXT = 'x = f("""a\nb\nc""")  # noqa: TRP101\ny = 2  # noqa: E501\nz = g("""d\ne""")  # noqa: F401\n'


def suppressed(code: str, row: int, text: str = TEXT) -> bool:
    return SourceFile(Path("m.py"), text).is_suppressed(code, row)


def test_a_noqa_on_a_strings_last_line_covers_its_first_lines():
    assert suppressed("TRP101", 1)
    assert suppressed("TRP101", 3)
    assert not suppressed("TRP102", 1)


def test_noqa_comments_for_other_codes_suppress_nothing():
    assert not suppressed("TRP101", 4)  # its own line names E501
    assert not suppressed("TRP101", 5)  # its string's last line names F401


def test_a_bare_noqa_on_a_strings_last_line_covers_every_code():
    assert suppressed("TRP402", 1, 'x = f("""a\nb""")  # noqa\n')
