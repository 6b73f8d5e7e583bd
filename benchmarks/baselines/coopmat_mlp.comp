#version 450
// A minimal fused MLP on VK_KHR_cooperative_matrix, the reference that
// rec.mlp's khr_coopmat kernel is measured against (benchmarks/neural_coopmat.py).
// It runs only the benchmark's network, 32 -> 64 -> 64 -> 64 -> 64 -> 16
// with ReLU between the layers, fp16 weights and activations, and fixes
// every size at compile time. It takes whole tiles of queries only, with no
// bounds checks. It is not a general kernel.
//
// Each subgroup owns ROW_FRAGS x 16 queries and all of their columns. A
// layer's activations go through the subgroup's own tile of shared memory:
// an accumulator fragment cannot be reused as an A operand, so the tile is
// the only way from one layer to the next. No workgroup barrier is needed
// except where the weights are staged.
//
// Build-time defines (benchmarks/neural_coopmat.py builds the variants):
//   THREADS, SUBGROUPS  workgroup size and its 32-lane subgroups
//   ROW_FRAGS           16-row fragments a subgroup owns
//   WEIGHTS_SHARED      1: all weights are copied into shared memory once per
//                       workgroup; 0: B fragments load straight from the
//                       buffer, where L1 keeps the 30 KiB of weights
//   ACC_F32             1: fp32 accumulators; 0: fp16
//   UNROLL_ELEMENTS     1: the ReLU's loop over a fragment's elements is marked
//                       [[unroll]]; 0: it is not (as rec.mlp's kernel writes it)
//   W0..W4, B0..B4      each layer's matrix and bias offsets, in uvec4s
//   TABLE_DEPTH         the uvec4 of the table that holds the depth
//   STEP                walks from this kernel towards rec.mlp's khr_coopmat
//                       kernel, one difference at a time, so that a run shows
//                       which one costs the time (each step keeps the ones
//                       before it):
//                       0  everything fixed at compile time, as above
//                       1  each layer's offsets read from the table
//                       2  the hidden layers in a loop over the table's depth
//                       3  each layer's widths from the table: run-time loop
//                          bounds and fragment counts, as rec.mlp's kernel
//                       4  the activation picked by the table's code, with
//                          rec.mlp's branches (ReLU, none, leaky ReLU)
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : require
#pragma use_vulkan_memory_model

layout(local_size_x = THREADS) in;
// fp16 values, eight to a uvec4. x: 32 a query. y: 16 a query. w: each
// layer's K x N matrix, row-major. b: the table (per layer two uvec4s:
// matrix offset, bias offset, K, N; activation code, slope bits; then the
// depth), then each layer's bias, written as 16 equal rows so that it loads
// as one accumulator fragment.
layout(std430, binding = 0) readonly buffer X { uvec4 x[]; };
layout(std430, binding = 1) readonly buffer Wt { uvec4 w[]; };
layout(std430, binding = 2) readonly buffer Bt { uvec4 b[]; };
layout(std430, binding = 3) writeonly buffer Y { uvec4 y[]; };

#if ACC_F32
#define ACC_T float
#else
#define ACC_T float16_t
#endif
#define ACC coopmat<ACC_T, gl_ScopeSubgroup, 16u, 16u, gl_MatrixUseAccumulator>
#define HALF_ACC coopmat<float16_t, gl_ScopeSubgroup, 16u, 16u, gl_MatrixUseAccumulator>
#define MAT_A coopmat<float16_t, gl_ScopeSubgroup, 16u, 16u, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeSubgroup, 16u, 16u, gl_MatrixUseB>
#define ROW_MAJOR gl_CooperativeMatrixLayoutRowMajor
#if UNROLL_ELEMENTS
#define EACH_ELEMENT [[unroll]] for
#else
#define EACH_ELEMENT for
#endif

