#version 450
// Round, soft-edged point sprite; output is premultiplied by intensity
// so that additive blending (ONE, ONE) accumulates light.

layout(location = 0) in vec4 v_color;
layout(location = 0) out vec4 out_color;

void main() {
    vec2 d = gl_PointCoord * 2.0 - 1.0;
    float r2 = dot(d, d);
    if (r2 > 1.0) {
        discard;
    }
    float falloff = 1.0 - r2;
    out_color = vec4(v_color.rgb * (v_color.a * falloff), 1.0);
}
