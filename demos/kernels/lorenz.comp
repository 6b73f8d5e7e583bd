#version 450
// Particles on the Lorenz attractor: advance each particle with RK4
// substeps, then write the host's vertex buffers — position (projected by an
// orbiting orthographic camera; z = how near the particle is to the viewer,
// which the renderer ignores and a depth sort reads; w = point size) and
// colour (by speed, a = intensity). One invocation per particle.

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) buffer State { vec4 state[]; };          // xyz, w = 1
layout(std430, set = 0, binding = 1) writeonly buffer Positions { vec4 positions[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Colours { vec4 colours[]; };

layout(push_constant) uniform Push {
    uint count;
    uint substeps;
    uint write_colours;   // 0: leave the colour buffer to someone else
    float dt;
    vec4 view;            // cos(angle), sin(angle), x scale, y scale
    vec4 look;            // point size, intensity, 1 / reference speed^2, centre height
} pc;

const float SIGMA = 10.0;
const float RHO = 28.0;
const float BETA = 8.0 / 3.0;

vec3 velocity(vec3 p) {
    return vec3(SIGMA * (p.y - p.x), p.x * (RHO - p.z) - p.y, p.x * p.y - BETA * p.z);
}

void main() {
    // Grids wider than maxComputeWorkGroupCount.x continue in y.
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    if (i >= pc.count) return;

    vec3 p = state[i].xyz;
    vec3 v = vec3(0.0);
    float h = pc.dt;
    for (uint s = 0u; s < pc.substeps; ++s) {
        vec3 k1 = velocity(p);
        vec3 k2 = velocity(p + 0.5 * h * k1);
        vec3 k3 = velocity(p + 0.5 * h * k2);
        vec3 k4 = velocity(p + h * k3);
        v = (k1 + 2.0 * k2 + 2.0 * k3 + k4) / 6.0;
        p += h * v;
    }
    state[i] = vec4(p, 1.0);

    float across = pc.view.x * p.x + pc.view.y * p.y;   // turned about the z axis
    float nearness = pc.view.y * p.x - pc.view.x * p.y;  // along right x up: towards the viewer
    positions[i] = vec4(across * pc.view.z, (p.z - pc.look.w) * pc.view.w, nearness, pc.look.x);

    if (pc.write_colours != 0u) {
        float q = dot(v, v) * pc.look.z;                 // 1 at the reference speed
        // Slow: deep blue; fast: hot pink to white (additive blending clamps).
        colours[i] = vec4(0.15 + 0.9 * q, 0.08 + 0.45 * q, 0.75, pc.look.y);
    }
}
