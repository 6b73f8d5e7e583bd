// The CUB baselines of the benchmark section "sort": radix sort (keys, and
// key-value pairs), inclusive scan, flagged selection and a device-to-device
// memcpy, each timed with CUDA events (median of REPS after warm-up runs) on
// uniform random uint32 data; and the library's look-back scan skeleton
// (benchmarks/lookback_skeleton.py holds its GLSL twin) compiled by nvcc, so
// that the cost of its waiting is measured under both compilers. Every sort and scan is out of place, so each
// repetition reads the same unsorted input, as a fresh copy would be.
// Prints one JSON object on stdout; the outputs are checked on the host and
// "ok" says whether they were right.
//
// Build: nvcc -O3 -arch=native -std=c++17 -o cub_sort cub_sort.cu
// Run:   cub_sort [N [SMALL_PAIRS [REPS [COPY_BYTES]]]]   (N: a multiple of 4,096 below 2^26)
#include <cub/cub.cuh>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CHECK(call)                                                                       \
  do {                                                                                    \
    cudaError_t err_ = (call);                                                            \
    if (err_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                  \
                   cudaGetErrorString(err_));                                             \
      std::exit(2);                                                                       \
    }                                                                                     \
  } while (0)

// A bijective integer hash: uniform random-looking 32-bit words from an index.
__host__ __device__ inline uint32_t mix(uint32_t x) {
  x ^= x >> 16; x *= 0x7feb352du;
  x ^= x >> 15; x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

__global__ void fill_keys(uint32_t* keys, size_t n, uint32_t seed) {
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < n) keys[i] = mix(uint32_t(i) * 0x9e3779b9u + seed);
}

__global__ void fill_iota(uint32_t* values, size_t n) {
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < n) values[i] = uint32_t(i);
}

// Half of the flags set, at random; the values are floats in [0, 1).
__global__ void fill_select_input(float* values, char* flags, size_t n, uint32_t seed) {
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < n) {
    uint32_t h = mix(uint32_t(i) ^ seed);
    values[i] = float(h >> 8) * (1.0f / 16777216.0f);
    flags[i] = char(mix(h) & 1u);
  }
}

// -- the look-back scan skeleton (the GLSL twin: benchmarks/lookback_skeleton.py) --
// Tiles of 256 threads x 4 uint4; a tile takes a ticket, scans its values in
// registers (warp scans), and (LOOK) finds its offset by decoupled look-back:
// thread 0 publishes one status word per tile (2-bit flag: 1 aggregate,
// 2 inclusive; 30-bit value), warp 0 reads 32 predecessors' words a round
// and waits while any of them is unpublished. Values stay below 2^30 in sum.
constexpr int SKEL_VEC = 4, SKEL_TILE = 256 * SKEL_VEC * 4;

