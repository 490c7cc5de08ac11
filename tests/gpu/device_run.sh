#!/usr/bin/env bash
# One batch of GPU work on the lent H100 (docs/hardware-runs.md): the machine has numpy,
# cuda-python, torch, ptxas and compute-sanitizer but not ISL/z3/lark, so the cases were
# built on the host (tests/gpu/build_cases.py -> .gpucases, bench/bench_gpu.py build ->
# .benchcases) and tilesafe travels as a wheel (.whl); `python3 -P` keeps the checkout's own
# tilesafe/ folder from shadowing the installed package. Usage: tests/gpu/device_run.sh STEPS
# with STEPS a comma list of: info,pytest,cli,good,codegen,fuzz,big,wgmma,cluster,hip,bad,
# sanitize,bench,gemm (gemm: bench/bench_gemm.py run .benchgemm; hip: the HIP-on-CUDA cases
# of tests/gpu/build_hip_cases.py, built on the host into .gpucases; cluster: the
# corpus/cluster kernels, launched as thread-block clusters with cuLaunchKernelEx).
# `pytest` and `cli` need the full install: carry .whl with the wheels of lark, islpy,
# z3-solver and pysmt beside tilesafe's (the other steps need numpy and cuda-python only).
set -u
steps="${1:-info,good,codegen,fuzz,big,bad,sanitize,bench}"
out="${OUT:-/tmp/out}"
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site \
  .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
has() { case ",$steps," in *",$1,"*) return 0;; *) return 1;; esac; }
if has info; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv \
    | tee "$out/device.txt"
  ptxas --version | tail -2 | tee -a "$out/device.txt"
  python3 -c "import sys, numpy, cuda.bindings; print(sys.version.split()[0], numpy.__version__, cuda.bindings.__version__)" | tee -a "$out/device.txt"
fi
if has pytest; then
  echo "== pytest -m gpu (TILESAFE_REQUIRE_GPU=1: a skip is a failure)"
  TILESAFE_REQUIRE_GPU=1 TILESAFE_GPU_CASES="$PWD/.gpucases" python3 -P -m pytest -m gpu \
    tests/gpu -p no:cacheprovider -q -rA > "$out/pytest-gpu.txt" 2>&1
  echo "pytest exit $?"; tail -15 "$out/pytest-gpu.txt"
fi
if has cli; then
  echo "== tilesafe CLI on the GPU"
  for k in pipeline2:M=192,N=320 transpose_tma:M=192,N=128 row_sum_ilp:M=20,N=384; do
    python3 -P -m tilesafe.cli run "corpus/good/${k%%:*}.tsk" --size "${k#*:}" --device gpu \
      --check --seed 7 2>&1 | tee -a "$out/cli.txt" | head -1
  done
  python3 -P -m tilesafe.cli run corpus/bad/ts410_producer_waits_full.tsk --size M=64,N=128 \
    --device gpu --unverified --timeout 10 2>&1 | tee -a "$out/cli.txt" | head -1
fi
for kind in good codegen fuzz big wgmma cluster hip; do
  if has $kind; then
    echo "== $kind"
    python3 -P -m tilesafe.gpu.cases run .gpucases --only "$kind-" --json "$out/$kind.json" \
      > "$out/$kind.txt" 2>&1
    tail -4 "$out/$kind.txt"; grep -v "bit-exact" "$out/$kind.txt" | head -20
  fi
done
if has bad; then
  echo "== bad"
  python3 -P -m tilesafe.gpu.cases run .gpucases --only bad- --isolated --timeout 20 \
    --json "$out/bad.json" > "$out/bad.txt" 2>&1
  cat "$out/bad.txt"
fi
if has sanitize; then
  echo "== sanitize"
  timeout "${SANITIZE_BUDGET:-420}" python3 tests/gpu/sanitize.py .gpucases --jobs 8 \
    --timeout 150 --json "$out/sanitize.json" > "$out/sanitize.txt" 2>&1
  tail -n 130 "$out/sanitize.txt"
fi
if has bench; then
  echo "== bench"
  python3 bench/bench_gpu.py run .benchcases 2>&1 | tee "$out/bench.txt"
fi
if has gemm; then
  echo "== gemm"
  python3 bench/bench_gemm.py run .benchgemm 2>&1 | tee "$out/gemm.txt"
fi
