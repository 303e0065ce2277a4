#!/usr/bin/env bash
# The batched path's comparison table on a CUDA GPU: marl (VMAS and JaxMARL envs, env + policy + learner on the
# GPU) against JaxMARL's own IPPO, then marl's sampling against VMAS stepped alone.
#
#     JAXMARL_SRC=/path/to/JaxMARL bash benchmarks/cuda_table.sh OUT_DIR [SEEDS] [ENV_STEPS]
#
# Needs a python with torch (CUDA), jax (CUDA), vmas, jaxmarl and what JaxMARL's IPPO script imports
# (distrax, flax, optax, hydra-core): JaxMARL's side runs in the same interpreter. First the CUDA tests
# (tests/test_cuda_batched.py): a failure there stops the script before the long runs.
set -euo pipefail

out="${1:?OUT_DIR}"
seeds="${2:-2}"
steps="${3:-4000000}"
src="${JAXMARL_SRC:?set JAXMARL_SRC to a JaxMARL checkout (its baselines/IPPO)}"
python="${PYTHON:-python3}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1

nvidia-smi -L
"$python" -c 'import torch, jax; print("torch", torch.__version__, torch.cuda.get_device_name(0), "| jax", jax.__version__, jax.devices())'
"$python" -m pytest -q -x "$here/../tests/test_cuda_batched.py" -k "cuda" 2>&1 | tee "$out/cuda_tests.txt"

"$python" "$here/peers/compare_jaxmarl.py" --device cuda --settings 4096x32 --seeds "$seeds" --env-steps "$steps" \
    --jaxmarl-python "$python" --jaxmarl-src "$src" --json "$out/compare_jaxmarl_cuda.json" 2>&1 | tee "$out/compare_jaxmarl_cuda.txt"

for scenario in simple_spread navigation; do
    "$python" "$here/speed/vmas_rate.py" --device cuda --scenario "$scenario" --envs 4096 16384 --fragment 32 --seconds 2 \
        --repeats 3 --dict-max 0 --copies-max 0 --json "$out/vmas_rate_cuda_$scenario.json" 2>&1 | tee -a "$out/vmas_rate_cuda.txt"
done
