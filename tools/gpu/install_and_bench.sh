#!/usr/bin/env bash
# On a GPU machine without a package index (Python 3.12, CUDA build of PyTorch): install the wheels gathered by
# tools/gpu/gather_wheels.sh offline into a virtual environment that sees the machine's torch, then run the GPU
# benchmarks of the heavy figures. Run from the repository root:
#
#   bash tools/gpu/install_and_bench.sh [wheel folder] [extra bench arguments...]
#
# Output goes to stdout and, when $OUT is set (e.g. a job runner's folder of files to bring back), to
# $OUT/bench_gpu.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
WHEELS="${1:-$(ls -d wheelhouse/py312/* 2>/dev/null | head -1)}"
shift || true
[ -d "$WHEELS" ] || { echo "install_and_bench: no wheel folder (run tools/gpu/gather_wheels.sh where PyPI is reachable)" >&2; exit 2; }
PY="${PYTHON:-python3}"
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
# into a folder of its own, beside the machine's environment (whose CUDA torch stays the one imported)
"$PY" -m pip install --no-index --no-deps --find-links "$WHEELS" --target .gpu-site -q -r "$WHEELS/requirements.txt"
export PYTHONPATH="$PWD/.gpu-site:$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
LOG="${OUT:+$OUT/bench_gpu.txt}"
run() { if [ -n "$LOG" ]; then "$@" 2>&1 | tee -a "$LOG"; else "$@"; fi; }
run "$PY" -m dpfl bench kato2024 --figures fig5 fig10b "$@"
run "$PY" -m dpfl bench bietti2022 --figures fig1d "$@"
