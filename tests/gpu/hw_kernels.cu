// Probe kernels for tests/gpu/test_hw_tma.py: they let the tests ask the hardware the
// questions tilesafe's semantics answer on paper (semantics/tma_rules.py, semantics/mbarrier.py).
// Built at test time with
//   nvcc -cubin -gencode=arch=compute_90a,code=sm_90a hw_kernels.cu
// and launched through the CUDA driver API (cuda-python). Only thread 0 of a block drives the
// barriers and the copy engine; the other threads help fill and dump shared memory.
#include <cstdint>

// The 128-byte opaque CUtensorMap, passed by value as a __grid_constant__ parameter.
struct alignas(64) TensorMapBytes {
  unsigned char bytes[128];
};

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void bar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void bar_inval(uint32_t bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void bar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void bar_arrive(uint32_t bar, uint32_t count) {
  asm volatile("{ .reg .b64 state; mbarrier.arrive.shared::cta.b64 state, [%0], %1; }" ::"r"(bar),
               "r"(count)
               : "memory");
}

__device__ __forceinline__ void bar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile(
      "{ .reg .b64 state; mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1; }" ::"r"(bar),
      "r"(bytes)
      : "memory");
}

__device__ __forceinline__ void bar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void bar_complete_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.complete_tx.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

// Non-blocking: has the phase with this parity completed?
__device__ __forceinline__ int bar_test_wait_parity(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2; "
      "selp.u32 %0, 1, 0, p; }"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return static_cast<int>(done);
}

// Potentially suspending variant; a short time hint keeps a wait on an open phase cheap.
__device__ __forceinline__ int bar_try_wait_parity(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3; "
      "selp.u32 %0, 1, 0, p; }"
      : "=r"(done)
      : "r"(bar), "r"(parity), "r"(1000u)
      : "memory");
  return static_cast<int>(done);
}

// ---------------------------------------------------------------------------------------------
// tile_load_probe: one tile-mode TMA load into shared memory pre-filled with 0xAB, then a dump.
//
// The destination is `smem_off` bytes past a 1024-byte aligned point of dynamic shared memory,
// so the test chooses how the destination sits relative to the swizzle period. The barrier is
// armed with `tx_bytes` (the test passes tma_rules.box_bytes, or a wrong count on purpose).
// flags[0..1]: test_wait.parity 1 / 0 right after init; flags[2]: phase completed before
// `timeout_cycles`; flags[3..4]: parity 1 / 0 afterwards; flags[5]: shared address of the
// 1024-aligned point; flags[6]: rank the kernel ran (0 if it refused the rank).
// Coordinates are innermost first, as the PTX instruction takes them.
extern "C" __global__ void tile_load_probe(const __grid_constant__ TensorMapBytes tmap,
                                           unsigned char* out, int* flags, int smem_off,
                                           int tx_bytes, int dump_bytes, int rank, int c0, int c1,
                                           int c2, long long timeout_cycles) {
  extern __shared__ unsigned char dynamic_smem[];
  const uint32_t raw = shared_address(dynamic_smem);
  const uint32_t pad = (1024u - (raw & 1023u)) & 1023u;
  unsigned char* base = dynamic_smem + pad;
  const uint32_t base_s = raw + pad;
  const uint32_t bar = base_s + static_cast<uint32_t>(dump_bytes);  // dump_bytes % 1024 == 0
  const uint32_t dst = base_s + static_cast<uint32_t>(smem_off);

  for (int i = threadIdx.x; i < dump_bytes; i += blockDim.x) base[i] = 0xAB;
  // The sentinel is written by the generic proxy and then overwritten by the async proxy.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  if (threadIdx.x == 0) {
    bar_init(bar, 1);
    bar_init_fence();
  }
  __syncthreads();

  if (threadIdx.x == 0) {
    flags[0] = bar_test_wait_parity(bar, 1);
    flags[1] = bar_test_wait_parity(bar, 0);
    flags[5] = static_cast<int>(base_s);
    const uint64_t map = reinterpret_cast<uint64_t>(&tmap);
    bar_arrive_expect_tx(bar, static_cast<uint32_t>(tx_bytes));
    int issued = rank;
    if (rank == 1) {
      asm volatile(
          "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
          " [%0], [%1, {%2}], [%3];" ::"r"(dst),
          "l"(map), "r"(c0), "r"(bar)
          : "memory");
    } else if (rank == 2) {
      asm volatile(
          "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
          " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
          "l"(map), "r"(c0), "r"(c1), "r"(bar)
          : "memory");
    } else if (rank == 3) {
      asm volatile(
          "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
          " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(dst),
          "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
          : "memory");
    } else {
      issued = 0;
    }
    flags[6] = issued;
    int done = 0;
    const long long start = clock64();
    while (issued && !done && clock64() - start < timeout_cycles) {
      done = bar_test_wait_parity(bar, 0);
    }
    flags[2] = done;
    flags[3] = bar_test_wait_parity(bar, 1);
    flags[4] = bar_test_wait_parity(bar, 0);
    if (done) bar_inval(bar);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < dump_bytes; i += blockDim.x) out[i] = base[i];
}

// ---------------------------------------------------------------------------------------------
// mbarrier_program: each block's thread 0 runs one straight-line program of barrier operations
// on its own four shared-memory barriers and records what every wait answered, so the test can
// run the same program on semantics/mbarrier.MbarrierState and compare answer by answer.
// A program is `ops_per_block` triples (opcode, barrier 0..3, argument); results[i] is 0/1 for
// a wait and -1 for anything else.
enum MbarrierOp : int {
  OP_NOP = 0,
  OP_INIT = 1,
  OP_ARRIVE = 2,
  OP_EXPECT_TX = 3,
  OP_COMPLETE_TX = 4,
  OP_ARRIVE_EXPECT_TX = 5,
  OP_TEST_WAIT_PARITY = 6,
  OP_TRY_WAIT_PARITY = 7,
  OP_INVAL = 8,
};

extern "C" __global__ void mbarrier_program(const int* ops, int ops_per_block, int* results) {
  __shared__ __align__(8) unsigned long long bars[4];
  if (threadIdx.x != 0) return;
  const int* prog = ops + static_cast<long long>(blockIdx.x) * ops_per_block * 3;
  int* res = results + static_cast<long long>(blockIdx.x) * ops_per_block;
  for (int i = 0; i < ops_per_block; ++i) {
    const int op = prog[3 * i];
    const uint32_t bar = shared_address(&bars[prog[3 * i + 1] & 3]);
    const uint32_t arg = static_cast<uint32_t>(prog[3 * i + 2]);
    int r = -1;
    switch (op) {
      case OP_INIT:
        bar_init(bar, arg);
        bar_init_fence();
        break;
      case OP_ARRIVE:
        bar_arrive(bar, arg);
        break;
      case OP_EXPECT_TX:
        bar_expect_tx(bar, arg);
        break;
      case OP_COMPLETE_TX:
        bar_complete_tx(bar, arg);
        break;
      case OP_ARRIVE_EXPECT_TX:
        bar_arrive_expect_tx(bar, arg);
        break;
      case OP_TEST_WAIT_PARITY:
        r = bar_test_wait_parity(bar, arg);
        break;
      case OP_TRY_WAIT_PARITY:
        r = bar_try_wait_parity(bar, arg);
        break;
      case OP_INVAL:
        bar_inval(bar);
        break;
      default:
        break;
    }
    res[i] = r;
  }
}
