#!/usr/bin/env bash
# GPU checks and benchmarks in one run, on a machine with an NVIDIA GPU and the `gpu` extra
# (CuPy, numba-cuda; JAX with CUDA for the peers):
#
#     bash benchmarks/gpu.sh [results-folder [part ...]]   # default: gpu-results/, all parts
#     LIMIT_PERCENT=50 bash benchmarks/gpu.sh out checks     # every step's time limit halved
#
# Parts: checks (the CUDA target's cases and the CuPy tests), suite (tests/ir, tests/loops and
# tests/classical with every program compiled for the GPU), classical (classical_ad.py;
# CLASSICAL_ONLY="gmm kmeans" picks workloads, CLASSICAL_LIMIT=300 gives them more seconds),
# gradients (gradients.py: the CuPy simulator against JAX on the same GPU), batching
# (batching.py, batched_loops.py and wide_gates.py: vmap's batched simulation on CuPy, of an
# ansatz, of loops on measurements and of a random circuit of wide gates, against a loop over
# the members on the CPU), shots (loops.py: sample mode's batch of shots and the batched
# parameter-shift estimator on CuPy, beside the same on the host's Numba kernels);
# quantum = gradients batching shots.
#
# Correctness first, then timings, each part in order. Each step has a time limit and
# writes its log as it goes, so a step cut short still reports.
set -u
cd "$(dirname "$0")/.."
results=${1:-${OUT:-gpu-results}}
shift $(($# > 0 ? 1 : 0))
parts=${*:-checks suite classical quantum}
mkdir -p "$results"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export XLA_PYTHON_CLIENT_PREALLOCATE=false   # JAX shares the GPU with CuPy and numba.cuda
export NUMBA_CACHE_DIR=/tmp/qdiff-numba-cache QDIFF_CACHE_DIR=/tmp/qdiff-cache
unset NUMBA_ENABLE_CUDASIM

step() {  # step NAME SECONDS COMMAND...: run with a limit, log to $results/NAME.log
    local name=$1 limit=$(($2 * ${LIMIT_PERCENT:-100} / 100)); shift 2
    local start=$SECONDS
    echo "== $name (limit ${limit}s)"
    timeout "$limit" "$@" >"$results/$name.log" 2>&1
    local rc=$?
    echo "   rc=$rc in $((SECONDS - start)) s"
    tail -n "${TAIL:-15}" "$results/$name.log"
}

echo "== machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python -c "import numpy, numba, numba_cuda, cupy; from numba import cuda; \
print('numpy', numpy.__version__, '| numba', numba.__version__, '| numba-cuda', \
numba_cuda.__version__, '| cupy', cupy.__version__, '|', cuda.get_current_device().name)"

checks() {  # side by side: 16 cores, one GPU
    TAIL=3 step cuda_lowering 120 python -m tests.compiler.cuda_lowering &
    TAIL=0 step cuda_cases 120 python -m tests.compiler.cuda_cases &
    TAIL=30 step cupy_tests 150 python -m pytest -q -p no:cacheprovider -rf \
        tests/quantum/test_cupy_programs.py tests/quantum/simulator/test_simulator.py \
        tests/quantum/execution/test_shot_states.py \
        tests/quantum/simulator/test_cupy_on_a_stand_in.py -k "cupy or gpu or GPU or nvcc or h100"
    wait
    python - "$results/cuda_cases.log" <<'SUMMARY'
import json, sys
lines = [line for line in open(sys.argv[1]) if line.startswith("{")]
cases = json.loads(lines[-1]) if lines else {}
failed = {name: text.strip().splitlines()[-1] for name, text in cases.items() if text != "ok"}
print(f"CUDA target cases on the device: {len(cases) - len(failed)} of {len(cases)} ok")
for name, last in failed.items():
    print(f"  {name}: {last[:160]}")
SUMMARY
}

suite() {  # every program call of these suites compiled for the GPU and compared
    TAIL=12 step checked_suite 300 python -m pytest -q -p no:cacheprovider -rf -n 12 \
        --backend numba-cuda-checked tests/ir tests/loops tests/classical
}

classical() {
    TAIL=20 step classical_ad "${CLASSICAL_LIMIT:-150}" python benchmarks/classical_ad.py --clock wall \
        --engines "jax jit" --backend numba-cuda ${CLASSICAL_ONLY:+--only $CLASSICAL_ONLY}
}

gradients() {
    TAIL=25 step gradients 50 python benchmarks/gradients.py --sizes 20 24 --layers 10 \
        --observables Z --methods qdiff jax --backend cupy --repeats 3
}

batching() {
    TAIL=8 step batching 45 python benchmarks/batching.py --sizes 12 16 --batch 64 \
        --backend cupy --no-lightning --repeats 3
    TAIL=5 step batched_loops 60 python benchmarks/batched_loops.py --backend cupy --repeats 2
    TAIL=5 step wide_gates 25 python benchmarks/wide_gates.py --backend cupy --repeats 2
}

shots() {  # the host's batch (one thread) beside the GPU's
    TAIL=12 step shots_cpu 60 python benchmarks/loops.py --only-sampling &
    TAIL=12 step shots_gpu 60 python benchmarks/loops.py --only-sampling --backend cupy
    wait
}

quantum() { gradients; batching; shots; }

for part in $parts; do "$part"; done
