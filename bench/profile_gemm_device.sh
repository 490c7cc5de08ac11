set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -P bench/profile_gemm.py run .profgemm 2>&1 | tee $OUT/ablation.txt
for c in gemm-8192x8192x1000 gemm-8192x8192x8192; do
  timeout 120 ncu --clock-control none -k regex:gemm -c 1 --section SpeedOfLight --section Occupancy python3 -P bench/profile_gemm.py once .profgemm $c > $OUT/ncu-$c.txt 2>&1; echo "ncu $c rc $?"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L2 Cache Throughput|Achieved Occupancy|SM Busy" $OUT/ncu-$c.txt | head -12
done
cat > /tmp/tm.py <<'PY'
import torch
for (m, n, k) in [(8192, 8192, 1000), (8192, 8192, 8192)]:
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16); b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize(); torch.matmul(a, b.T); torch.cuda.synchronize()
PY
timeout 150 ncu --clock-control none -k regex:"xmma|nvjet|gemm|cutlass|sm90" --section SpeedOfLight --section Occupancy python3 /tmp/tm.py > $OUT/ncu-cublas.txt 2>&1; echo "ncu cublas rc $?"
grep -E "^  [a-zA-Z_]|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy" $OUT/ncu-cublas.txt | head -20
