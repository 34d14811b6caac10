"""Compare a fresh run of run_on_gpu.sh with the committed CUDA record, case by case.

    python3 tests/catalog/cuda/compare_run.py RUN_DIR

RUN_DIR holds what run_on_gpu.sh wrote (strict.json, warn.json, extra.json, emb.json,
environment.json). An outcome is the kernel an error names (or none), whether a warning came
(warn-only), whether two runs repeated, a variation count, a fact, an environment case. Prints
each difference and the totals; exit status 1 when any differ. Needs no torch.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).parent
RECORD = HERE / "torch-2.11.0+cu130-h200.json"
ENVIRONMENT_RECORD = HERE / "environment-run.json"


def kernel(message: str | None) -> str | None:
    # The record keeps the message without its exception type; a raw run has it.
    return None if message is None else message.removeprefix("RuntimeError: ").split(" ")[0]


def differences(run: Path) -> tuple[int, list[str]]:
    record = json.loads(RECORD.read_text())
    environment_record = json.loads(ENVIRONMENT_RECORD.read_text())["cases"]
    load = lambda name: json.loads((run / f"{name}.json").read_text())  # noqa: E731
    strict, warn, extra = load("strict"), load("warn"), load("extra")
    embedding, environment = load("emb"), load("environment")
    outcomes, found = 0, []

    def compare(what: str, got, expected) -> None:
        nonlocal outcomes
        outcomes += 1
        if got != expected:
            found.append(f"{what}: run {got!r}, record {expected!r}")

    for result in strict["results"]:
        known = record["cases"][result["id"]]
        compare(f"strict {result['id']}",
                (kernel(result["raised"]), result.get("repeat_equal", known.get("repeat_equal"))),
                (kernel(known["raised"]), known.get("repeat_equal")))
    for result in warn["results"]:
        known = record["warn_only"][result["id"]]
        compare(f"warn-only {result['id']}",
                (kernel(result["raised"]), bool(result.get("warnings"))),
                (kernel(known["raised"]), known["warned"]))
    for case, result in extra["cases"].items():
        known = record["cases"][case]
        compare(f"extra {case}", (kernel(result["raised"]), result.get("repeat_equal")),
                (kernel(known["raised"]), known["repeat_equal"]))
    for counts in (extra["variation"], embedding["variation"]):
        for case, count in counts.items():
            compare(f"variation {case}", count, record["variation"].get(case))
    for fact, value in extra["facts"].items():
        compare(f"fact {fact}", value, record["facts"].get(fact))
    for case, value in environment["cases"].items():
        compare(f"environment {case}", value, environment_record.get(case))
    return outcomes, found


def main() -> int:
    outcomes, found = differences(Path(sys.argv[1]))
    for line in found:
        print(line)
    print(f"{outcomes} outcomes compared, {len(found)} different")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
