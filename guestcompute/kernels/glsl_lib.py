"""GLSL snippets shared by kernel families."""

# Linear workgroup index for grids folded by spec.groups_for().
WG_INDEX = ("(gl_WorkGroupID.x + gl_NumWorkGroups.x * (gl_WorkGroupID.y + "
            "gl_NumWorkGroups.y * gl_WorkGroupID.z))")

# Linear invocation index for grids folded by spec.groups_for().
LINEAR_INDEX = ("uint(gl_GlobalInvocationID.x + gl_NumWorkGroups.x * gl_WorkGroupSize.x * "
                "(gl_GlobalInvocationID.y + gl_NumWorkGroups.y * gl_GlobalInvocationID.z))")

F16_EXTENSIONS = ("GL_EXT_shader_16bit_storage", "GL_EXT_shader_explicit_arithmetic_types_float16")
U8_EXTENSIONS = ("GL_EXT_shader_8bit_storage", "GL_EXT_shader_explicit_arithmetic_types_int8")
