#version 450
// A reference for rec.matmul's VK_KHR_cooperative_matrix GEMM with fp16
// accumulators (benchmarks/matmul_reference.py): C = A @ B for row-major
// fp16 A (M x K), B (K x N) and C (M x N). It takes the library kernel's
// tiling and staging (blocks of 256 x 256 split among eight subgroups,
// 32-deep K steps fetched into registers while the previous step is
// multiplied from shared memory) and differs from it in two ways only:
//   - M, N, K and so every stride are compiled in (no batch, no push
//     constants, whole blocks only; the library kernel specializes K and
//     the row strides, and pushes the rest);
//   - ADDRESSES 1: the three buffers are reached through device addresses
//     given in push constants (VK_KHR_buffer_device_address), with no
//     descriptors; ADDRESSES 0: through three storage-buffer bindings.
// So the two builds, timed beside rec.matmul in one run, say what compiled
// strides and what device addresses are each worth on the device.
// TILE_M, TILE_N, TILE_K, ALONG_M, ALONG_N (defaults: the library kernel's
// 256, 256, 32, 2, 4) give other tilings of the bindings build, so that a
// run also says what the tiling is worth.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : require
#if ADDRESSES
#extension GL_EXT_buffer_reference : require
#endif
#pragma use_vulkan_memory_model

#ifndef TILE_M
#define TILE_M 256
#define TILE_N 256
#define TILE_K 32
#define ALONG_M 2
#define ALONG_N 4
#endif
const uint BM = TILE_M, BN = TILE_N, BK = TILE_K;    // a workgroup's block, and its K step
const uint SG_M = ALONG_M, SG_N = ALONG_N;          // subgroups of 32 lanes along M and N
const uint THREADS = SG_N * SG_M * 32u;
const uint FM = BM / SG_M / 16u, FN = BN / SG_N / 16u;    // 16 x 16 fragments a subgroup owns
const uint PAD = 8u;                                 // fp16 added to each shared row: no bank conflicts
const uint ALEN = (BK + PAD) / 8u, BLEN = (BN + PAD) / 8u;      // uvec4s per shared row
const uint A_QUADS = BM * BK / 8u / THREADS, B_QUADS = BK * BN / 8u / THREADS;  // uvec4s a thread stages
layout(local_size_x = THREADS) in;

// Every buffer holds fp16 values, eight to a uvec4.
#if ADDRESSES
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Quads { uvec4 q[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) writeonly buffer OutQuads { uvec4 q[]; };
layout(push_constant) uniform Addresses { Quads a; Quads b; OutQuads c; } pc;
#define A_IN a_ref.q
#define B_IN b_ref.q
#define C_OUT c_ref.q
#else
layout(std430, binding = 0) readonly buffer BufA { uvec4 a_quads[]; };
layout(std430, binding = 1) readonly buffer BufB { uvec4 b_quads[]; };
layout(std430, binding = 2) writeonly buffer BufC { uvec4 c_quads[]; };
#define A_IN a_quads
#define B_IN b_quads
#define C_OUT c_quads
#endif

#define ACC coopmat<float16_t, gl_ScopeSubgroup, 16u, 16u, gl_MatrixUseAccumulator>
#define MAT_A coopmat<float16_t, gl_ScopeSubgroup, 16u, 16u, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeSubgroup, 16u, 16u, gl_MatrixUseB>
#define ROW_MAJOR gl_CooperativeMatrixLayoutRowMajor

shared uvec4 As[BM * ALEN];
shared uvec4 Bs[BK * BLEN];

// Thread tid's i-th uvec4 of a K step: row and 8-element column of the A
// block (BM x BK) and of the B block (BK x BN).
uint a_row(uint tid, uint i) { return (tid + i * THREADS) / (BK / 8u); }
uint a_col(uint tid, uint i) { return (tid + i * THREADS) % (BK / 8u); }
uint b_row(uint tid, uint i) { return (tid + i * THREADS) / (BN / 8u); }
uint b_col(uint tid, uint i) { return (tid + i * THREADS) % (BN / 8u); }

void main() {
#if ADDRESSES
  Quads a_ref = pc.a;
  Quads b_ref = pc.b;
  OutQuads c_ref = pc.c;
#endif
  uint tid = gl_LocalInvocationID.x;
  uint n0 = gl_WorkGroupID.x * BN, m0 = gl_WorkGroupID.y * BM;
  uint sm = (gl_SubgroupID / SG_N) * FM * 16u, sn = (gl_SubgroupID % SG_N) * FN * 16u;
  ACC acc[FM][FN];
  [[unroll]] for (uint i = 0u; i < FM; ++i)
    [[unroll]] for (uint j = 0u; j < FN; ++j) acc[i][j] = ACC(0.0);
  uvec4 ra[A_QUADS], rb[B_QUADS];
  [[unroll]] for (uint i = 0u; i < A_QUADS; ++i)
    ra[i] = A_IN[(m0 + a_row(tid, i)) * (K / 8u) + a_col(tid, i)];
  [[unroll]] for (uint i = 0u; i < B_QUADS; ++i)
    rb[i] = B_IN[b_row(tid, i) * (N / 8u) + n0 / 8u + b_col(tid, i)];
  for (uint k0 = 0u; k0 < K; k0 += BK) {
    barrier();               // every subgroup is done with the previous K step's tiles
    [[unroll]] for (uint i = 0u; i < A_QUADS; ++i) As[a_row(tid, i) * ALEN + a_col(tid, i)] = ra[i];
    [[unroll]] for (uint i = 0u; i < B_QUADS; ++i) Bs[b_row(tid, i) * BLEN + b_col(tid, i)] = rb[i];
    barrier();
    // The next K step, fetched while this one is multiplied: each load under
    // its own test rather than one branch around them all, and the barrier
    // above rather than after the multiply (together 320 -> 381 TFLOP/s on
    // an H100; either alone 307 and 347).
    bool more = k0 + BK < K;
    uint kt = k0 + BK;
    [[unroll]] for (uint i = 0u; i < A_QUADS; ++i)
      if (more) ra[i] = A_IN[(m0 + a_row(tid, i)) * (K / 8u) + (kt / 8u) + a_col(tid, i)];
    [[unroll]] for (uint i = 0u; i < B_QUADS; ++i)
      if (more) rb[i] = B_IN[(kt + b_row(tid, i)) * (N / 8u) + n0 / 8u + b_col(tid, i)];
    [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
      MAT_A fa[FM];
      [[unroll]] for (uint i = 0u; i < FM; ++i)
        coopMatLoad(fa[i], As, (sm + i * 16u) * ALEN + kk / 8u, ALEN, ROW_MAJOR);
      [[unroll]] for (uint j = 0u; j < FN; ++j) {
        MAT_B fb;
        coopMatLoad(fb, Bs, kk * BLEN + (sn + j * 16u) / 8u, BLEN, ROW_MAJOR);
        [[unroll]] for (uint i = 0u; i < FM; ++i) acc[i][j] = coopMatMulAdd(fa[i], fb, acc[i][j]);
      }
    }
  }
  [[unroll]] for (uint i = 0u; i < FM; ++i)
    [[unroll]] for (uint j = 0u; j < FN; ++j)
      coopMatStore(acc[i][j], C_OUT, ((m0 + sm + i * 16u) * N + n0 + sn + j * 16u) / 8u, N / 8u, ROW_MAJOR);
}
