"""The catalogue loader and the catalogue's internal consistency. No torch needed."""

from __future__ import annotations

import importlib.resources
import sys

import pytest

from torchrepro_lint.analysis.op_matching.order_independent import DUPLICATE_INDEX_ENTRIES
from torchrepro_lint.catalog import (
    Catalog,
    Predicate,
    format_catalog,
    load_catalog,
    parse_catalog,
    parse_version,
)
from torchrepro_lint.catalog.docstring import DocBullet, map_bullets, normalize, parse_bullets

CAT = load_catalog()
RAW_TEXT = importlib.resources.files("torchrepro_lint.catalog").joinpath("ops.toml").read_text("utf-8")


# ----------------------------------------------------------------------------- versions


@pytest.mark.parametrize(
    ("text", "expected"),
    [("2.13.0+cpu", (2, 13)), ("2.13.0", (2, 13)), ("2.10", (2, 10)), ("2.11.0a0+git1a2b3c", (2, 11)),
     ("2.9.1+cu128", (2, 9)), ("10.0.0", (10, 0))],
)  # fmt: skip
def test_parse_version(text, expected):
    assert parse_version(text) == expected


@pytest.mark.parametrize("text", ["", "torch", "2", "two.thirteen"])
def test_parse_version_rejects_junk(text):
    with pytest.raises(ValueError):
        parse_version(text)


def test_version_gating_kthvalue_raised_only_before_2_10():
    ids = lambda v: {e.id for e in CAT.entries_for_api("torch.kthvalue", v)}  # noqa: E731
    assert ids((2, 9)) == {"kthvalue_cuda"}
    assert ids((2, 10)) == set()
    assert ids((2, 13)) == set()
    assert [n.id for n in CAT.not_flagged if n.id == "kthvalue" and n.holds_in((2, 13))] == ["kthvalue"]
    assert not any(n.id == "kthvalue" and n.holds_in((2, 9)) for n in CAT.not_flagged)


def test_version_gating_max_pool3d_decomposition():
    # 2.9/2.10: every MaxPool3d backward reached the alerting kernel; later only return_indices=False.
    old = CAT.apis_for("torch.nn.MaxPool3d", (2, 10))
    assert [(a.entry_id, a.when) for a in old] == [("max_pool3d_backward_no_indices", ())]
    new = CAT.apis_for("torch.nn.MaxPool3d", (2, 13))
    by_entry = {a.entry_id: a.when for a in new}
    assert set(by_entry) == {"max_pool3d_backward_no_indices", "max_pool3d_backward_with_indices"}
    assert by_entry["max_pool3d_backward_no_indices"][0].value is False
    assert by_entry["max_pool3d_backward_with_indices"][0].value is True
    assert "max_pool3d_backward_with_indices" not in {e.id for e in CAT.entries_for((2, 10))}


def test_entries_for_none_means_every_version():
    assert len(CAT.entries_for(None)) == len(CAT.entries)
    assert len(CAT.entries_for((2, 13))) < len(CAT.entries)  # kthvalue_cuda is gone


def test_entries_for_rule_filter():
    trp402 = CAT.entries_for((2, 13), rule="TRP402")
    trp401 = CAT.entries_for((2, 13), rule="TRP401")
    assert trp402 and trp401
    assert all(e.raises for e in trp402)
    assert not any(e.raises for e in trp401)
    assert len(trp401) + len(trp402) == len(CAT.entries_for((2, 13)))


# ----------------------------------------------------------------------------- lookups


def test_lookup_function_with_predicates():
    apis = CAT.apis_for("torch.nn.functional.interpolate", (2, 13))
    modes = {}
    for a in apis:
        mode = next(p for p in a.when if p.name == "mode")
        assert mode.subject == "arg" and mode.pos == 3
        modes.setdefault(a.entry_id, mode.value)
    assert modes["upsample_linear1d_backward"] == "linear"
    assert modes["upsample_bicubic2d_backward"] == "bicubic"
    assert modes["adaptive_avg_pool2d_backward"] == "area"
    assert modes["upsample_antialias_backward"] == ("bilinear", "bicubic")
    assert CAT.entry("upsample_bilinear2d_backward").rule == "TRP401"


def test_lookup_method():
    entries = CAT.entries_for_api("torch.Tensor.index_add_", (2, 13))
    assert [e.id for e in entries] == ["index_add"]
    assert entries[0].deterministic_mode == "deterministic_alternative"
    assert entries[0].rule == "TRP401"
    assert entries[0].device == "cuda"


