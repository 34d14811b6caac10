"""Every bullet of the installed torch.use_deterministic_algorithms docstring is catalogued.

A bullet is *mapped* when a catalogue entry of the same kind (deterministic_mode = the
docstring section) claims it, or *excluded* when [docstring_exclusions] explains why the
catalogue does not reproduce it (stale / overbroad). Anything else fails: a new torch
release that adds or rewords a bullet must be looked at.
"""

from __future__ import annotations

import pytest

from torchrepro_lint.catalog import load_catalog, parse_version
from torchrepro_lint.catalog.docstring import DocBullet, map_bullets, parse_bullets

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:Failed to initialize NumPy")

CAT = load_catalog()
DOC = torch.use_deterministic_algorithms.__doc__


def _report(mapping) -> str:
    lines = [f"unmapped: [{b.section}] {b.text}" for b in mapping.unmapped]
    lines += [f"wrong section: [{b.section}] {b.text} -> {e}" for b, e in mapping.wrong_section]
    return "\n".join(lines)


def test_installed_docstring_bullets_are_all_mapped_or_excluded():
    mapping = map_bullets(DOC, CAT)
    assert mapping.ok, "docstring bullets the catalogue does not account for:\n" + _report(mapping)
    parsed = parse_bullets(DOC)
    assert len(mapping.mapped) + len(mapping.excluded) == len(parsed)
    # Both lists were found and are not trivially small (a parser regression would make them so).
    sections = {b.section for b in parsed}
    assert sections == {"deterministic_alternative", "throws"}
    assert len(parsed) >= 40


def test_catalogued_bullets_are_in_the_docstring_of_the_catalogued_release():
    if parse_version(torch.__version__) != parse_version(CAT.meta["docstring_torch_version"]):
        pytest.skip(f"catalogue bullets are from torch {CAT.meta['docstring_torch_version']}")
    stale = map_bullets(DOC, CAT).not_in_docstring
    assert not stale, f"catalogue records bullets this docstring does not have: {stale}"


def test_added_bullet_is_reported_unmapped():
    new = "* :func:`torch.Tensor.frobnicate_` when called on a CUDA tensor"
    anchor = "* :func:`torch.Tensor.resize_` when called with a quantized tensor"
    assert anchor in DOC
    doc = DOC.replace(anchor, new + "\n        " + anchor)
    mapping = map_bullets(doc, CAT)
    assert mapping.unmapped == [DocBullet("throws", "torch.Tensor.frobnicate_ when called on a CUDA tensor")]
    assert not mapping.ok


def test_bullet_moved_to_the_other_list_is_reported():
    # cumsum is excluded under "throw"; index_add is a deterministic alternative. Listing
    # index_add under "throw" (or cumsum under "act deterministically") must fail.
    doc = DOC.replace(
        "* :func:`torch.histc` when called on a CUDA tensor",
        "* :func:`torch.index_add` when called on CUDA tensor\n"
        "        * :func:`torch.histc` when called on a CUDA tensor",
    )
    mapping = map_bullets(doc, CAT)
    assert DocBullet("throws", "torch.index_add when called on CUDA tensor") in mapping.unmapped


def test_removed_entry_leaves_its_bullets_unmapped():
    # The same mapping function against a catalogue without one entry.
    from dataclasses import replace

    smaller = replace(CAT, entries=tuple(e for e in CAT.entries if e.id != "put_no_accumulate"))
    mapping = map_bullets(DOC, smaller)
    assert mapping.unmapped == [DocBullet("throws", "torch.Tensor.put_ when accumulate=False")]


def test_figures():
    """The counts quoted in NOTES.md (torch 2.13.0)."""
    if parse_version(torch.__version__) != (2, 13):
        pytest.skip("figures are for torch 2.13")
    mapping = map_bullets(DOC, CAT)
    by_section = lambda d, s: sum(1 for b in d if b.section == s)  # noqa: E731
    assert (len(parse_bullets(DOC)), len(mapping.mapped), len(mapping.excluded)) == (51, 42, 9)
    assert by_section(mapping.mapped, "deterministic_alternative") == 22
    assert by_section(mapping.excluded, "throws") == 8
