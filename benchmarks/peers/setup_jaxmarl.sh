#!/usr/bin/env bash
# Makes the optional virtual environment that benchmarks/peers/compare_jaxmarl.py runs JaxMARL's own IPPO in (and
# benchmarks/peers/compare_jaxmarl_pqn.py its PQN-VDN: baselines/QLearning/pqn_vdn_ff.py; benchmarks/peers/jaxmarl_regression.py
# the scripts of its minimal baseline set: IPPO, MAPPO, QMIX and VDN on MPE and SMAX).
#
#     JAXMARL_SRC=/path/to/JaxMARL bash benchmarks/peers/setup_jaxmarl.sh [VENV_DIR]   # default: benchmarks/.jaxmarl-venv
#
# JaxMARL's baselines (baselines/IPPO/ippo_ff_mpe.py) are not in the jaxmarl pip package: they live in
# a checkout of https://github.com/FLAIROx/JaxMARL, which JAXMARL_SRC names (nothing of JaxMARL's code is
# in marl). The venv gets jaxmarl (CPU jax/jaxlib; it brings chex, gymnax, safetensors) and what the IPPO, MAPPO and
# QLearning scripts import: flax, optax, distrax, flashbax (the QMIX/VDN replay buffers), hydra-core, omegaconf,
# matplotlib. wandb is not installed:
# benchmarks/peers/jaxmarl_baseline.py (which runs any of its baseline scripts) puts an offline stub in its place. About 1-2 minutes.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${1:-$(dirname "$here")/.jaxmarl-venv}"
python="${PYTHON:-python3}"
src="${JAXMARL_SRC:?set JAXMARL_SRC to a JaxMARL checkout (git clone https://github.com/FLAIROx/JaxMARL)}"
script="$src/baselines/IPPO/ippo_ff_mpe.py"
[ -f "$script" ] || { echo "no $script: JAXMARL_SRC must be a JaxMARL checkout" >&2; exit 1; }

echo "creating $venv with jaxmarl, jax (CPU), flax, optax, distrax, hydra-core"
"$python" -m venv "$venv"
"$venv/bin/pip" install -q "jaxmarl>=0.2" jax flax optax distrax "flashbax>=0.1.0" "hydra-core>=1.3.2" omegaconf matplotlib
echo "$src" > "$venv/JAXMARL_SRC"  # compare_jaxmarl.py reads the checkout from here
"$venv/bin/python" -c 'import jax, jaxmarl, distrax, flashbax, hydra, chex, optax; print("ok: jax", jax.__version__, jax.devices())'