def test_lookup_module():
    (entry,) = CAT.entries_for_api("torch.nn.ReflectionPad1d", (2, 13))
    assert entry.id == "reflection_pad1d_backward"
    assert entry.raises and entry.rule == "TRP402" and entry.phases == ("backward",)
    assert entry.when == (Predicate("context", "requires_grad", "equals", True),)
    assert CAT.entries_for_api("torch.nn.ReflectionPad2d", (2, 13))[0].rule == "TRP401"


def test_lookup_put_family():
    ids = [e.id for e in CAT.entries_for_api("torch.Tensor.put_", (2, 13))]
    assert ids == ["put_no_accumulate", "put_accumulate_cuda", "put_accumulate_cpu"]
    (pred,) = CAT.apis_for("torch.Tensor.put_", (2, 13))[0].when
    assert (pred.name, pred.pos, pred.test, pred.value, pred.default) == ("accumulate", 2, "equals", False, False)


def test_lookup_unknown_name_is_empty():
    assert CAT.apis_for("torch.nn.Linear", (2, 13)) == []
    assert CAT.apis_for("numpy.median", (2, 13)) == []
    with pytest.raises(KeyError):
        CAT.entry("no_such_entry")


def test_not_flagged_lookups():
    traps = CAT.not_flagged_for("torch.nn.AdaptiveAvgPool2d", (2, 13))
    assert [(a.entry_id, a.when[0].test) for a in traps] == [("adaptive_avg_pool_global", "all_ones")]
    assert {a.entry_id for a in CAT.not_flagged_for("torch.bincount")} == {"bincount_no_weights"}
    nearest = CAT.not_flagged_for("torch.nn.functional.interpolate")
    assert any(p.value == ("nearest", "nearest-exact") and p.default == "nearest" for a in nearest for p in a.when)
    assert {a.entry_id for a in CAT.not_flagged_for("torch.median")} == {"median_no_dim"}


def test_api_names_include_traps():
    assert "torch.nn.UpsamplingNearest2d" in CAT.api_names()
    assert "torch.nn.UpsamplingNearest2d" not in CAT.api_names(include_not_flagged=False)


def test_load_catalog_is_cached():
    assert load_catalog() is load_catalog()