__device__ inline uint32_t warp_sum(uint32_t x) {
  for (int o = 16; o; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

template <bool LOOK>
__global__ void __launch_bounds__(256) skeleton_scan(const uint4* src, uint4* dst, uint32_t* state) {
  __shared__ uint32_t s_tile, s_carry, s_warp[8];
  int t = threadIdx.x, lane = t & 31, w = t >> 5;
  if (t == 0) s_tile = atomicAdd(&state[0], 1u);
  __syncthreads();
  uint32_t tile = s_tile;
  size_t base = size_t(tile) * (256 * SKEL_VEC) + w * 32 * SKEL_VEC + lane;
  uint4 v[SKEL_VEC];
#pragma unroll
  for (int j = 0; j < SKEL_VEC; ++j) v[j] = src[base + j * 32];
  uint32_t acc = 0;
#pragma unroll
  for (int j = 0; j < SKEL_VEC; ++j) {
    v[j].y += v[j].x; v[j].z += v[j].y; v[j].w += v[j].z;
    uint32_t inc = v[j].w;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) { uint32_t y = __shfl_up_sync(0xffffffffu, inc, o); if (lane >= o) inc += y; }
    uint32_t add = acc + inc - v[j].w;
    v[j].x += add; v[j].y += add; v[j].z += add; v[j].w += add;
    acc += __shfl_sync(0xffffffffu, inc, 31);
  }
  if (lane == 0) s_warp[w] = acc;
  if (t == 0) s_carry = 0;
  __syncthreads();
  uint32_t wbase = 0, total = 0;
  for (int s = 0; s < 8; ++s) { uint32_t x = s_warp[s]; if (s < w) wbase += x; total += x; }
  if (LOOK) {
    volatile uint32_t* words = state + 1;
    if (t == 0) words[tile] = (tile == 0 ? 2u : 1u) | (total << 2);
    if (w == 0 && tile > 0) {
      uint32_t carry = 0;
      int p = int(tile) - 1;
      while (true) {
        int q = p - lane;
        uint32_t word = q >= 0 ? words[q] : 2u;
        if (!__all_sync(0xffffffffu, (word & 3u) != 0)) continue;
        uint32_t inclusive = __ballot_sync(0xffffffffu, (word & 3u) == 2u);
        if (inclusive) { int first = __ffs(inclusive) - 1; carry += warp_sum(lane <= first ? word >> 2 : 0u); break; }
        carry += warp_sum(word >> 2);
        p -= 32;
      }
      if (lane == 0) { words[tile] = 2u | ((carry + total) << 2); s_carry = carry; }
    }
    __syncthreads();
  }
  uint32_t off = s_carry + wbase;
#pragma unroll
  for (int j = 0; j < SKEL_VEC; ++j) {
    uint4 o = v[j]; o.x += off; o.y += off; o.z += off; o.w += off;
    dst[base + j * 32] = o;
  }
}

__global__ void fill_small(uint32_t* values, size_t n) {
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < n) values[i] = mix(uint32_t(i) + 99u) & 15u;
}

static unsigned blocks_for(size_t n) { return unsigned((n + 255) / 256); }

