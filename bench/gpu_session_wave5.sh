#!/usr/bin/env bash
# This wave's GPU work in one go (the device tool: one H100 or H200, torch 2.11,
# Python 3.12, no libcst and no network): the whole GPU suite in one process,
# then the wave's benches, each writing under OUT; everything is packed into
# OUT/wave5.tgz (the device tool brings back few files) with a summary beside it.
#   bash bench/gpu_session_wave5.sh OUT [part]
# part: all (default) | one (the most needed lines of each issue, one call) | again (compiled regions and kernels, rerun) | breaks (the programs with breaks, the guard's GPU tests) | liger, liger_more (parts of liger-kernel's GPU suite bare and wrapped, carrying .gpuwork) | short (one's first three, ~6 min) | min (its first two) | compiled (the first alone) | suite (the GPU suite, the Triton kernels) | benches (compiled regions,
# named crossings, nanoGPT) | speed (the cold scan against .base, 2 and 16 cores); each fits one
# device call of 10 minutes
# Wheels for what the image lacks (libcst, pyyaml, ruff) come in .whl/ when the
# caller carries it; the scan-speed part times the checkout the caller copied to .base/ beside this tree.
set -uo pipefail
out=${1:?OUT}
part=${2:-all}
r="$out/r"
mkdir -p "$r"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false TORCHINDUCTOR_COMPILE_THREADS=8
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > "$r/wheels.txt" 2>&1 && export PYTHONPATH=/tmp/site
  export PATH=/tmp/site/bin:$PATH
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
python3 setup.py -q build_ext --inplace > "$r/build_ext.txt" 2>&1 || echo "(no C counted path)"
{ nvidia-smi -L; python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
  python3 -c "import libcst; print('libcst', libcst.__version__ if hasattr(libcst, '__version__') else 'ok')"
  python3 -c "import lightning; print('lightning', lightning.__version__)"; } > "$r/env.txt" 2>&1
cat "$r/env.txt"
step() {  # name, timeout, command...
  local name=$1 t=$2; shift 2
  local t0=$(date +%s)
  timeout "$t" "$@" > "$r/$name.txt" 2>&1
  local rc=$?
  echo "$name: exit $rc ($(( $(date +%s) - t0 )) s)" | tee -a "$r/summary.txt"
  tail -n 25 "$r/$name.txt" | sed "s/^/  [$name] /" >> "$r/summary_tails.txt"
}
if [ "$part" = all ] || [ "$part" = suite ]; then
  step gpu_suite 420 python3 -m pytest -q -rs -p no:cacheprovider -m gpu tests
  step gpu_kernels 90 python3 bench/gpu_kernels.py "$r/kernels"
fi
if [ "$part" = all ] || [ "$part" = benches ]; then
  step gpu_compiled 220 python3 bench/gpu_compiled.py --out "$r/compiled" --steps 12 --repeats 5
  step gpu_named_lite 180 python3 bench/gpu_named.py --device cuda --mode lite --out "$r/gpu_named_lite.json"
  step nanogpt 150 python3 bench/nanogpt_simulate.py "$r/nanogpt" --lite
fi
if [ "$part" = one ]; then  # a single call of ~9 minutes: the lines each issue needs most
  step gpu_compiled 200 python3 bench/gpu_compiled.py --out "$r/compiled" --steps 12 --repeats 3
  step gpu_named_lite 150 python3 bench/gpu_named.py --device cuda --mode lite --out "$r/gpu_named_lite.json"
  step nanogpt 120 python3 bench/nanogpt_simulate.py "$r/nanogpt" --lite
  step gpu_kernels 60 python3 bench/gpu_kernels.py "$r/kernels"
fi
if [ "$part" = short ]; then  # ~6 minutes, where little device time is left
  step gpu_compiled 160 python3 bench/gpu_compiled.py --out "$r/compiled" --steps 12 --repeats 3
  step gpu_named_lite 120 python3 bench/gpu_named.py --device cuda --mode lite --out "$r/gpu_named_lite.json"
  step nanogpt 90 python3 bench/nanogpt_simulate.py "$r/nanogpt" --lite
