#version 450
// Round, soft-edged point sprite for "over" blending (ONE, ONE_MINUS_SRC_ALPHA):
// the colour is premultiplied by its coverage, intensity x falloff, which is
// also the alpha, so a sprite hides part of what was drawn before it. Drawn
// back to front, the nearest particles end up on top.

layout(location = 0) in vec4 v_color;
layout(location = 0) out vec4 out_color;

void main() {
    vec2 d = gl_PointCoord * 2.0 - 1.0;
    float r2 = dot(d, d);
    if (r2 > 1.0) {
        discard;
    }
    float alpha = clamp(v_color.a * (1.0 - r2), 0.0, 1.0);
    out_color = vec4(v_color.rgb * alpha, alpha);
}
