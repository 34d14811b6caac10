#!/bin/bash
# How tests/catalog/cuda/*.json was made: run on a machine with a CUDA build of torch, from the
# repository root, with ../shared beside it (or VERIFY pointing at verify_on_cuda.py).
# Writes strict.json, warn.json, extra.json, emb.json and environment.json under $OUT (default: .);
# tests/catalog/cuda/compare_run.py $OUT compares them with the record, case by case.
set -u
OUT=${OUT:-.}
VERIFY=${VERIFY:-../shared/tools/verify_on_cuda.py}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch,sys;print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.backends.cudnn.version())"
env -u CUBLAS_WORKSPACE_CONFIG python3 "$VERIFY" --json "$OUT/strict.json"
env -u CUBLAS_WORKSPACE_CONFIG python3 "$VERIFY" --warn-only --json "$OUT/warn.json"
OUT=$OUT python3 tests/catalog/cuda/extra_cases.py
OUT=$OUT python3 tests/catalog/cuda/embedding_variation.py
OUT=$OUT python3 tests/catalog/cuda/environment_cases.py
