// What the two VkFFT reference programs share (vkfft_fft.cu: CUDA backend,
// vkfft_vulkan.cpp: Vulkan backend): the transforms of the `fft` benchmark
// section, the checks of a result, and the JSON both print.
//
// Each program plans every case with VkFFT in its backend, checks a forward
// + inverse round trip against N times the input and one forward bin against
// a direct sum in double precision, then times the case's direction and
// prints one object: {"device", "backend", "vkfft_version", "rounds", "us":
// {case: median µs of one transform}, "checks": {case: [round trip, bin]},
// "ok", "errors"}. Include it after vkFFT.h.
#pragma once

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace cases {

struct Case {
    const char* name;
    int dims;                 // 1 or 2
    uint64_t size[2];         // size[0] is the axis along memory
    uint64_t batches;
    bool real;                // R2C / C2R with VkFFT's in-place padded rows
    int direction;            // -1 forward, 1 inverse: the direction timed
};

// The section's transforms; "quick" keeps their shapes with fewer batches
// (a smoke run on a slow device).
inline Case make(const char* name, int dims, uint64_t x, uint64_t y, uint64_t batches, bool real, int direction) {
    Case c;
    c.name = name;
    c.dims = dims;
    c.size[0] = x;
    c.size[1] = y;
    c.batches = batches;
    c.real = real;
    c.direction = direction;
    return c;
}

inline std::vector<Case> all(bool quick) {
    const uint64_t values = quick ? 1ull << 16 : 32ull << 20;    // complex64 values of the batched 1-D rows
    const uint64_t planes = quick ? 1 : 32;
    std::vector<Case> out;
    out.push_back(make("c2c_2d_1024x1024x32", 2, 1024, 1024, planes, false, -1));
    out.push_back(make("r2c_2d_1024x1024x32", 2, 1024, 1024, planes, true, -1));
    out.push_back(make("c2r_2d_1024x1024x32", 2, 1024, 1024, planes, true, 1));
    out.push_back(make("c2c_1d_256", 1, 256, 1, values / 256, false, -1));
    out.push_back(make("c2c_1d_1024", 1, 1024, 1, values / 1024, false, -1));
    out.push_back(make("c2c_1d_4096", 1, 4096, 1, values / 4096, false, -1));
    out.push_back(make("c2c_2d_512_single", 2, 512, 512, 1, false, -1));
    out.push_back(make("c2r_2d_512x6", 2, 512, 512, quick ? 2 : 6, true, 1));
    return out;
}

inline std::vector<std::string>& errors() {
    static std::vector<std::string> list;
    return list;
}

inline bool fail(const std::string& what) {
    errors().push_back(what);
    return false;
}

// Floats per row as VkFFT lays them out: complex rows are 2 * n floats, real
// rows in place are padded to n / 2 + 1 complex values.
inline uint64_t row_floats(const Case& c) { return c.real ? 2 * (c.size[0] / 2 + 1) : 2 * c.size[0]; }

inline uint64_t rows(const Case& c) { return c.size[1] * c.batches; }

inline uint64_t bytes(const Case& c) { return sizeof(float) * row_floats(c) * rows(c); }

inline std::vector<float> input(const Case& c) {
    std::vector<float> in(bytes(c) / sizeof(float));
    std::mt19937 rng(28);
    std::normal_distribution<float> normal;
    for (auto& v : in) v = normal(rng);
    return in;
}

// Relative RMS distance of the round trip from N times the input, over the
// values that hold data (a real row's padding does not).
inline double round_trip_error(const Case& c, const std::vector<float>& in, const std::vector<float>& out) {
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

// Error of the forward transform's bin (3, 2) (bin 3 in 1-D) of the first
// batch against a direct sum, relative to the RMS of that batch's bins.
inline double forward_bin_error(const Case& c, const std::vector<float>& in, const std::vector<float>& fwd) {
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
    const uint64_t bins = c.real ? nx / 2 + 1 : nx;
    double power = 0;
    for (uint64_t y = 0; y < ny; ++y)
        for (uint64_t b = 0; b < 2 * bins; ++b) power += double(fwd[y * row_floats(c) + b]) * fwd[y * row_floats(c) + b];
    return std::abs(got - sum) / std::sqrt(power / double(ny * bins));
}

struct Measured {
    double us = 0, round_trip = 0, bin = 0;
};

// Both checks of a case's forward output ``fwd`` and round trip ``back``.
inline bool check(const Case& c, const std::vector<float>& in, const std::vector<float>& fwd,
                  const std::vector<float>& back, Measured& m) {
    m.round_trip = round_trip_error(c, in, back);
    m.bin = forward_bin_error(c, in, fwd);
    if (m.round_trip <= 1e-5 && m.bin <= 1e-4) return true;
    return fail(std::string(c.name) + ": round trip " + std::to_string(m.round_trip) + ", bin " + std::to_string(m.bin));
}

// The case's transform in VkFFT's terms, whichever the backend.
inline void describe(VkFFTConfiguration& config, const Case& c) {
    config.FFTdim = c.dims;
    config.size[0] = c.size[0];
    config.size[1] = c.dims == 2 ? c.size[1] : 1;
    config.numberBatches = c.batches;
    config.performR2C = c.real ? 1 : 0;
}

// Every case through ``run(case, measured)`` (false: stop there), in order,
// none when ``ok`` is false.
template <class Run>
std::vector<std::pair<Case, Measured>> run_all(bool quick, bool ok, Run run) {
    std::vector<std::pair<Case, Measured>> done;
    for (const Case& c : all(quick)) {
        Measured m;
        if (!ok || !run(c, m)) break;
        done.emplace_back(c, m);
    }
    return done;
}

inline double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

inline void print_json(const char* backend, const std::string& device, int version, int rounds,
                       const std::vector<std::pair<Case, Measured>>& done) {
    std::string us = "{", checks = "{", errs = "[";
    for (const auto& item_done : done) {
        const Case& c = item_done.first;
        const Measured& m = item_done.second;
        char item[256];
        snprintf(item, sizeof item, "%s\"%s\": %.3f", us.size() > 1 ? ", " : "", c.name, m.us);
        us += item;
        snprintf(item, sizeof item, "%s\"%s\": [%.3e, %.3e]", checks.size() > 1 ? ", " : "", c.name, m.round_trip,
                 m.bin);
        checks += item;
    }
    for (size_t i = 0; i < errors().size(); ++i) {
        std::string e = errors()[i];
        std::replace(e.begin(), e.end(), '"', '\'');
        std::replace(e.begin(), e.end(), '\\', '/');
        errs += (i ? ", \"" : "\"") + e + "\"";
    }
    std::string name = device;
    std::replace(name.begin(), name.end(), '"', '\'');
    printf("{\"device\": \"%s\", \"backend\": \"%s\", \"vkfft_version\": %d, \"rounds\": %d, \"us\": %s}, "
           "\"checks\": %s}, \"ok\": %s, \"errors\": %s]}\n",
           name.c_str(), backend, version, rounds, us.c_str(), checks.c_str(), errors().empty() ? "true" : "false",
           errs.c_str());
}

}  // namespace cases
