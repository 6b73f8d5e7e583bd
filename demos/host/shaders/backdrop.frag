#version 450
// The backdrop texture, stretched over the frame (linear filtering).

layout(set = 0, binding = 0) uniform sampler2D backdrop;
layout(location = 0) in vec2 v_uv;
layout(location = 0) out vec4 out_color;

void main() {
    out_color = vec4(texture(backdrop, v_uv).rgb, 1.0);
}
