"""Path states that differ only in a runtime condition's truth are joined back into one.

The interpreter keeps one state per set of runtime assumptions. An early `return` under a
condition splits a function's paths, and they meet again at its end: joined, a program keeps
one state where it had two per call, and never reaches MAX_STATES (where every assumption is
forgotten and correlated branches stop being told apart).
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import reported
from torchrepro_lint.project.interpreter.states import PathState, _joined, _merged_cubes

CONDITIONS = ("a", "b", "c", "d")


def _runs(cubes) -> set[tuple[bool, ...]]:
    """Every valuation of CONDITIONS that agrees with at least one cube."""
    out = set()
    for values in itertools.product((True, False), repeat=len(CONDITIONS)):
        valuation = dict(zip(CONDITIONS, values))
        if any(all(valuation[c] == t for c, t in cube) for cube in cubes):
            out.add(values)
    return out


def test_complementary_cubes_become_their_common_part():
    kept = frozenset({("a", True)})
    assert _merged_cubes([kept | {("b", True)}, kept | {("b", False)}]) == [kept]


def test_a_cube_inside_another_adds_no_run():
    assert _merged_cubes([frozenset({("a", True)}), frozenset({("a", True), ("b", False)})]) == [
        frozenset({("a", True)})
    ]


def test_cubes_that_do_not_combine_are_kept():
    cubes = [frozenset({("a", True), ("b", True)}), frozenset({("a", False), ("b", False)})]
    assert _merged_cubes(cubes) == cubes


_cube = st.dictionaries(st.sampled_from(CONDITIONS), st.booleans(), max_size=len(CONDITIONS)).map(
    lambda d: frozenset(d.items())
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_cube, min_size=1, max_size=8))
def test_merging_keeps_exactly_the_same_runs_in_no_more_cubes(cubes):
    merged = _merged_cubes(cubes)
    assert _runs(merged) == _runs(cubes)
    assert len(merged) <= len(set(cubes))


def _merged_plainly(cubes):
    """The merge as first written: every literal of every cube looks for its partner, and every
    cube is compared with every other for subsumption."""
    merged = True
    while merged:
        merged = False
        cubes = list(dict.fromkeys(cubes))
        position = {cube: i for i, cube in enumerate(cubes)}
        for i, cube in enumerate(cubes):
            if cube is None:
                continue
            for condition, truth in sorted(cube):
                rest = cube - {(condition, truth)}
                partner = rest | {(condition, not truth)}
                j = position.get(partner)
                if j is not None and cubes[j] == partner:
                    cubes[i], cubes[j] = rest, None
                    merged = True
                    break
        cubes = [cube for cube in cubes if cube is not None]
    return [cube for cube in cubes if not any(other < cube for other in cubes)]


@settings(max_examples=500, deadline=None)
@given(st.lists(_cube, min_size=1, max_size=12))
def test_the_merge_gives_what_the_plain_merge_gives_in_its_order(cubes):
    # Only cubes on the same conditions are paired, and only smaller cubes compared for
    # subsumption: the same cubes in the same order (the order reaches the program's facts).
    assert _merged_cubes(cubes) == _merged_plainly(cubes)


def test_a_cube_with_two_partners_merges_with_the_same_one_however_its_set_was_built():
    # {a, b} can merge with {not a, b} or with {a, not b}: which one must not depend on the
    # frozenset's internal layout (string hashes differ between processes), and a merge kept
    # from an earlier join is the one the same cubes would get now.
    first = frozenset([("a", True), ("b", True)])
    built_otherwise = frozenset([("b", True), ("a", True)])
    others = [frozenset({("a", False), ("b", True)}), frozenset({("a", True), ("b", False)})]
    expected = [frozenset({("b", True)}), frozenset({("a", True), ("b", False)})]
    assert _merged_cubes([first, *others]) == expected
    assert _merged_cubes([built_otherwise, *others]) == expected


def test_states_with_different_switches_are_never_joined():
    seeded = PathState(torch_seeded=True, assumptions=frozenset({("a", True)}))
    unseeded = PathState(assumptions=frozenset({("a", False)}))
    assert _joined([seeded, unseeded]) == [seeded, unseeded]


def test_twins_join_into_the_state_without_the_condition():
    common = {("args.fast", True)}
    twins = [
        PathState(claim=None, assumptions=frozenset(common | {("args.skip", truth)})) for truth in (True, False)
    ]
    assert _joined(twins) == [PathState(assumptions=frozenset(common))]


# A regression: before the join, each call below doubled the paths; at 64 every assumption was
# forgotten, and the seed under `not args.warm_start` was taken to follow the warm-start draw.
WARM_START = """\
import os

import torch


def stop_early(flag):
    if flag:
        return
    os.environ["STAGE"] = "next"


def main(args):
    if args.warm_start:
        noise = torch.rand(3)
    stop_early(args.skip_a)
    stop_early(args.skip_b)
    stop_early(args.skip_c)
    stop_early(args.skip_d)
    stop_early(args.skip_e)
    stop_early(args.skip_f)
    if not args.warm_start:
        torch.manual_seed(0)


if __name__ == "__main__":
    main(None)
"""


def test_many_early_returns_keep_correlated_branches_apart(lint):
    assert reported(lint({"train.py": WARM_START}, {"select": ["TRP105"]}), lint.root) == set()


def test_the_same_program_seeding_after_the_draw_is_still_reported(lint):
    source = WARM_START.replace("    if not args.warm_start:\n        torch.manual_seed(0)", "    torch.manual_seed(0)")
    assert reported(lint({"train.py": source}, {"select": ["TRP105"]}), lint.root) == {("train.py", 21, "TRP105")}
