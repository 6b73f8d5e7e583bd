// VkFFT's CUDA backend on the same GPU: a reference of the `fft` benchmark
// section (torch.fft, i.e. cuFFT, is the first; vkfft_vulkan.cpp is VkFFT
// through Vulkan).
//
// Built by benchmarks/vkfft_baseline.py with
//   nvcc -O3 -std=c++17 -DVKFFT_BACKEND=1 -I<folder holding vkFFT.h> vkfft_fft.cu -lcuda -lnvrtc
// VkFFT generates and compiles its kernels at plan time (NVRTC), so this file
// holds host code only.
//
// Usage: vkfft_fft ROUNDS [quick|full]
// Each case's time is the median over ROUNDS of CUDA events around a CUDA
// graph of 20 transforms (the way the section times cuFFT's small ones), per
// transform; vkfft_cases.h has the cases, the checks and the JSON printed.
#include "vkFFT.h"
#include "vkfft_cases.h"

namespace {

using cases::Case;
using cases::fail;

bool cuda_ok(cudaError_t e, const char* what) {
    return e == cudaSuccess || fail(std::string(what) + ": " + cudaGetErrorString(e));
}

bool vkfft_ok(VkFFTResult r, const char* what) {
    return r == VKFFT_SUCCESS || fail(std::string(what) + ": VkFFT error " + std::to_string(int(r)));
}

const int kCalls = 20;

double time_transform(VkFFTApplication& app, VkFFTLaunchParams& params, int direction, cudaStream_t stream,
                      int rounds) {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    bool appended = cuda_ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "capture");
    for (int i = 0; i < kCalls && appended; ++i) appended = vkfft_ok(VkFFTAppend(&app, direction, &params), "append");
    if (!cuda_ok(cudaStreamEndCapture(stream, &graph), "capture") || !appended
        || !cuda_ok(cudaGraphInstantiate(&exec, graph, 0), "graph")) {
        return 0;
    }
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    // Bring the clocks up with the transform itself before timing it.
    cudaEventRecord(start, stream);
    float ms = 0;
    while (ms < 300.0f && cases::errors().empty()) {
        cuda_ok(cudaGraphLaunch(exec, stream), "launch");
        cudaEventRecord(stop, stream);
        cuda_ok(cudaEventSynchronize(stop), "warm-up");
        cudaEventElapsedTime(&ms, start, stop);
    }
    std::vector<double> per_call;
    for (int r = 0; r < rounds && cases::errors().empty(); ++r) {
        cudaEventRecord(start, stream);
        cuda_ok(cudaGraphLaunch(exec, stream), "launch");
        cudaEventRecord(stop, stream);
        cuda_ok(cudaEventSynchronize(stop), "timing");
        cudaEventElapsedTime(&ms, start, stop);
        per_call.push_back(1e3 * ms / kCalls);
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    return cases::median(per_call);
}

bool run_case(const Case& c, CUdevice& device, cudaStream_t stream, int rounds, cases::Measured& m) {
    uint64_t bytes = cases::bytes(c);
    void* buffer = nullptr;
    if (!cuda_ok(cudaMalloc(&buffer, bytes), c.name)) return false;
    VkFFTConfiguration config = VKFFT_ZERO_INIT;
    cases::describe(config, c);
    config.device = &device;
    config.stream = &stream;
    config.num_streams = 1;
    config.buffer = &buffer;
    config.bufferSize = &bytes;
    VkFFTApplication app = VKFFT_ZERO_INIT;
    VkFFTLaunchParams params = VKFFT_ZERO_INIT;
    params.buffer = &buffer;
    bool ok = vkfft_ok(initializeVkFFT(&app, config), c.name);
    if (ok) {
        const std::vector<float> in = cases::input(c);
        std::vector<float> fwd(in.size()), back(in.size());
        ok = cuda_ok(cudaMemcpy(buffer, in.data(), bytes, cudaMemcpyHostToDevice), "upload")
             && vkfft_ok(VkFFTAppend(&app, -1, &params), "forward")
             && cuda_ok(cudaStreamSynchronize(stream), "forward")
             && cuda_ok(cudaMemcpy(fwd.data(), buffer, bytes, cudaMemcpyDeviceToHost), "download")
             && vkfft_ok(VkFFTAppend(&app, 1, &params), "inverse")
             && cuda_ok(cudaStreamSynchronize(stream), "inverse")
             && cuda_ok(cudaMemcpy(back.data(), buffer, bytes, cudaMemcpyDeviceToHost), "download")
             && cases::check(c, in, fwd, back, m);
    }
    if (ok) m.us = time_transform(app, params, c.direction, stream, rounds);
    deleteVkFFT(&app);
    cudaFree(buffer);
    return ok && m.us > 0;
}

}  // namespace

int main(int argc, char** argv) {
    const int rounds = argc > 1 ? std::max(1, atoi(argv[1])) : 10;
    const bool quick = argc > 2 && std::string(argv[2]) == "quick";
    CUdevice device;
    cudaStream_t stream;
    cudaDeviceProp prop = {};
    bool ok = (cuInit(0) == CUDA_SUCCESS && cuDeviceGet(&device, 0) == CUDA_SUCCESS) || fail("no CUDA device");
    ok = ok && cuda_ok(cudaSetDevice(0), "cudaSetDevice") && cuda_ok(cudaFree(nullptr), "context")
         && cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream")
         && cuda_ok(cudaGetDeviceProperties(&prop, 0), "properties");
    const auto done = cases::run_all(quick, ok, [&](const Case& c, cases::Measured& m) {
        return run_case(c, device, stream, rounds, m);
    });
    cases::print_json("cuda", prop.name, VkFFTGetVersion(), rounds, done);
    return cases::errors().empty() ? 0 : 1;
}
