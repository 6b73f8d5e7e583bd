// VkFFT's CUDA backend on the same GPU: the second reference of the `fft`
// benchmark section (torch.fft, i.e. cuFFT, is the first).
//
// Built by benchmarks/vkfft_baseline.py with
//   nvcc -O3 -std=c++17 -DVKFFT_BACKEND=1 -I<folder holding vkFFT.h> vkfft_fft.cu -lcuda -lnvrtc
// VkFFT generates and compiles its kernels at plan time (NVRTC), so this file
// holds host code only.
//
// Usage: vkfft_fft ROUNDS
// Prints one JSON object: for each case the median GPU time of one transform
// in microseconds (CUDA events around a CUDA graph of CALLS transforms, the
// way the section times cuFFT's small transforms), and the relative RMS error
// of a forward + inverse round trip against N times the input plus the error
// of one forward bin against a direct sum in double precision. "ok" is false
// when any check failed or any call returned an error.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "vkFFT.h"

namespace {

struct Case {
    const char* name;
    int dims;                 // 1 or 2
    uint64_t size[2];         // size[0] is the axis along memory
    uint64_t batches;
    bool real;                // R2C / C2R with VkFFT's in-place padded rows
    int direction;            // -1 forward, 1 inverse: the direction timed
};

const uint64_t kBatchedValues = 32ull << 20;   // the section's 256 MiB of complex64 rows

const Case kCases[] = {
    {"c2c_2d_1024x1024x32", 2, {1024, 1024}, 32, false, -1},
    {"r2c_2d_1024x1024x32", 2, {1024, 1024}, 32, true, -1},
    {"c2r_2d_1024x1024x32", 2, {1024, 1024}, 32, true, 1},
    {"c2c_1d_256", 1, {256, 1}, kBatchedValues / 256, false, -1},
    {"c2c_1d_1024", 1, {1024, 1}, kBatchedValues / 1024, false, -1},
    {"c2c_1d_4096", 1, {4096, 1}, kBatchedValues / 4096, false, -1},
    {"c2c_2d_512_single", 2, {512, 512}, 1, false, -1},
    {"c2r_2d_512x6", 2, {512, 512}, 6, true, 1},
};

std::vector<std::string> g_errors;

bool cuda_ok(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return true;
    g_errors.push_back(std::string(what) + ": " + cudaGetErrorString(e));
    return false;
}

bool vkfft_ok(VkFFTResult r, const char* what) {
    if (r == VKFFT_SUCCESS) return true;
    g_errors.push_back(std::string(what) + ": VkFFT error " + std::to_string(int(r)));
    return false;
}

// Floats per row as VkFFT lays them out: complex rows are 2 * n floats, real
// rows in place are padded to n / 2 + 1 complex values.
uint64_t row_floats(const Case& c) { return c.real ? 2 * (c.size[0] / 2 + 1) : 2 * c.size[0]; }

uint64_t rows(const Case& c) { return c.size[1] * c.batches; }

// Relative RMS distance of the round trip from N times the input, over the
// values that hold data (a real row's padding does not).
double round_trip_error(const Case& c, const std::vector<float>& in, const std::vector<float>& out) {
    const double n = double(c.size[0]) * double(c.dims == 2 ? c.size[1] : 1);
    const uint64_t used = c.real ? c.size[0] : 2 * c.size[0];
    double diff = 0, norm = 0;
    for (uint64_t r = 0; r < rows(c); ++r) {
        for (uint64_t i = 0; i < used; ++i) {
            const uint64_t k = r * row_floats(c) + i;
            const double want = n * in[k];
            diff += (out[k] - want) * (out[k] - want);
            norm += want * want;
        }
    }
    return std::sqrt(diff / norm);
}

// Error of the forward transform's bin (kx, ky) of the first batch against a
// direct sum, relative to the RMS of the forward output's first batch.
double forward_bin_error(const Case& c, const std::vector<float>& in, const std::vector<float>& fwd) {
    const uint64_t nx = c.size[0], ny = c.dims == 2 ? c.size[1] : 1;
    const uint64_t kx = 3, ky = ny > 1 ? 2 : 0;
    std::complex<double> sum = 0;
    for (uint64_t y = 0; y < ny; ++y) {
        for (uint64_t x = 0; x < nx; ++x) {
            const uint64_t k = y * row_floats(c) + (c.real ? x : 2 * x);
            const std::complex<double> v(in[k], c.real ? 0.0 : in[k + 1]);
            const double turns = double(kx * x % nx) / double(nx) + double(ky * y % ny) / double(ny);
            sum += v * std::polar(1.0, -2.0 * M_PI * turns);
        }
    }
    const uint64_t at = ky * row_floats(c) + 2 * kx;
    const std::complex<double> got(fwd[at], fwd[at + 1]);
    double power = 0;
    const uint64_t bins = c.real ? nx / 2 + 1 : nx;
    for (uint64_t y = 0; y < ny; ++y)
        for (uint64_t b = 0; b < 2 * bins; ++b) power += double(fwd[y * row_floats(c) + b]) * fwd[y * row_floats(c) + b];
    return std::abs(got - sum) / std::sqrt(power / double(ny * bins));
}

struct Measured {
    double us = 0, round_trip = 0, bin = 0;
    bool graph = false;
};

// Median time of one transform: CALLS transforms captured in a graph (or
// launched back to back when capture fails), timed ROUNDS times.
double time_transform(VkFFTApplication& app, VkFFTLaunchParams& params, int direction, cudaStream_t stream,
                      int rounds, bool& graph_used) {
    const int calls = 20;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    graph_used = false;
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
        bool appended = true;
        for (int i = 0; i < calls; ++i) appended = appended && VkFFTAppend(&app, direction, &params) == VKFFT_SUCCESS;
        const bool captured = cudaStreamEndCapture(stream, &graph) == cudaSuccess && appended;
        graph_used = captured && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
    }
    cudaGetLastError();   // a failed capture leaves an error that must not reach the checks below
    auto launch = [&]() {
        if (graph_used) {
            cuda_ok(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
        } else {
            for (int i = 0; i < calls; ++i) vkfft_ok(VkFFTAppend(&app, direction, &params), "VkFFTAppend");
        }
    };
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    // Bring the clocks up with the transform itself before timing it.
    cudaEventRecord(start, stream);
    float warm_ms = 0;
    while (warm_ms < 300.0f && g_errors.empty()) {
        launch();
        cudaEventRecord(stop, stream);
        cudaEventSynchronize(stop);
        cudaEventElapsedTime(&warm_ms, start, stop);
    }
    std::vector<double> per_call;
    for (int r = 0; r < rounds && g_errors.empty(); ++r) {
        cudaEventRecord(start, stream);
        launch();
        cudaEventRecord(stop, stream);
        cuda_ok(cudaEventSynchronize(stop), "cudaEventSynchronize");
        float ms = 0;
        cudaEventElapsedTime(&ms, start, stop);
        per_call.push_back(1e3 * ms / calls);
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    if (per_call.empty()) return 0;
    std::sort(per_call.begin(), per_call.end());
    return per_call[per_call.size() / 2];
}

bool run_case(const Case& c, CUdevice& device, cudaStream_t stream, int rounds, Measured& m) {
    uint64_t bytes = sizeof(float) * row_floats(c) * rows(c);
    void* buffer = nullptr;
    if (!cuda_ok(cudaMalloc(&buffer, bytes), c.name)) return false;
    VkFFTConfiguration config = VKFFT_ZERO_INIT;
    config.FFTdim = c.dims;
    config.size[0] = c.size[0];
    config.size[1] = c.dims == 2 ? c.size[1] : 1;
    config.numberBatches = c.batches;
    config.performR2C = c.real ? 1 : 0;
    config.device = &device;
    config.stream = &stream;
    config.num_streams = 1;
    config.buffer = &buffer;
    config.bufferSize = &bytes;
    VkFFTApplication app = VKFFT_ZERO_INIT;
    bool ok = vkfft_ok(initializeVkFFT(&app, config), c.name);
    VkFFTLaunchParams params = VKFFT_ZERO_INIT;
    params.buffer = &buffer;
    if (ok) {
        std::vector<float> in(bytes / sizeof(float)), fwd(in.size()), back(in.size());
        std::mt19937 rng(28);
        std::normal_distribution<float> normal;
        for (auto& v : in) v = normal(rng);
        ok = cuda_ok(cudaMemcpy(buffer, in.data(), bytes, cudaMemcpyHostToDevice), "upload")
             && vkfft_ok(VkFFTAppend(&app, -1, &params), "forward")
             && cuda_ok(cudaStreamSynchronize(stream), "forward")
             && cuda_ok(cudaMemcpy(fwd.data(), buffer, bytes, cudaMemcpyDeviceToHost), "download")
             && vkfft_ok(VkFFTAppend(&app, 1, &params), "inverse")
             && cuda_ok(cudaStreamSynchronize(stream), "inverse")
             && cuda_ok(cudaMemcpy(back.data(), buffer, bytes, cudaMemcpyDeviceToHost), "download");
        if (ok) {
            m.round_trip = round_trip_error(c, in, back);
            m.bin = forward_bin_error(c, in, fwd);
            if (!(m.round_trip <= 1e-5) || !(m.bin <= 1e-4)) {
                g_errors.push_back(std::string(c.name) + ": round trip " + std::to_string(m.round_trip) + ", bin "
                                   + std::to_string(m.bin));
                ok = false;
            }
        }
    }
    if (ok) m.us = time_transform(app, params, c.direction, stream, rounds, m.graph);
    deleteVkFFT(&app);
    cudaFree(buffer);
    return ok && g_errors.empty() && m.us > 0;
}

}  // namespace

int main(int argc, char** argv) {
    const int rounds = argc > 1 ? std::max(1, atoi(argv[1])) : 10;
    CUdevice device;
    cudaStream_t stream;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&device, 0) != CUDA_SUCCESS) g_errors.push_back("no CUDA device");
    cudaDeviceProp prop = {};
    if (g_errors.empty() && cuda_ok(cudaSetDevice(0), "cudaSetDevice") && cuda_ok(cudaFree(nullptr), "context")
        && cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream")) {
        cudaGetDeviceProperties(&prop, 0);
    }
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    std::string us = "{", checks = "{";
    bool graph = true;
    for (const Case& c : kCases) {
        if (!g_errors.empty()) break;
        Measured m;
        if (!run_case(c, device, stream, rounds, m)) break;
        graph = graph && m.graph;
        char item[200];
        snprintf(item, sizeof item, "%s\"%s\": %.3f", us.size() > 1 ? ", " : "", c.name, m.us);
        us += item;
        snprintf(item, sizeof item, "%s\"%s\": [%.3e, %.3e]", checks.size() > 1 ? ", " : "", c.name, m.round_trip,
                 m.bin);
        checks += item;
    }
    std::string errors = "[";
    for (size_t i = 0; i < g_errors.size(); ++i) {
        std::string e = g_errors[i];
        std::replace(e.begin(), e.end(), '"', '\'');
        errors += (i ? ", \"" : "\"") + e + "\"";
    }
    printf("{\"device\": \"%s\", \"vkfft_version\": %d, \"cuda_runtime\": %d, \"rounds\": %d, \"graph\": %s, "
           "\"us\": %s}, \"checks\": %s}, \"ok\": %s, \"errors\": %s]}\n",
           prop.name, VkFFTGetVersion(), runtime, rounds, graph ? "true" : "false", us.c_str(), checks.c_str(),
           g_errors.empty() ? "true" : "false", errors.c_str());
    return g_errors.empty() ? 0 : 1;
}
