#version 450
// The ocean surface as the renderer's points: grid point (x, z) moved by its
// displacements and lifted to its height, seen by an orbiting camera from
// above at a slant, coloured from deep water to crest. Writes the host's
// position buffer (clip x, y; z = nearness to the viewer; w = point size) and
// colour buffer. One invocation per grid point.

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) readonly buffer Fields { float fields[]; };   // (3, N, N): h, dx, dz
layout(std430, set = 0, binding = 1) writeonly buffer Positions { vec4 positions[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Colours { vec4 colours[]; };

layout(push_constant) uniform Push {
    uint n;
    float extent;     // patch size (m)
    float choppy;     // displacement scale
    float point_size;
    vec4 view;        // cos(angle), sin(angle), x scale, y scale
    vec4 look;        // height exaggeration, slant, colour height scale, intensity
} pc;

void main() {
    uint i = gl_GlobalInvocationID.x;
    uint count = pc.n * pc.n;
    if (i >= count) return;
    float gx = float(i % pc.n), gz = float(i / pc.n);
    float h = fields[i], dx = fields[count + i], dz = fields[2u * count + i];
    float x = (gx / float(pc.n) - 0.5) * pc.extent + pc.choppy * dx;
    float z = (gz / float(pc.n) - 0.5) * pc.extent + pc.choppy * dz;
    float xr = pc.view.x * x + pc.view.y * z;
    float zr = pc.view.x * z - pc.view.y * x;
    float y = h * pc.look.x;
    positions[i] = vec4(xr * pc.view.z, (zr * pc.look.y - y) * pc.view.w, -zr, pc.point_size);
    float crest = clamp(0.5 + h * pc.look.z, 0.0, 1.0);
    vec3 colour = mix(vec3(0.02, 0.12, 0.3), vec3(0.75, 0.9, 1.0), crest * crest);
    colours[i] = vec4(colour * pc.look.w, 1.0);
}
