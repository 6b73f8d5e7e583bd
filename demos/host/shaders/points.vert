#version 450
// Point sprites for particles.
//   position: xy in clip space, z unused, w = point size in pixels
//             (multiplied by the push constant point_scale)
//   color:    rgb colour, a = intensity (the pipeline blends additively)

layout(location = 0) in vec4 in_position;
layout(location = 1) in vec4 in_color;

layout(push_constant) uniform Push {
    float point_scale;
} push;

layout(location = 0) out vec4 v_color;

void main() {
    gl_Position = vec4(in_position.xy, 0.0, 1.0);
    gl_PointSize = max(in_position.w * push.point_scale, 1.0);
    v_color = in_color;
}