#ifndef STEP
#define STEP 0
#endif
const uint RF = ROW_FRAGS;
const uint SUB_ROWS = RF * 16u;
const uint ALEN = 9u;           // uvec4s per activation row: 64 fp16 and 8 of padding (no bank conflicts)
const uint W_WORDS = W4 + 128u;     // uvec4s of the five matrices (the last is 64 x 16: 128)
shared uvec4 act[SUBGROUPS * SUB_ROWS * ALEN];
#if WEIGHTS_SHARED
shared uvec4 wsh[W_WORDS];
#define WEIGHTS wsh
#else
#define WEIGHTS w
#endif

// Where a width is a run-time value (STEP 3) the fragment loops run to the
// widest layer (NF_MAX) and skip the fragments past the layer's NF, as
// rec.mlp's kernel does; with constants the test folds away.
#define NF_MAX 4u

// acc[i][j] = the bias fragment j of a layer NF fragments wide.
#define LOAD_BIAS(NF, BO) \
  [[unroll]] for (uint j = 0u; j < NF_MAX; ++j) if (j < NF) { \
    HALF_ACC bias; \
    coopMatLoad(bias, b, BO + 2u * j, 2u * NF, ROW_MAJOR); \
    [[unroll]] for (uint i = 0u; i < RF; ++i) acc[i][j] = ACC(bias); \
  }

// acc += (the rows' A fragments, KF of them along K) x (the K x N matrix at WO).
// A fragment (i, k) is at A_AT(i) + 2k with A_STRIDE uvec4s between rows.
#define MULTIPLY(KF, NF, WO, A_BUF, A_AT, A_STRIDE) \
  [[unroll]] for (uint k = 0u; k < KF; ++k) { \
    MAT_A fa[RF]; \
    [[unroll]] for (uint i = 0u; i < RF; ++i) coopMatLoad(fa[i], A_BUF, A_AT(i) + 2u * k, A_STRIDE, ROW_MAJOR); \
    [[unroll]] for (uint j = 0u; j < NF_MAX; ++j) if (j < NF) { \
      MAT_B fb; \
      coopMatLoad(fb, WEIGHTS, WO + 32u * NF * k + 2u * j, 2u * NF, ROW_MAJOR); \
      [[unroll]] for (uint i = 0u; i < RF; ++i) acc[i][j] = coopMatMulAdd(fa[i], fb, acc[i][j]); \
    } \
  }

#define EACH_FRAGMENT(NF) \
  [[unroll]] for (uint i = 0u; i < RF; ++i) \
    [[unroll]] for (uint j = 0u; j < NF_MAX; ++j) if (j < NF)

#define RELU(NF) \
  EACH_FRAGMENT(NF) EACH_ELEMENT (int e = 0; e < acc[i][j].length(); ++e) acc[i][j][e] = max(acc[i][j][e], ACC_T(0.0));

// Layer L's activation: ReLU, or (STEP 4) what the table's code says, one
// uniform branch a layer with every element loop unrolled, as rec.mlp's kernel.
#if STEP >= 4
#define ACTIVATE(NF, L) \
  if (b[2u * (L) + 1u].x == 1u) { RELU(NF) } \
  else if (b[2u * (L) + 1u].x == 2u) { \
    ACC_T slope = ACC_T(uintBitsToFloat(b[2u * (L) + 1u].y)); \
    EACH_FRAGMENT(NF) [[unroll]] for (int e = 0; e < acc[i][j].length(); ++e) \
      acc[i][j][e] = max(acc[i][j][e], ACC_T(0.0)) + min(acc[i][j][e], ACC_T(0.0)) * slope; \
  }
#else
#define ACTIVATE(NF, L) RELU(NF)
#endif

// Layer L's matrix and bias offsets, and its widths in fragments along K and N.
#if STEP >= 1
#define W_AT(L, CONST) b[2u * (L)].x
#define B_AT(L, CONST) b[2u * (L)].y
#else
#define W_AT(L, CONST) CONST
#define B_AT(L, CONST) CONST
#endif
#if STEP >= 3
#define KF_OF(L, CONST) (b[2u * (L)].z / 16u)
#define NF_OF(L, CONST) (b[2u * (L)].w / 16u)
#else
#define KF_OF(L, CONST) CONST
#define NF_OF(L, CONST) CONST
#endif

