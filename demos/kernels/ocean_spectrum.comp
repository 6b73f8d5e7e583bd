#version 450
// Tessendorf's ocean spectrum at time t: for every wave vector of the half
// spectrum an rfft2 keeps (kx >= 0), h(k, t) = h0(k) e^{iwt} + conj(h0(-k)) e^{-iwt}
// with w = sqrt(g |k|), and the horizontal displacement spectra -i kx/|k| h and
// -i ky/|k| h. The three land as one (3, N, N/2 + 1) complex64 tensor that a
// single irfft2 turns into heights and displacements. One invocation per wave vector.

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) readonly buffer H0 { vec2 h0[]; };        // (N, N) amplitudes, [ky][kx]
layout(std430, set = 0, binding = 1) readonly buffer Omega { float omega[]; };  // (N, N/2 + 1) w(k)
layout(std430, set = 0, binding = 2) writeonly buffer Spectra { vec2 spectra[]; };

layout(push_constant) uniform Push {
    uint n;           // grid size N
    float time;       // seconds
    float wave;       // 2 pi / patch length: wave number of index 1
} pc;

vec2 rotate(vec2 z, float c, float s) { return vec2(z.x * c - z.y * s, z.x * s + z.y * c); }

void main() {
    uint half_n = pc.n / 2u + 1u;
    uint i = gl_GlobalInvocationID.x;
    if (i >= pc.n * half_n) return;
    uint ky = i / half_n, kx = i % half_n;
    vec2 a = h0[ky * pc.n + kx];
    vec2 b = h0[((pc.n - ky) % pc.n) * pc.n + (pc.n - kx) % pc.n];       // h0(-k)
    float phase = omega[i] * pc.time;
    float c = cos(phase), s = sin(phase);
    vec2 eb = rotate(b, c, s);
    vec2 h = rotate(a, c, s) + vec2(eb.x, -eb.y);
    // Signed wave numbers as numpy.fft.fftfreq gives them: indices from N/2 on are negative.
    float fy = float(int(ky) - (ky >= pc.n / 2u ? int(pc.n) : 0)) * pc.wave;
    float fx = float(kx) * pc.wave;
    float k = sqrt(fx * fx + fy * fy);
    vec2 minus_i_h = vec2(h.y, -h.x);
    uint plane = pc.n * half_n;
    spectra[i] = h;
    spectra[plane + i] = k > 0.0 ? minus_i_h * (fx / k) : vec2(0.0);
    spectra[2u * plane + i] = k > 0.0 ? minus_i_h * (fy / k) : vec2(0.0);
}
