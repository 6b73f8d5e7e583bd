#version 450
// One triangle that covers the whole viewport; uv runs 0..1 over the
// visible part (no vertex buffer: positions come from the vertex index).

layout(location = 0) out vec2 v_uv;

void main() {
    vec2 corner = vec2((gl_VertexIndex << 1) & 2, gl_VertexIndex & 2);
    v_uv = corner;
    gl_Position = vec4(corner * 2.0 - 1.0, 0.0, 1.0);
}
