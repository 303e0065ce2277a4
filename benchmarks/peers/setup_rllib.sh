#!/usr/bin/env bash
# Makes the optional virtual environment that benchmarks/peers/compare_rllib.py runs Ray RLlib in.
#
#     bash benchmarks/peers/setup_rllib.sh [VENV_DIR]      # default: benchmarks/.rllib-venv (gitignored)
#
# RLlib is never a dependency of marl: it lives only in this venv. The venv gets the same Ray
# version as marl's own environment (read from .venv when it exists), torch 2.13.0 (the CPU
# build pip finds first), PettingZoo and mpe2 for the multi-agent task. About 1-2 minutes.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$(dirname "$here")")"
venv="${1:-$(dirname "$here")/.rllib-venv}"
python="${PYTHON:-python3}"

# The Ray version marl runs with, so both sides of the comparison use the same Ray.
ray_version="${RAY_VERSION:-}"
if [[ -z "$ray_version" && -x "$root/.venv/bin/python" ]]; then
    ray_version="$("$root/.venv/bin/python" -c 'import ray; print(ray.__version__)' 2>/dev/null || true)"
fi
ray_version="${ray_version:-2.60.0}"

echo "creating $venv with ray[rllib]==$ray_version, torch==2.13.0, pettingzoo, mpe2"
"$python" -m venv "$venv"
"$venv/bin/pip" install -q torch==2.13.0
"$venv/bin/pip" install -q "ray[rllib]==$ray_version" pettingzoo mpe2 "gymnasium>=1.0" psutil
"$venv/bin/python" -c 'import ray, torch, ray.rllib, pettingzoo, mpe2; print("ok: ray", ray.__version__, "torch", torch.__version__)'