// The layer's output, rounded to fp16, becomes the next layer's input in
// the subgroup's tile. Every lane has read the tile (the loads above) before
// any lane overwrites it, and every store is seen before the next loads.
#define STORE_TILE(NF) \
  subgroupMemoryBarrierShared(); \
  subgroupBarrier(); \
  EACH_FRAGMENT(NF) { \
    HALF_ACC h = HALF_ACC(acc[i][j]); \
    coopMatStore(h, act, tile_at(i) + 2u * j, ALEN, ROW_MAJOR); \
  } \
  subgroupMemoryBarrierShared(); \
  subgroupBarrier();

uint row0, tile0;
uint x_at(uint i) { return (row0 + 16u * i) * 4u; }        // query rows of 4 uvec4s
uint tile_at(uint i) { return tile0 + 16u * i * ALEN; }

void main() {
  row0 = (gl_WorkGroupID.x * SUBGROUPS + gl_SubgroupID) * SUB_ROWS;    // this subgroup's first query
  tile0 = gl_SubgroupID * SUB_ROWS * ALEN;
#if WEIGHTS_SHARED
  for (uint v = gl_LocalInvocationID.x; v < W_WORDS; v += THREADS) wsh[v] = w[v];
  barrier();
#endif
  ACC acc[RF][NF_MAX];
  {
    uint nf = NF_OF(0u, 4u), kf = KF_OF(0u, 2u), wo = W_AT(0u, W0);
    LOAD_BIAS(nf, B_AT(0u, B0)) MULTIPLY(kf, nf, wo, x, x_at, 4u) ACTIVATE(nf, 0u) STORE_TILE(nf)
  }
#if STEP >= 2
  uint last = b[TABLE_DEPTH].x - 1u;
  for (uint l = 1u; l < last; ++l) {
    uint nf = NF_OF(l, 4u), kf = KF_OF(l, 4u), wo = b[2u * l].x;
    LOAD_BIAS(nf, b[2u * l].y) MULTIPLY(kf, nf, wo, act, tile_at, ALEN) ACTIVATE(nf, l) STORE_TILE(nf)
  }
#else
  const uint last = 4u;
  { uint nf = NF_OF(1u, 4u), kf = KF_OF(1u, 4u), wo = W_AT(1u, W1);
    LOAD_BIAS(nf, B_AT(1u, B1)) MULTIPLY(kf, nf, wo, act, tile_at, ALEN) ACTIVATE(nf, 1u) STORE_TILE(nf) }
  { uint nf = NF_OF(2u, 4u), kf = KF_OF(2u, 4u), wo = W_AT(2u, W2);
    LOAD_BIAS(nf, B_AT(2u, B2)) MULTIPLY(kf, nf, wo, act, tile_at, ALEN) ACTIVATE(nf, 2u) STORE_TILE(nf) }
  { uint nf = NF_OF(3u, 4u), kf = KF_OF(3u, 4u), wo = W_AT(3u, W3);
    LOAD_BIAS(nf, B_AT(3u, B3)) MULTIPLY(kf, nf, wo, act, tile_at, ALEN) ACTIVATE(nf, 3u) STORE_TILE(nf) }
#endif
  {
    uint nf = NF_OF(last, 1u), kf = KF_OF(last, 4u), wo = W_AT(last, W4);
    LOAD_BIAS(nf, B_AT(last, B4)) MULTIPLY(kf, nf, wo, act, tile_at, ALEN)
  }
  [[unroll]] for (uint i = 0u; i < RF; ++i) {
    HALF_ACC h = HALF_ACC(acc[i][0]);
    coopMatStore(h, y, (row0 + 16u * i) * 2u, 2u, ROW_MAJOR);     // query rows of 2 uvec4s
  }
}
