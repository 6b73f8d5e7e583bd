#version 450
// Ripples on a water surface, drawn by the host as its backdrop texture.
// One invocation per cell: advance the damped wave equation one step,
//   next = damping * (2 h - prev + c2 * laplacian(h)) (+ a drop),
// written over `prev` (each cell reads only its own old value there), and
// shade the surface by its slope into the texture the renderer samples.

layout(local_size_x = 16, local_size_y = 16) in;

layout(std430, set = 0, binding = 0) readonly buffer Now { float h[]; };
layout(std430, set = 0, binding = 1) buffer Before { float prev[]; };   // becomes the next step
layout(set = 0, binding = 2, rgba8) uniform writeonly image2D surface;

layout(push_constant) uniform Push {
    uint width;
    uint height;
    float c2;          // (wave speed * dt / dx)^2, below 0.5 for stability
    float damping;
    vec4 drop;         // x, y (cells), radius (cells), amplitude (0: no drop)
} pc;

float at(int x, int y) {
    // Edges reflect: the border cell stands in for its missing neighbour.
    x = clamp(x, 0, int(pc.width) - 1);
    y = clamp(y, 0, int(pc.height) - 1);
    return h[uint(y) * pc.width + uint(x)];
}

void main() {
    ivec2 p = ivec2(gl_GlobalInvocationID.xy);
    if (p.x >= int(pc.width) || p.y >= int(pc.height)) return;
    uint i = uint(p.y) * pc.width + uint(p.x);

    float centre = h[i];
    float left = at(p.x - 1, p.y), right = at(p.x + 1, p.y);
    float down = at(p.x, p.y - 1), up = at(p.x, p.y + 1);
    float laplacian = (left + right + down + up) - 4.0 * centre;
    float next = pc.damping * ((2.0 * centre - prev[i]) + pc.c2 * laplacian);
    vec2 d = vec2(p) - pc.drop.xy;
    float r2 = dot(d, d);
    float radius2 = pc.drop.z * pc.drop.z;
    if (r2 < radius2) {
        next += pc.drop.w * (1.0 - r2 / radius2);
    }
    prev[i] = next;

    // Deep blue water, lit from the upper left by the slope of `h`.
    vec2 slope = vec2(right - left, up - down);
    float light = clamp(0.5 - 2.0 * (slope.x + slope.y), 0.0, 1.0);
    vec3 colour = vec3(0.001, 0.002, 0.006) + light * vec3(0.003, 0.007, 0.016);
    imageStore(surface, p, vec4(colour, 1.0));
}