fi
if [ "$part" = min ]; then  # ~4.5 minutes: compiled regions and named crossings alone
  step gpu_compiled 150 python3 bench/gpu_compiled.py --out "$r/compiled" --steps 12 --repeats 3
  step gpu_named_lite 110 python3 bench/gpu_named.py --device cuda --mode lite --out "$r/gpu_named_lite.json"
fi
if [ "$part" = again ]; then  # ~9 minutes: the reruns after the CPU fixes (compiled regions, the kernels)
  step gpu_compiled 400 python3 bench/gpu_compiled.py --out "$r/compiled" --steps 12 --repeats 3
  step gpu_kernels 80 python3 bench/gpu_kernels.py "$r/kernels"
  step gpu_guard_tests 80 python3 -m pytest -q -p no:cacheprovider tests/runtime/test_compiled_gpu.py tests/runtime/test_guard_fake_tensors.py
fi
if [ "$part" = breaks ]; then  # ~7 minutes: the two programs with breaks, and the guard's GPU tests
  step gpu_compiled_breaks 330 python3 bench/gpu_compiled.py --out "$r/compiled" --steps 12 --only breaks breaks_fixed
  step gpu_guard_tests 200 python3 -m pytest -q -p no:cacheprovider tests/runtime/test_compiled_gpu.py tests/runtime/test_guard_fake_tensors.py
fi
if [ "$part" = breaks_full ]; then  # ~6 minutes: the program with breaks alone, and the guard's GPU tests with their failures
  step gpu_compiled_breaks 150 python3 bench/gpu_compiled.py --out "$r/compiled" --steps 12 --only breaks
  step gpu_guard_tests 300 python3 -m pytest -q -rf --tb=short -p no:cacheprovider tests/runtime/test_guard_fake_tensors.py tests/runtime/test_compiled_gpu.py
fi
if [ "$part" = compiled ]; then  # ~2.5 minutes: compiled regions alone
  step gpu_compiled 150 python3 bench/gpu_compiled.py --out "$r/compiled" --steps 12 --repeats 3
fi
if [ "$part" = liger ]; then  # ~1 minute: 20 tests of liger-kernel's own GPU suite, bare, wrapped, counting on
  # (.gpuwork/liger: liger-kernel 0.8.5's src/ and 14 of its test/transformers files, carried; never committed)
  step liger_suite 150 python3 bench/real_suites.py .gpuwork/liger --package liger_kernel --markdown "$r/liger.md" \
    --tests test/transformers/test_softmax.py test/transformers/test_layer_norm.py -- -k "functional or int32 or large_row"
fi
if [ "$part" = liger_more ]; then  # more than one call: six files' bare run alone took over 390 s on an H100
  step liger_suite_more 560 python3 bench/real_suites.py .gpuwork/liger --package liger_kernel --markdown "$r/liger_more.md" \
    --tests test/transformers/test_rms_norm.py test/transformers/test_dyt.py test/transformers/test_geglu.py \
    -- -k "functional and not dtensor and not blackwell"
fi
if [ "$part" = speed ]; then
  step scan_speed_2cores 420 taskset -c 0,1 python3 bench/scan_speed.py --short --repeat 5 --base .base
  step scan_speed_16cores 150 python3 bench/scan_speed.py --short --repeat 3 --base .base
  here=$PWD
  python3 -c "import sys; sys.path.insert(0, 'bench'); import scan_speed; scan_speed.copy_tree(scan_speed.torch_dir(), '/tmp/split_tree')"
  (cd /tmp/split_tree && step cold_split_2cores 200 taskset -c 0,1 python3 "$here/bench/cold_split.py" torch --out "$r/split2")
fi
tar -czf "$out/wave5_$part.tgz" -C "$out" r
cp "$r/summary.txt" "$out/summary_$part.txt" 2>/dev/null
cat "$r/summary.txt"
