"""GLSL snippets shared by kernel families."""

# Linear invocation index for grids folded by spec.groups_for().
LINEAR_INDEX = ("uint(gl_GlobalInvocationID.x + gl_NumWorkGroups.x * gl_WorkGroupSize.x * "
                "(gl_GlobalInvocationID.y + gl_NumWorkGroups.y * gl_GlobalInvocationID.z))")

F16_EXTENSIONS = ("GL_EXT_shader_16bit_storage", "GL_EXT_shader_explicit_arithmetic_types_float16")
U8_EXTENSIONS = ("GL_EXT_shader_8bit_storage", "GL_EXT_shader_explicit_arithmetic_types_int8")
