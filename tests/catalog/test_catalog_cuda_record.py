"""The catalogue against a recorded run on a real GPU (no GPU or torch needed here).

``cuda/torch-*.json`` holds what ``cuda/run_on_gpu.sh`` saw on a CUDA machine: for every case of
``shared/tools/verify_on_cuda.py`` (and ``cuda/extra_cases.py``) whether it raised under
``torch.use_deterministic_algorithms(True)`` and whether a run repeated bit for bit. Two checks:

* ``verified.cuda`` in ops.toml says what the record says (one source: the record).
* The record agrees with the catalogue at the recorded torch version: an entry that holds there
  and throws raised with its kernel's text; a deterministic alternative that holds there did not
  raise and repeated; a trap did not raise. Where a fact is version-gated (the entry does not
  hold at that version) the record must show the older behaviour the catalogue describes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchrepro_lint.catalog import load_catalog, parse_version

RECORD_PATH = Path(__file__).parent / "cuda" / "torch-2.11.0+cu130-h200.json"
RECORD = json.loads(RECORD_PATH.read_text("utf-8"))
RECORD_VERSION = parse_version(RECORD["torch"])
CAT = load_catalog()
NOT_RUN = "not run: no CUDA case"

# Cases whose result at the recorded version differs from the entry's newest behaviour, with the
# catalogue's own account of why (its `history`); checked below rather than skipped.
OLDER_BEHAVIOUR = {
    "grid_sample_2d_align_corners": "grid_sampler_backward",  # the cuDNN sampler's alert came after 2.11
    "grid_sample_align_corners_cudnn": "grid_sampler_backward",
}


def _tables():
    """(key, verified dict) of every catalogue record that can carry a CUDA verification."""
    for e in CAT.entries:
        yield f"ops.{e.id}", e.verified
    for n in CAT.not_flagged:
        yield f"not_flagged.{n.id}", n.verified or {}
    for special in CAT.special:
        yield f"{special.table}.{special.id}", (special.raw or {}).get("verified", {})


def cases_of(key: str) -> dict[str, dict]:
    return {cid: c for cid, c in RECORD["cases"].items() if c["entry"] == key}


def cuda_summary(key: str) -> str:
    """What the record says about one catalogue record, as ops.toml's verified.cuda starts."""
    cases = cases_of(key)
    if not cases:
        return NOT_RUN
    outcomes = {"raises" if c["raised"] else "no error" for c in cases.values()}
    if len(outcomes) > 1:
        return "mixed"
    outcome = outcomes.pop()
    if outcome == "no error" and all(c["repeat_equal"] for c in cases.values()):
        outcome += ", bitwise-identical repeats"
    return outcome


def test_record_is_for_one_cuda_torch():
    assert RECORD_VERSION == (2, 11) and "+cu" in RECORD["torch"]
    assert len(RECORD["cases"]) >= 100


def test_verified_cuda_field_matches_the_record():
    assert CAT.meta["verified_cuda"].startswith(f"torch {RECORD['torch']}")
    for key, verified in _tables():
        summary = cuda_summary(key)
        text = verified.get("cuda", "")
        assert text == summary or text.startswith(summary + "; "), (key, text, summary)
        if summary != NOT_RUN:
            assert verified.get("cuda_torch") == RECORD["torch"].split("+")[0], key


def test_every_recorded_case_belongs_to_a_catalogue_record():
    keys = {key for key, _ in _tables()}
    assert {c["entry"] for c in RECORD["cases"].values()} <= keys


@pytest.mark.parametrize("entry", [e for e in CAT.entries if cases_of(f"ops.{e.id}")], ids=lambda e: e.id)
def test_record_agrees_with_the_entry_at_its_version(entry):
    for cid, case in cases_of(f"ops.{entry.id}").items():
        if cid in OLDER_BEHAVIOUR:
            continue
        if not entry.holds_in(RECORD_VERSION):
            continue  # version-gated: see test_version_gated_entries_show_the_older_behaviour
        if entry.deterministic_mode == "throws":
            assert case["raised"] and any(t in case["raised"] for t in entry.error_texts), (cid, case)
        else:
            assert case["raised"] is None and case["repeat_equal"], (cid, case)


def test_traps_do_not_raise_on_cuda():
    checked = 0
    for n in CAT.not_flagged:
        for cid, case in cases_of(f"not_flagged.{n.id}").items():
            if n.holds_in(RECORD_VERSION):
                assert case["raised"] is None, (cid, case)
                checked += 1
    assert checked == sum(c["entry"].startswith("not_flagged.") for c in RECORD["cases"].values()) > 0


