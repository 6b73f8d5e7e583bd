#version 450
// The last step of the bloom: per pixel of the frame (packed RGBA8, one uint
// each), add the glow — bilinearly sampled from two blurred copies of the
// frame at quarter resolution, minus a threshold — then tonemap with
// 1 - exp(-exposure * x) and store the pixel back, opaque.

layout(local_size_x_id = 0, local_size_y_id = 1) in;

layout(std430, set = 0, binding = 0) buffer Frame { uint frame[]; };              // height x width
layout(std430, set = 0, binding = 1) readonly buffer Glow { uint glow[]; };       // 2 x glow_height x glow_width

layout(push_constant) uniform Push {
    uint width;
    uint height;
    uint glow_width;
    uint glow_height;
    float threshold;
    float near_gain;
    float wide_gain;
    float exposure;
} pc;

vec3 texel(uint layer, ivec2 q) {
    q = clamp(q, ivec2(0), ivec2(pc.glow_width, pc.glow_height) - 1);
    return unpackUnorm4x8(glow[(layer * pc.glow_height + uint(q.y)) * pc.glow_width + uint(q.x)]).rgb;
}

vec3 bilinear(uint layer, vec2 p) {
    ivec2 base = ivec2(floor(p));
    vec2 f = p - vec2(base);
    vec3 top = mix(texel(layer, base), texel(layer, base + ivec2(1, 0)), f.x);
    vec3 bottom = mix(texel(layer, base + ivec2(0, 1)), texel(layer, base + ivec2(1, 1)), f.x);
    return mix(top, bottom, f.y);
}

void main() {
    uvec2 xy = gl_GlobalInvocationID.xy;
    if (xy.x >= pc.width || xy.y >= pc.height) return;
    uint i = xy.y * pc.width + xy.x;

    // Glow texel j was taken from frame pixel 4j.
    vec2 p = vec2(xy) / 4.0;
    vec3 glow = pc.near_gain * max(bilinear(0u, p) - pc.threshold, 0.0)
              + pc.wide_gain * max(bilinear(1u, p) - pc.threshold, 0.0);
    vec3 colour = unpackUnorm4x8(frame[i]).rgb + glow;
    frame[i] = packUnorm4x8(vec4(1.0 - exp(-pc.exposure * colour), 1.0));
}
