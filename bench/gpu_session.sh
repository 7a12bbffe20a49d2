#!/usr/bin/env bash
# Everything this project runs on a CUDA machine, in one go (the device tool's
# single H200 in this project's sessions). Writes logs and JSON into $1
# (default bench/results). The GPU image has torch but no libcst: the runtime
# needs none, and the codemod-runtime test reads a pre-wrapped fixture.
#   bash bench/gpu_session.sh [OUTDIR] [--guard]
# --guard: only the guard's and the copies' part (its GPU tests, gpu_truth on
# the example and on gpu_copies.py's program in the cheap mode, the overheads,
# gpu_copies), for a session with little device time.
set -uo pipefail
out=${1:-bench/results}
only=${2:-}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# The counted path in C (xferaudit/runtime/counted/_fastcount.c): built in place, as an
# editable install builds it; where it cannot be built the Python wrappers run.
python3 setup.py -q build_ext --inplace > "$out/build_ext.txt" 2>&1 || echo "(the C counted path was not built: see $out/build_ext.txt)"
{ nvidia-smi -L; python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
  python3 -c "from xferaudit.runtime.counted import fastpath; print('counted path in C:', fastpath.AVAILABLE)"; } | tee "$out/gpu_env.txt"
# The whole GPU suite in one process (-m gpu over every test module): modules
# that set up the simulated device are collected too, so CUDA's pinned memory
# must keep working beside it (tests/runtime/test_simulated_pinned_gpu.py).
if [ "$only" = "--guard" ]; then
  tests="tests/runtime/test_guard_gpu.py tests/packs/torch/test_implicit_step.py tests/runtime/test_runner_gpu.py
  tests/packs/torch/test_gpu_first_lib.py"
else
  tests="-m gpu tests"
fi
# shellcheck disable=SC2086
timeout 480 python3 -m pytest -q -rs -p no:cacheprovider $tests 2>&1 | tee "$out/gpu_tests.txt" | tail -25
timeout 150 python3 bench/gpu_truth.py --steps 20 --out "$out/gpu_truth.json" 2>&1 | tee "$out/gpu_truth.txt" | tail -22
timeout 150 python3 bench/gpu_truth.py --steps 20 --plant --out "$out/gpu_truth_plant.json" 2>&1 | tee "$out/gpu_truth_plant.txt" | tail -14
modes="lite full"
[ "$only" = "--guard" ] && modes=lite
for m in $modes; do
  timeout 150 python3 bench/gpu_truth.py --program copies --mode $m --steps 5 --out "$out/gpu_truth_copies_$m.json" 2>&1 \
    | tee "$out/gpu_truth_copies_$m.txt" | tail -14
done
# run evidence: the every-category program and its `wrap --from` twin against the profiler
for m in $modes; do
  timeout 150 python3 bench/gpu_evidence.py --mode $m --runs 3 --out "$out/gpu_evidence_$m.json" 2>&1 \
    | tee "$out/gpu_evidence_$m.txt" | tail -12
done
# xferaudit run: the unmodified programs, whole, against the profiler (copies, bytes, launches)
for prog in copies example; do
  timeout 300 python3 bench/gpu_truth.py --runner --program $prog --steps 20 --out "$out/gpu_truth_runner_$prog.json" 2>&1 \
    | tee "$out/gpu_truth_runner_$prog.txt" | tail -16
done
# Every crossing named: a Lightning fit and a Hugging Face generate(), unmodified, under xferaudit run (nameless
# crossings 0, copies and bytes = the profiler's memcpys, a budget frozen from one run holding the next), and
# a wrapped torch.save's copies against the profiler's DtoH memcpys
for m in $modes; do
  timeout 300 python3 bench/gpu_named.py --mode $m --out "$out/gpu_named_$m.json" 2>&1 | tee "$out/gpu_named_$m.txt" | tail -40
done
timeout 300 python3 bench/gpu_overhead.py --rounds 5 --out "$out/gpu_overhead.json" 2>&1 | tee "$out/gpu_overhead.txt" | tail -10
timeout 150 python3 bench/gpu_overhead.py --small --rounds 7 --steps 50 --out "$out/gpu_overhead_small.json" 2>&1 | tee "$out/gpu_overhead_small.txt" | tail -10
timeout 150 python3 bench/gpu_copies.py --steps 5 --out "$out/gpu_copies.json" 2>&1 | grep -v USDT | tee "$out/gpu_copies.txt" | tail -24
# Host time per site against the profiler, memcpys inside their sites' ranges, the per-call and small-step costs.
timeout 300 python3 bench/gpu_site_time.py --steps 5 --out "$out/gpu_site_time.json" 2>&1 | grep -v USDT | tee "$out/gpu_site_time.txt" | tail -45
timeout 200 python3 bench/runtime_overhead.py --quick 2>&1 | tee "$out/runtime_overhead_cuda.txt" | tail -12
# What the lite guard adds per kind of call and to the small step, on this machine's CPU (no GPU used):
# the same table as on the CPU-only machine, so the two hosts' figures can be set side by side.
timeout 200 python3 bench/guard_event_cost.py --section 2 2>&1 | tee "$out/guard_event_cost.txt" | tail -16
[ "$only" = "--guard" ] && exit 0
# What a wrapper costs per call with a full and a short site literal (host tensors, this machine's CPU).
timeout 150 python3 bench/runtime_overhead.py --quick 2>&1 | tee "$out/runtime_overhead.txt" | tail -6
# The DDP run (one rank per GPU): 2 ranks where 2 GPUs exist, else 1 to prove the script.
n=$(python3 -c "import torch; print(min(2, torch.cuda.device_count()))")
timeout 300 python3 bench/gpu_truth_ddp.py --nproc "$n" --steps 20 --out "$out/gpu_truth_ddp_${n}rank.json" 2>&1 | tee "$out/gpu_truth_ddp_${n}rank.txt" | tail -12