// Median milliseconds of fn() over reps runs, after two warm-up runs.
template <class Fn>
static float median_ms(Fn&& fn, int reps) {
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  fn();
  fn();
  std::vector<float> times;
  for (int r = 0; r < reps; ++r) {
    CHECK(cudaEventRecord(start));
    fn();
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

template <class T>
static std::vector<T> to_host(const T* device, size_t n) {
  std::vector<T> host(n);
  CHECK(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

struct Buffers {
  size_t n;
  uint32_t *keys, *keys_out, *values, *values_out, *sums;
  float *select_in, *select_out;
  char* flags;
  int* selected;
  void* temp = nullptr;
  size_t temp_bytes = 0;
};

static void reserve_temp(Buffers& b, size_t bytes) {
  if (bytes <= b.temp_bytes) return;
  if (b.temp) CHECK(cudaFree(b.temp));
  CHECK(cudaMalloc(&b.temp, bytes));
  b.temp_bytes = bytes;
}

static void sort_keys(Buffers& b, size_t n) {
  size_t bytes = b.temp_bytes;
  CHECK(cub::DeviceRadixSort::SortKeys(b.temp, bytes, b.keys, b.keys_out, n));
}

static void sort_pairs(Buffers& b, size_t n) {
  size_t bytes = b.temp_bytes;
  CHECK(cub::DeviceRadixSort::SortPairs(b.temp, bytes, b.keys, b.keys_out, b.values, b.values_out, n));
}

static void inclusive_sum(Buffers& b) {
  size_t bytes = b.temp_bytes;
  CHECK(cub::DeviceScan::InclusiveSum(b.temp, bytes, b.keys, b.sums, b.n));
}

static void select_flagged(Buffers& b) {
  size_t bytes = b.temp_bytes;
  CHECK(cub::DeviceSelect::Flagged(b.temp, bytes, b.select_in, b.flags, b.select_out, b.selected, b.n));
}

// The largest temporary storage any of the calls needs (a first call with a
// null pointer only reports its size).
static void size_temp(Buffers& b) {
  size_t need = 0, bytes = 0;
  CHECK(cub::DeviceRadixSort::SortKeys(nullptr, bytes, b.keys, b.keys_out, b.n));
  need = std::max(need, bytes);
  CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, b.keys, b.keys_out, b.values, b.values_out, b.n));
  need = std::max(need, bytes);
  CHECK(cub::DeviceScan::InclusiveSum(nullptr, bytes, b.keys, b.sums, b.n));
  need = std::max(need, bytes);
  CHECK(cub::DeviceSelect::Flagged(nullptr, bytes, b.select_in, b.flags, b.select_out, b.selected, b.n));
  need = std::max(need, bytes);
  reserve_temp(b, need);
}

// Host-side checks of the last outputs; each failure adds a message.
static void check_sorted_pairs(const Buffers& b, size_t n, std::vector<std::string>& errors) {
  auto keys = to_host(b.keys, n), sorted = to_host(b.keys_out, n), order = to_host(b.values_out, n);
  if (!std::is_sorted(sorted.begin(), sorted.end())) errors.push_back("pairs: keys not sorted");
  for (size_t i = 0; i < n; ++i) {
    if (order[i] >= n || keys[order[i]] != sorted[i] || (i && sorted[i] == sorted[i - 1] && order[i] < order[i - 1])) {
      errors.push_back("pairs: values do not follow the keys stably");
      break;
    }
  }
}

static void check_sum(const Buffers& b, std::vector<std::string>& errors) {
  auto keys = to_host(b.keys, b.n), sums = to_host(b.sums, b.n);
  uint32_t total = 0;
  for (size_t i = 0; i < b.n; ++i) {
    total += keys[i];
    if (sums[i] != total) { errors.push_back("inclusive sum differs from the host's"); return; }
  }
}

static int check_select(const Buffers& b, std::vector<std::string>& errors) {
  auto in = to_host(b.select_in, b.n);
  auto flags = to_host(b.flags, b.n);
  int selected = 0;
  CHECK(cudaMemcpy(&selected, b.selected, sizeof(int), cudaMemcpyDeviceToHost));
  auto out = to_host(b.select_out, size_t(selected));
  size_t k = 0;
  for (size_t i = 0; i < b.n; ++i) {
    if (!flags[i]) continue;
    if (k >= size_t(selected) || out[k] != in[i]) { errors.push_back("flagged selection differs"); return selected; }
    ++k;
  }
  if (k != size_t(selected)) errors.push_back("flagged selection count differs");
  return selected;
}

// Each tile's own inclusive scan (LOOK false: offsets left out) or the whole scan.
static void check_skeleton(const uint32_t* in_d, const uint32_t* out_d, size_t n, bool look, const char* what,
                           std::vector<std::string>& errors) {
  auto in = to_host(in_d, n), out = to_host(out_d, n);
  uint32_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!look && i % SKEL_TILE == 0) total = 0;
    total += in[i];
    if (out[i] != total) { errors.push_back(what); return; }
  }
}

static float skeleton_ms(const uint32_t* in, uint32_t* out, uint32_t* state, size_t n, bool look, int reps) {
  unsigned tiles = unsigned(n / SKEL_TILE);
  return median_ms([&] {
    CHECK(cudaMemsetAsync(state, 0, (tiles + 1) * sizeof(uint32_t)));
    if (look) skeleton_scan<true><<<tiles, 256>>>((const uint4*)in, (uint4*)out, state);
    else skeleton_scan<false><<<tiles, 256>>>((const uint4*)in, (uint4*)out, state);
  }, reps);
}

// Keep the GPU busy for about a second so that its clocks are up.
static void warm_up(const Buffers& b) {
  auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1000)) {
    CHECK(cudaMemcpy(b.keys_out, b.keys, b.n * sizeof(uint32_t), cudaMemcpyDeviceToDevice));
    CHECK(cudaDeviceSynchronize());
  }
}

