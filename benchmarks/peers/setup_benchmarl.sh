#!/usr/bin/env bash
# Makes the optional virtual environment that benchmarks/peers/compare_benchmarl.py runs BenchMARL in.
#
#     bash benchmarks/peers/setup_benchmarl.sh [VENV_DIR]      # default: /work/venvs/benchmarl
#
# BenchMARL is never a dependency of marl: it lives only in this venv. torch 2.13.0 (CPU wheel)
# goes in first and torchvision is pinned to its matching release, so pip does not pull a newer
# torch with CUDA packages; PettingZoo and mpe2 provide simple_spread (torchrl looks for MPE
# under `pettingzoo.mpe`, which PettingZoo 1.27 removed: benchmarl_tasks.py points it at mpe2);
# vmas (1.5.2, the release installed beside marl here) provides the VMAS balance and navigation tasks.
# About 2-4 minutes.
set -euo pipefail

venv="${1:-${BENCHMARL_VENV:-/work/venvs/benchmarl}}"
python="${PYTHON:-python3}"

echo "creating $venv with benchmarl, torch==2.13.0 (CPU), torchvision==0.28.*, pettingzoo, mpe2, vmas"
"$python" -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
"$venv/bin/pip" install -q torch==2.13.0  # the CPU build pip finds first, before anything can pull another
"$venv/bin/pip" install -q torch==2.13.0 torchvision==0.28.* benchmarl pettingzoo mpe2 "vmas==1.5.2" "gymnasium>=1.0" psutil
"$venv/bin/python" -c 'import benchmarl, torch, torchrl, pettingzoo, mpe2, vmas; print("ok: benchmarl", benchmarl.__version__, "torchrl", torchrl.__version__, "torch", torch.__version__)'