def test_runtime_does_not_import_torch():
    import subprocess

    code = (
        "import sys, torchrepro_lint.catalog as c, torchrepro_lint.catalog.docstring\n"
        "c.load_catalog(); c.format_catalog('2.13'); print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ----------------------------------------------------------------------------- parsing / validation


def _minimal(extra: str = "") -> str:
    return (
        'schema_version = 1\n[ops.x]\nrule = "TRP402"\ndeterministic_mode = "throws"\ndevice = "cuda"\n'
        'phases = ["forward"]\nkernels = ["x_cuda"]\ncondition = "c"\n' + extra
    )


def test_parse_minimal_catalogue():
    cat = parse_catalog(_minimal('[[ops.x.api]]\nname = "torch.x"\nkind = "function"\nuntil = "2.11"\n'))
    assert isinstance(cat, Catalog)
    assert cat.entry("x").apis_for((2, 10))[0].name == "torch.x"
    assert cat.entry("x").apis_for((2, 11)) == []


@pytest.mark.parametrize(
    "bad",
    [
        _minimal().replace('rule = "TRP402"', 'rule = "TRP401"'),  # rule contradicts the mode
        _minimal('[[ops.x.api]]\nname = "torch.x"\nkind = "klass"\n'),
        _minimal('when = [{arg = "mode", pos = 1}]\n'),  # an arg predicate without a test
        _minimal('when = [{arg = "mode", equals = "a", in = ["a"]}]\n'),  # two tests
        _minimal('when = [{colour = "red"}]\n'),  # unknown context key
        _minimal().replace("schema_version = 1", "schema_version = 2"),
    ],
)
def test_parse_rejects_malformed(bad):
    with pytest.raises((ValueError, KeyError)):
        parse_catalog(bad)


def test_predicate_forms():
    p = Predicate.from_toml({"arg": "pad", "pos": 1, "len": 2})
    assert (p.subject, p.name, p.test, p.value, p.pos, p.has_default) == ("arg", "pad", "len", 2, 1, False)
    assert Predicate.from_toml({"input_ndim_min": 3}) == Predicate("context", "input_ndim", "min", 3)
    assert Predicate.from_toml({"input_ndim": [3, 4]}).value == (3, 4)
    q = Predicate.from_toml({"ctor_arg": "mode", "pos": 2, "equals": "area", "default": "nearest"})
    assert q.has_default and q.describe() == "mode='area' (constructor)"


# ----------------------------------------------------------------------------- consistency


def test_every_entry_is_reachable_from_an_api():
    for e in CAT.entries:
        assert e.apis, e.id
        assert e.kernels and e.condition, e.id


def test_rule_matches_mode_and_report_flags_are_explained():
    for e in CAT.entries:
        assert e.rule == ("TRP402" if e.raises else "TRP401"), e.id
        assert e.report or e.report_note, e.id
        for a in e.apis:
            assert a.report or a.report_note, (e.id, a.name)


def test_rules_md_exclusions_from_trp401():
    # rules.md 4xx: convolutions, nn.Embedding and SDPA/MHA backward, gather/index_select/
    # repeat_interleave/take_along_dim backward, implicit indexing are not reported by TRP401.
    silent = {"convolution_cudnn", "embedding_dense_backward", "sdpa_backward", "gather_backward",
              "index_select_backward"}  # fmt: skip
    assert {e.id for e in CAT.entries if e.rule == "TRP401" and not e.report} == silent
    for name in ["torch.Tensor.__getitem__", "torch.Tensor.__setitem__"]:
        assert [a.report for a in CAT.apis_for(name, (2, 13))] == [False]
    # ... but the ops named by TRP401 are reported, including Conv2d(padding_mode='reflect').
    for entry_id in ["scatter_add", "index_add", "index_copy", "cumsum", "reflection_pad2d_backward"]:
        assert CAT.entry(entry_id).report and CAT.entry(entry_id).rule == "TRP401"
    conv2d = {a.entry_id: a for a in CAT.apis_for("torch.nn.Conv2d", (2, 13))}
    assert not CAT.entry(conv2d["convolution_cudnn"].entry_id).report
    assert conv2d["reflection_pad2d_backward"].when[0].value == "reflect"



def test_duplicate_index_refinements_follow_the_condition_text():
    # The matcher lets constant writes and distinct indices through only for the entries whose
    # hazard the catalogue names as duplicate indices; a new such entry must join the list.
    named = {e.id for e in CAT.entries if "duplicate indices" in e.condition}
    assert named == DUPLICATE_INDEX_ENTRIES

def test_every_entry_is_verified_with_cuda_status():
    for e in CAT.entries:
        assert e.verified.get("cpu") in ("raises", "no error"), e.id
        # what the CUDA record says (tests/catalog/test_catalog_cuda_record.py checks which)
        assert e.verified.get("cuda", "").split(";")[0] in (
            "raises", "no error", "no error, bitwise-identical repeats", "mixed", "not run: no CUDA case"), e.id
    assert CAT.meta["verified_cuda"].startswith("torch 2.11.0+cu130")


def test_docstring_status_agrees_with_bullets():
    referenced = {s for x in CAT.docstring_exclusions for s in x.see}
    for e in CAT.entries:
        status, bullets = e.docstring.status, e.docstring.bullets
        if status in ("listed", "incomplete"):
            assert bullets, f"{e.id}: status {status} but no docstring bullet"
        else:
            assert not bullets, f"{e.id}: status {status} must not claim a bullet"
        if status in ("stale", "overbroad", "overbroad_and_incomplete", "contradicted"):
            assert e.id in referenced, f"{e.id}: {status} but no docstring_exclusions entry points to it"


def test_exclusions_are_explained_and_point_to_entries():
    ids = {e.id for e in CAT.entries}
    assert CAT.docstring_exclusions
    for x in CAT.docstring_exclusions:
        assert x.kind in ("stale", "overbroad"), x.id
        assert x.section in ("throws", "deterministic_alternative"), x.id
        assert len(x.reason) > 30, x.id
        assert x.see and set(x.see) <= ids, x.id
        assert x.bullet == normalize(x.bullet), x.id


def test_no_bullet_claimed_twice():
    seen: dict[tuple[str, str], str] = {}
    for e in CAT.entries:
        for b in e.docstring.bullets:
            key = (e.docstring.section, b)
            assert key not in seen, f"{b!r}: {seen[key]} and {e.id}"
            seen[key] = e.id
    for x in CAT.docstring_exclusions:
        assert (x.section, x.bullet) not in seen, f"{x.bullet!r} is both mapped and excluded"


def test_version_fields_are_well_formed():
    for e in CAT.entries:
        if e.since and e.until:
            assert e.since < e.until, e.id
        if e.since or e.until:
            assert e.history, f"{e.id}: a version bound needs a history note"
        for a in e.apis:
            if a.since and a.until:
                assert a.since < a.until


# ----------------------------------------------------------------------------- docstring mapping (synthetic)

_SYNTHETIC_DOC = """Sets whether PyTorch operations must use "deterministic" algorithms.

    The following normally-nondeterministic operations will act
    deterministically when ``mode=True``:

        * :func:`torch.index_add` when called on CUDA tensor
        * :func:`torch.Tensor.__getitem__` when attempting to differentiate a CPU tensor
          and the index is a list of tensors

    The following normally-nondeterministic operations will throw a
    :class:`RuntimeError` when ``mode=True``:

        * :class:`torch.nn.MaxUnpool1d`
        * :func:`torch.nn.functional.interpolate` when attempting to differentiate a CUDA tensor
          and one of the following modes is used:

          - ``linear``
          - ``bilinear``

        * :func:`torch.cumsum` when called on a CUDA tensor when dtype is floating point or complex
        {extra}
    In addition, several operations fill uninitialized memory.
"""


def test_parse_bullets_synthetic():
    bullets = parse_bullets(_SYNTHETIC_DOC.format(extra=""))
    assert [b.section for b in bullets] == ["deterministic_alternative"] * 2 + ["throws"] * 4
    assert bullets[1].text == (
        "torch.Tensor.__getitem__ when attempting to differentiate a CPU tensor and the index is a list of tensors"
    )
    assert bullets[3].text.endswith("one of the following modes is used: linear")
    assert bullets[4].text.endswith("one of the following modes is used: bilinear")


def test_parse_bullets_requires_both_sections():
    with pytest.raises(ValueError, match="throws"):
        parse_bullets("Intro.\n\n    The following normally-nondeterministic operations will act\n"
                      "    deterministically when ``mode=True``:\n\n        * a\n")  # fmt: skip


def test_synthetic_docstring_maps_excludes_and_reports_unmapped():
    mapping = map_bullets(_SYNTHETIC_DOC.format(extra=""), CAT)
    assert mapping.ok
    assert set(mapping.mapped.values()) == {("index_add",), ("index_put_accumulate_cpu",),
                                            ("max_unpool_forward",), ("upsample_linear1d_backward",)}  # fmt: skip
    assert {x.id for x in mapping.excluded.values()} == {"interpolate_bilinear", "cumsum"}

    extra = "* :func:`torch.frobnicate` when called on a CUDA tensor\n"
    mapping = map_bullets(_SYNTHETIC_DOC.format(extra=extra), CAT)
    assert not mapping.ok
    assert mapping.unmapped == [DocBullet("throws", "torch.frobnicate when called on a CUDA tensor")]


def test_bullet_in_the_wrong_section_is_reported():
    # index_add is a deterministic alternative: listing it under "throw" must not count as mapped.
    doc = _SYNTHETIC_DOC.format(extra="* :func:`torch.index_add` when called on CUDA tensor\n")
    mapping = map_bullets(doc, CAT)
    assert DocBullet("throws", "torch.index_add when called on CUDA tensor") in mapping.unmapped
    assert not mapping.ok


# ----------------------------------------------------------------------------- rendering


def test_format_catalog_gates_by_version():
    new = format_catalog((2, 13))
    old = format_catalog("2.9.1")
    assert "torch 2.13" in new and "TRP402" in new and "TRP401" in new
    assert "kthvalue_cuda" in old and "Not in effect in this version: kthvalue_cuda" in new
    assert "max_pool3d_backward_with_indices" in old.split("Not in effect in this version:")[1]
    assert "torch.nn.functional.interpolate [mode='linear']" in new
    assert "verified on CUDA: torch 2.11.0+cu130" in new
    assert "adaptive_avg_pool_global" in new  # the traps are listed too
    assert max(len(line) for line in new.splitlines()) <= 140


def test_format_catalog_all_versions():
    text = format_catalog(None)
    assert "all versions" in text and "Not in effect" not in text
    for e in CAT.entries:
        assert f"  {e.id} " in text