def test_version_gated_entries_show_the_older_behaviour():
    # MaxPool3d(return_indices=True): no decomposition in 2.11, so the native kernel still raises.
    pool3d = CAT.entry("max_pool3d_backward_with_indices")
    assert not pool3d.holds_in(RECORD_VERSION) and pool3d.since == (2, 12)
    assert "max_pool3d_with_indices_backward_cuda" in RECORD["cases"]["max_pool3d_return_indices_ok"]["raised"]
    assert RECORD["facts"]["max_pool3d_with_indices_has_decomposition"] is False
    # kthvalue's alert ended at 2.10.
    assert not CAT.entry("kthvalue_cuda").holds_in(RECORD_VERSION)
    assert RECORD["cases"]["kthvalue_cuda"]["raised"] is None
    # The cuDNN grid sampler (4-D, bilinear, zeros, align_corners=True) neither raised nor
    # repeated; without cuDNN the same call reached the alerting native kernel.
    assert "after 2.11.0" in CAT.entry("grid_sampler_backward").history
    assert RECORD["cases"]["grid_sample_align_corners_cudnn"] == {
        "entry": "ops.grid_sampler_backward", "raised": None, "repeat_equal": False}
    assert "grid_sampler_2d_backward_cuda" in RECORD["cases"]["grid_sample_align_corners_no_cudnn"]["raised"]


def test_compile_and_environment_cases():
    # torch.compile traces mode(dim) with fake CUDA tensors: the meta alert is the cause.
    traced = RECORD["cases"]["mode_compiled"]
    assert traced["raised"] and "median CUDA with indices output" in traced["cause"]
    # From 2.10 on cuBLAS matmuls do not need CUBLAS_WORKSPACE_CONFIG (the environment entry ends at 2.10).
    cublas = next(s for s in CAT.special if (s.table, s.id) == ("environment", "cublas_workspace_config"))
    assert not cublas.holds_in(RECORD_VERSION)
    assert RECORD["cases"]["cublas_mm_ok"] == {"entry": "not_flagged.cublas_workspace", "raised": None, "repeat_equal": True}
    # The compiled-backward mode check raises even with warn_only=True.
    assert RECORD["warn_only"]["compiled_backward_mode_flip"]["raised"]


def test_variation_backs_the_rules():
    """With deterministic mode off the flagged atomics-based kernels gave a new result on most
    runs; TRP401's alternatives repeated once the mode was on; warn_only leaves TRP402's ops varying."""
    var = RECORD["variation"]
    for op in ("scatter_add_", "index_add_", "bilinear_backward"):
        assert var[f"{op} det=False"] > 1 and var[f"{op} det=True"] == 1, op
    for op in ("bicubic_backward", "grid_sample_backward_native", "bincount_weights"):
        assert var[f"{op} det=False"] > 1 and var[f"{op} det=True"] > 1, op


def test_environment_and_compile_entries_on_cuda():
    """environment_cases.py: the [compile.*] and [environment.*] entries (verify_on_cuda.py has no
    case for them), against what each entry's condition says."""
    cases, var = RECORD["cases"], RECORD["variation"]
    # Deterministic mode fills new CUDA memory (NaN, max int), and only with the flag on.
    filled = cases["fill_uninitialized_memory"]["filled"]
    assert all(filled["mode on"][k] for k in filled["mode on"] if k != "empty_any_seven")
    for off in ("mode off", "mode on, fill_uninitialized_memory=False"):
        assert filled[off]["empty_any_seven"] and not filled[off]["empty_all_nan"], off
    # The mode turns Inductor's own deterministic switch on.
    assert cases["inductor_config_deterministic"]["config"] == {"has_attribute": True, "default": False, "with_mode_on": True}
    # Compiled scatter_add / index_put(accumulate=True) vary with the mode off and repeat with it on.
    for op in ("compiled_scatter_add", "compiled_index_put_accumulate"):
        assert var[f"{op} det=False"] > 1 and var[f"{op} det=True"] == 1, op
        assert cases[op]["raised"] is None and cases[op]["repeat_equal"], op
    assert var["compiled_max_pool2d_backward det=True"] == 1
    # Not checkable on this device, and said so in ops.toml.
    assert "CUTE flash attention library is not available" in RECORD["facts"]["flex_attention_flash_backward"]
    assert RECORD["facts"]["cutlass_dsl_installed"] is False
