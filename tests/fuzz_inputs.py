"""Inputs for the fuzz tests: seed texts (the whole corpus plus one kernel that uses every
construct) and a token-level view of them, shared by the hypothesis tests of the frontend
(tests/test_fuzz_frontend.py) and the CLI fuzzer (tests/fuzz_cli.py).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEEDS = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "corpus").glob("*/*.tsk"))]
SEEDS.append("""// every construct, so mutations reach all of the grammar
kernel every(src: in global f16[M, N], dst: out global f16[M, N], v: inout global i32[N])
  where M % 64 == 0, N % 64 == 0, M > 0 && !(N > 4096) || N == 64
  grid (M / 64, N / 64) block 128
{
  const S = 2
  tensormap tin = tiled(src, box [64, 64], swizzle 128B, oob nan)
  tensormap tout = tiled(dst, box [64, 64])
  shared buf: f16[S, 64, 64] layout swizzle128B(row_major) align 1024
  shared t2: f16[64, 64] layout ((8,8),64):((64,512),1)
  shared t3: f16[64, 64] layout Sw<3,3,3> o _0 o (_64,_64):(_64,_1)
  mbarrier full[S] count 1 guards buf[i]
  mbarrier one count 4 guards t2
  if thread == 0 { init full; init one; fence mbarrier_init }
  sync
  var acc: f32 = 0.0
  role prod = threads 0 .. 32, elect one {
    for k in 0 .. N / 64 step 2 {
      wait full[k % S] parity (k / S + 1) % 2
      expect_tx full[k % S], bytes(buf[k % S])
      arrive full[k % S], expect_tx 0
      tma_load buf[k % S] <- tin[block.x * 64, k * 64] signal full[k % S]
    }
  }
  role cons = warps 1 .. 4 {
    arrive one, one per warp
    acc += f32(v[lane]) * -2.5e0 /* inline */
    if lane < 4 { acc = 0.0 } else if lane > 8 { acc = 1.0 } else { acc = max(acc, 0.5) }
    fence proxy_async
    tma_store tout[block.x * 64, block.y * 64] <- t2
    commit_group
    wait_group 0 read
    v[lane] = i32(acc) % 7 - min(abs(lane), 3)
  }
}
""")

TOKEN = re.compile(r"\s+|//[^\n]*|/\*.*?\*/|[A-Za-z_][A-Za-z0-9_]*|[0-9]+(?:\.[0-9]+)?|"
                   r"\.\.|<-|[=!<>]=|&&|\|\||[+\-*]=|.", re.S)
VOCAB = ["kernel", "global", "where", "grid", "block", "const", "tensormap", "tiled", "box",
         "swizzle", "oob", "shared", "layout", "align", "mbarrier", "count", "guards", "let",
         "var", "for", "in", "step", "if", "else", "role", "warp", "warps", "threads", "elect",
         "one", "per", "init", "fence", "sync", "wait", "parity", "arrive", "expect_tx",
         "tma_load", "tma_store", "signal", "commit_group", "wait_group", "read", "f16", "f32",
         "i32", "bf16", "u8", "128B", "none", "zero", "nan", "mbarrier_init", "proxy_async",
         "thread", "lane", "warp_id", "min", "max", "abs", "bytes", "row_major", "M", "N", "x",
         "Sw", "o", "_0", "_64",
         "in", "out", "inout", "0", "1", "64", "2.5", "(", ")", "[", "]", "{", "}", ",", ":",
         ";", ".", "..", "<-",
         "=", "+=", "==", "!=", "<", ">=", "&&", "||", "!", "+", "-", "*", "/", "%", " ", "\n",
         "//c\n", "/*c*/", "/*", "*/"]


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text)