int main(int argc, char** argv) {
  size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (size_t(1) << 25);
  size_t small = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : (size_t(1) << 22);
  int reps = argc > 3 ? std::atoi(argv[3]) : 20;
  size_t copy_bytes = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : (size_t(1) << 30);
  if (n == 0 || n % SKEL_TILE || n >= (size_t(1) << 26) || small == 0 || small > n || reps <= 0 || copy_bytes == 0) {
    std::fprintf(stderr, "usage: cub_sort [N (a multiple of %d below 2^26) [SMALL_PAIRS <= N [REPS [COPY_BYTES]]]]\n",
                 SKEL_TILE);
    return 1;
  }
  Buffers b{};
  b.n = n;
  CHECK(cudaMalloc(&b.keys, n * 4)); CHECK(cudaMalloc(&b.keys_out, n * 4));
  CHECK(cudaMalloc(&b.values, n * 4)); CHECK(cudaMalloc(&b.values_out, n * 4));
  CHECK(cudaMalloc(&b.sums, n * 4));
  CHECK(cudaMalloc(&b.select_in, n * 4)); CHECK(cudaMalloc(&b.select_out, n * 4));
  CHECK(cudaMalloc(&b.flags, n)); CHECK(cudaMalloc(&b.selected, sizeof(int)));
  uint32_t *skel_in = nullptr, *skel_state = nullptr;
  CHECK(cudaMalloc(&skel_in, n * 4)); CHECK(cudaMalloc(&skel_state, (n / SKEL_TILE + 1) * 4));
  fill_small<<<blocks_for(n), 256>>>(skel_in, n);
  fill_keys<<<blocks_for(n), 256>>>(b.keys, n, 12345u);
  fill_iota<<<blocks_for(n), 256>>>(b.values, n);
  fill_select_input<<<blocks_for(n), 256>>>(b.select_in, b.flags, n, 777u);
  CHECK(cudaGetLastError());
  size_temp(b);
  warm_up(b);

  std::vector<std::string> errors;
  float keys_ms = median_ms([&] { sort_keys(b, n); }, reps);
  auto sorted = to_host(b.keys_out, n);
  if (!std::is_sorted(sorted.begin(), sorted.end())) errors.push_back("keys: not sorted");
  float small_ms = median_ms([&] { sort_pairs(b, small); }, reps);
  check_sorted_pairs(b, small, errors);
  float pairs_ms = median_ms([&] { sort_pairs(b, n); }, reps);
  check_sorted_pairs(b, n, errors);
  float sum_ms = median_ms([&] { inclusive_sum(b); }, reps);
  check_sum(b, errors);
  float select_ms = median_ms([&] { select_flagged(b); }, reps);
  int selected = check_select(b, errors);
  float tile_scan_ms = skeleton_ms(skel_in, b.sums, skel_state, n, false, reps);
  check_skeleton(skel_in, b.sums, n, false, "skeleton tile scan differs from the host's", errors);
  float lookback_scan_ms = skeleton_ms(skel_in, b.sums, skel_state, n, true, reps);
  check_skeleton(skel_in, b.sums, n, true, "skeleton look-back scan differs from the host's", errors);

  void *copy_src = nullptr, *copy_dst = nullptr;
  CHECK(cudaMalloc(&copy_src, copy_bytes)); CHECK(cudaMalloc(&copy_dst, copy_bytes));
  CHECK(cudaMemset(copy_src, 1, copy_bytes));
  float copy_ms = median_ms([&] {
    CHECK(cudaMemcpyAsync(copy_dst, copy_src, copy_bytes, cudaMemcpyDeviceToDevice));
  }, reps);

  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int runtime = 0;
  CHECK(cudaRuntimeGetVersion(&runtime));
  std::printf("{\"device\": \"%s\", \"cuda_runtime\": %d, \"cub_version\": %d, \"n\": %zu, "
              "\"small_pairs\": %zu, \"reps\": %d, \"copy_bytes\": %zu, \"selected\": %d, "
              "\"ms\": {\"sort_keys\": %.6f, \"sort_pairs\": %.6f, \"sort_pairs_small\": %.6f, "
              "\"inclusive_sum\": %.6f, \"select_flagged\": %.6f, \"memcpy\": %.6f, "
              "\"skeleton_tile_scan\": %.6f, \"skeleton_lookback_scan\": %.6f}, "
              "\"ok\": %s, \"errors\": [",
              prop.name, runtime, int(CUB_VERSION), n, small, reps, copy_bytes, selected,
              keys_ms, pairs_ms, small_ms, sum_ms, select_ms, copy_ms, tile_scan_ms, lookback_scan_ms,
              errors.empty() ? "true" : "false");
  for (size_t i = 0; i < errors.size(); ++i) std::printf("%s\"%s\"", i ? ", " : "", errors[i].c_str());
  std::printf("]}\n");
  return 0;
}
