"""Hostile inputs across the public API.

Every case must raise a typed GuestComputeError whose message says what to
do, and must leave the host's command buffer intact: each case runs between
two pieces of the host's own work (vkCmdFillBuffer before and after) in one
command buffer; after the failure the guest records one valid op into that
same buffer, which is then submitted. The host's fills and the guest's
result are both checked, and any validation message fails the test.

NaN/Inf data and zero-size tensors are not errors: they must behave exactly
like numpy (their own tests at the end).
"""
import re
import threading
import time
from dataclasses import dataclass

import numpy as np
import pytest

import guestcompute as gc
from guestcompute.kernels.spec import READWRITE, Binding, KernelSpec, Push, family
from guestcompute.ops.base import Dispatch
from guestcompute.testing import limit_binding_range

PROFILES = ("bare", "modern")
ONE, TWO = 0x3F800000, 0x40000000          # 1.0f and 2.0f as fill words


@family("hostile_test_kernel")
def _hostile_kernel(spec):
    # Never compiled: the cases using it fail before any SPIR-V is needed.
    return "void main() {}"


def _kernel(n_bindings: int, push_words: int = 1) -> KernelSpec:
    return KernelSpec("hostile_test_kernel",
                      tuple(Binding(f"b{i}", "float", READWRITE) for i in range(n_bindings)),
                      (Push("p", "uint", push_words),), (), (64, 1, 1))


# -- the environment a case sees ---------------------------------------------------

_host_buffers: dict = {}


def _host_buffer(host, name: str, size: int):
    """Host-owned buffers, made once per host (the host frees them at close)."""
    key = (id(host), name)
    if key not in _host_buffers:
        _host_buffers[key] = host.create_buffer(size)
    return _host_buffers[key]


class Env:
    def __init__(self, host, ctx):
        self.host, self.ctx = host, ctx
        self.f = ctx.tensor(np.arange(8, dtype=np.float32))
        self.i = ctx.tensor(np.arange(8, dtype=np.int32))
        self.buf = _host_buffer(host, "import", 64)       # 64-byte buffer to import views of
        self._others = []

    def other(self):
        """Another, open context on the same device."""
        c = self.host.adopt()
        self._others.append(c)
        return c

    def closed(self):
        """A context that is already closed, and a tensor it made."""
        c = self.host.adopt()
        t = c.tensor(np.ones(4, np.float32))
        c.close()
        return c, t

    def closed_image(self):
        """A guest image whose context is already closed."""
        c = self.host.adopt()
        img = c.image((4, 4), "rgba8_unorm")
        c.close()
        return img

    def close(self):
        for c in self._others:
            c.close()
        self.ctx.close()


@dataclass
class Case:
    fn: object
    error: type
    hint: str               # regex: the part of the message that says what to do
    profiles: tuple
    recording: bool         # run inside `with ctx.record(cmd) as rec` (else fn(env, cmd))


CASES: dict = {}


def case(error, hint, *, profiles=PROFILES, recording=True):
    def register(fn):
        assert fn.__name__ not in CASES
        CASES[fn.__name__] = Case(fn, error, hint, profiles, recording)
        return fn
    return register


# -- dtypes --------------------------------------------------------------------------

@case(gc.DTypeError, r"cast one first")
def add_float32_to_int32(env, rec):
    rec.add(env.f, env.i)


@case(gc.DTypeError, r"use one of", recording=False)
def unknown_dtype_name(env, cmd):
    env.ctx.empty((4,), "complex128")


@case(gc.InvalidArgumentError, r"use a value in \[-2147483648, 2147483648\)", recording=False)
def int64_numpy_data_beyond_int32(env, cmd):
    env.ctx.tensor(np.array([0, 2 ** 40], dtype=np.int64))


@case(gc.DTypeError, r"pass an out of dtype float32")
def out_of_the_wrong_dtype(env, rec):
    rec.add(env.f, env.f, out=env.ctx.empty((8,), "int32"))


@case(gc.DTypeError, r"use one of", profiles=("modern",))
def uint8_where_the_op_has_no_uint8_kernel(env, rec):
    u = env.ctx.tensor(np.arange(8, dtype=np.uint8))
    rec.add(u, u)


@case(gc.DTypeError, r"use one of", profiles=("modern",))
def cumsum_of_float16(env, rec):
    rec.cumsum(env.ctx.tensor(np.zeros(4, np.float16)))


@case(gc.UnsupportedError, r"gc\.requirements", profiles=("bare",), recording=False)
def float16_on_the_bare_profile(env, cmd):
    env.ctx.empty((4,), "float16")


@case(gc.UnsupportedError, r"gc\.requirements", profiles=("bare",), recording=False)
def uint8_data_on_the_bare_profile(env, cmd):
    env.ctx.tensor(np.zeros(4, np.uint8))


@case(gc.UnsupportedError, r"gc\.requirements", profiles=("bare",), recording=False)
def float16_import_on_the_bare_profile(env, cmd):
    env.ctx.import_buffer(env.buf, (4,), "float16", buffer_size=64)


@case(gc.DTypeError, r"convert it first", recording=False)
def data_that_does_not_convert(env, cmd):
    env.ctx.tensor(["one", "two"], dtype="float32")


# -- shapes and broadcasting -----------------------------------------------------------

@case(gc.ShapeError, r"must match or be 1")
def shape_mismatch(env, rec):
    rec.add(env.f, env.ctx.empty((9,)))


@case(gc.ShapeError, r"must match or be 1")
def broadcast_mismatch_2d(env, rec):
    rec.mul(env.ctx.empty((2, 3)), env.ctx.empty((4, 3)))


@case(gc.ShapeError, r"pass an out of the result's shape")
def out_of_the_wrong_shape(env, rec):
    rec.add(env.f, env.f, out=env.ctx.empty((2, 4)))


@case(gc.ShapeError, r"dimensions must be >= 0", recording=False)
def negative_dimension(env, cmd):
    env.ctx.empty((4, -1))


@case(gc.ShapeError, r"sequence of ints", recording=False)
def fractional_dimension(env, cmd):
    env.ctx.empty((2.5, 2))


@case(gc.ShapeError, r"as many elements", recording=False)
def reshape_to_another_size(env, cmd):
    env.f.reshape(3, 3)


@case(gc.ShapeError, r"give each of", recording=False)
def permute_with_an_axis_out_of_range(env, cmd):
    env.f.permute(1)


@case(gc.ShapeError, r"use -8\.\.7", recording=False)
def index_out_of_range(env, cmd):
    env.f[8]


@case(gc.ShapeError, r"make an operand contiguous first")
def seven_strided_dims(env, rec):
    rec.add(env.ctx.empty((2,) * 7).permute(6, 5, 4, 3, 2, 1, 0), 1.0)


@case(gc.ShapeError, r"reshape the data", recording=False)
def write_of_the_wrong_shape(env, cmd):
    env.f.write(np.ones(9, np.float32))


@case(gc.ShapeError, r"use an int in -1\.\.0")
def cumsum_axis_out_of_range(env, rec):
    rec.cumsum(env.f, axis=1)


@case(gc.ShapeError, r"inner dimensions")
def matmul_inner_dimensions_differ(env, rec):
    rec.matmul(env.ctx.empty((2, 3)), env.ctx.empty((4, 2)))


# -- non-contiguous views where unsupported --------------------------------------------

@case(gc.ShapeError, r"copy it first", recording=False)
def reshape_of_a_transposed_view(env, cmd):
    env.ctx.empty((2, 4)).T.reshape(8)


@case(gc.InvalidArgumentError, r"write the base tensor", recording=False)
def write_into_a_strided_view(env, cmd):
    env.f[::2].write(np.zeros(4, np.float32))


@case(gc.InvalidArgumentError, r"a base tensor, not a view", recording=False)
def resize_of_a_view(env, cmd):
    env.f[2:].resize((16,))


@case(gc.InvalidArgumentError, r"must be contiguous")
def histogram_into_a_strided_out(env, rec):
    rec.histogram(env.f, bins=4, range=(0.0, 8.0), out=env.ctx.empty((8,), "uint32")[::2])


# -- outputs aliasing inputs ---------------------------------------------------------------

@case(gc.InvalidArgumentError, r"separate output tensor")
def elementwise_out_partly_overlapping_an_input(env, rec):
    rec.add(env.f[1:], env.f[:-1], out=env.f[:-1])


@case(gc.InvalidArgumentError, r"separate output tensor")
def matmul_out_aliasing_an_operand(env, rec):
    a = env.ctx.empty((4, 4))
    rec.matmul(a, env.ctx.empty((4, 4)), out=a)


@case(gc.InvalidArgumentError, r"pass x itself")
def cumsum_out_shifted_over_its_input(env, rec):
    rec.cumsum(env.f[:4], out=env.f[1:5])


@case(gc.InvalidArgumentError, r"must not overlap img")
def conv2d_out_aliasing_its_image(env, rec):
    img = env.ctx.empty((8, 8))
    rec.conv2d(img, np.ones((3, 3), np.float32), out=img)


@case(gc.InvalidArgumentError, r"pass the input itself")
def sort_out_shifted_over_its_keys(env, rec):
    keys = env.ctx.tensor(np.arange(16, dtype=np.uint32))
    rec.sort(keys[:8], out_keys=keys[4:12])


# -- imported buffers: offsets and sizes -------------------------------------------------------

@case(gc.BufferRangeError, r"non-negative int of bytes", recording=False)
def import_at_a_negative_offset(env, cmd):
    env.ctx.import_buffer(env.buf, (4,), offset=-4, buffer_size=64)


@case(gc.BufferRangeError, r"align the offset", recording=False)
def import_at_an_unaligned_offset(env, cmd):
    env.ctx.import_buffer(env.buf, (4,), offset=6, buffer_size=64)


@case(gc.BufferRangeError, r"shrink the shape or the offset", recording=False)
def import_past_the_declared_size(env, cmd):
    env.ctx.import_buffer(env.buf, (8,), offset=40, buffer_size=64)


@case(gc.BufferRangeError, r"pass the real buffer_size", recording=False)
def import_past_the_real_buffer_without_a_size(env, cmd):
    env.ctx.import_buffer(env.buf, (1000,))


@case(gc.BufferRangeError, r"pass the real buffer_size", recording=False)
def import_claiming_a_larger_buffer(env, cmd):
    env.ctx.import_buffer(env.buf, (4,), buffer_size=1 << 20)


@case(gc.BufferRangeError, r"positive int", recording=False)
def import_with_a_float_buffer_size(env, cmd):
    env.ctx.import_buffer(env.buf, (4,), buffer_size=64.0)


@case(gc.InvalidArgumentError, r"use one of", recording=False)
def import_with_an_unknown_host_access(env, cmd):
    env.ctx.import_buffer(env.buf, (4,), host_access="vertex|telepathy", buffer_size=64)


# -- handles of the wrong kind, and ints that are not handles ------------------------------------

@case(gc.InvalidArgumentError, r"got a VkBuffer; pass the VkCommandBuffer", recording=False)
def vkbuffer_passed_as_a_command_buffer(env, cmd):
    env.ctx.record(env.buf)


@case(gc.InvalidArgumentError, r"got a VkDevice; pass the VkCommandBuffer", recording=False)
def vkdevice_passed_as_a_command_buffer(env, cmd):
    env.ctx.record(env.host.device)


@case(gc.InvalidArgumentError, r"got a VkCommandBuffer; pass the VkBuffer", recording=False)
def command_buffer_passed_as_a_buffer(env, cmd):
    env.ctx.import_buffer(cmd, (4,), buffer_size=64)


@case(gc.InvalidArgumentError, r"got a VkQueue; pass the VkDevice", recording=False)
def queue_passed_as_the_device(env, cmd):
    gc.Context.adopt(**env.host.adopt_kwargs(device=env.host.queue))


def _not_a_handle(value):
    def fn(env, cmd):
        env.ctx.record(value)
    return fn


for _name, _value in [("zero", 0), ("negative", -5), ("beyond_64_bits", 1 << 64), ("bool", True),
                      ("float", 1.5), ("none", None), ("string", "cmd")]:
    _fn = _not_a_handle(_value)
    _fn.__name__ = f"{_name}_as_a_command_buffer"
    case(gc.InvalidArgumentError, r"pass the handle|expected a VkCommandBuffer handle \(cffi cdata or int\)",
         recording=False)(_fn)


@case(gc.InvalidArgumentError, r"'M\.m'", recording=False)
def api_version_that_is_not_a_version(env, cmd):
    gc.Context.adopt(**env.host.adopt_kwargs(api_version="vulkan-latest"))


@case(gc.InvalidArgumentError, r"non-negative int", recording=False)
def negative_queue_family(env, cmd):
    gc.Context.adopt(**env.host.adopt_kwargs(queue_family_index=-1))


@case(gc.InvalidArgumentError, r"list of names", recording=False)
def extensions_as_one_string(env, cmd):
    gc.Context.adopt(**env.host.adopt_kwargs(enabled_extensions="VK_KHR_push_descriptor"))


# -- contexts: closed, or not the tensor's own --------------------------------------------------

@case(gc.ContextClosedError, r"create or adopt a new context", recording=False)
def empty_on_a_closed_context(env, cmd):
    closed, _ = env.closed()
    closed.empty((4,))


@case(gc.ContextClosedError, r"create or adopt a new context", recording=False)
def numpy_of_a_tensor_whose_context_closed(env, cmd):
    _, t = env.closed()
    t.numpy()


@case(gc.ContextClosedError, r"create or adopt a new context", recording=False)
def record_on_a_closed_context(env, cmd):
    closed, _ = env.closed()
    closed.record(cmd)


@case(gc.ContextClosedError, r"create or adopt a new context", recording=False)
def numpy_of_an_image_whose_context_closed(env, cmd):
    env.closed_image().numpy()


@case(gc.ContextClosedError, r"create or adopt a new context", recording=False)
def write_into_an_image_whose_context_closed(env, cmd):
    env.closed_image().write(np.zeros((4, 4, 4), np.uint8))


@case(gc.ContextClosedError, r"create or adopt a new context", recording=False)
def numpy_of_a_level_of_an_image_whose_context_closed(env, cmd):
    env.closed_image().level(0).numpy()


@case(gc.ContextClosedError, r"create or adopt a new context", recording=False)
def write_into_a_level_of_an_image_whose_context_closed(env, cmd):
    env.closed_image().level(0).write(np.zeros((4, 4, 4), np.uint8))


@case(gc.ContextClosedError, r"with a new context", recording=False)
def context_closed_while_recording(env, cmd):
    """close() on another thread waits for this block; ops recorded meanwhile raise."""
    c = env.other()
    t = c.tensor(np.ones(4, np.float32))
    closer = threading.Thread(target=c.close)
    try:
        with c.record(cmd) as rec:
            closer.start()
            while not c.closed:         # close() began: it now waits for this block to end
                time.sleep(0.001)
            rec.add(t, t)
    finally:
        if closer.ident is not None:
            closer.join()


@case(gc.RecordingError, r"leave the block, then close", recording=False)
def context_closed_inside_its_own_recorder(env, cmd):
    c = env.other()
    t = c.tensor(np.ones(4, np.float32))
    with c.record(cmd) as rec:
        c.close()
        rec.add(t, t)


@case(gc.WrongContextError, r"use tensors of this context")
def tensor_of_another_context(env, rec):
    rec.add(env.f, env.other().tensor(np.ones(8, np.float32)))


@case(gc.WrongContextError, r"use tensors of this context")
def out_of_another_context(env, rec):
    rec.add(env.f, env.f, out=env.other().empty((8,)))


@case(gc.WrongContextError, r"use tensors of this context")
def tensor_of_a_closed_context(env, rec):
    _, t = env.closed()
    rec.scale(t, 2.0)


# -- recorder misuse and bad arguments ---------------------------------------------------------------

@case(gc.RecordingError, r"inside `with ctx.record", recording=False)
def op_after_the_with_block(env, cmd):
    with env.ctx.record(cmd) as rec:
        pass
    rec.add(env.f, env.f)


@case(gc.RecordingError, r"make a new one")
def recorder_entered_twice(env, rec):
    with rec:
        pass


@case(gc.UnknownOperationError, r"did you mean add")
def misspelt_operation(env, rec):
    rec.ad(env.f, env.f)


@case(gc.InvalidArgumentError, r"see help\(rec\.add\)")
def missing_argument(env, rec):
    rec.add(env.f)


@case(gc.InvalidArgumentError, r"see help\(rec\.scale\)")
def unknown_keyword(env, rec):
    rec.scale(env.f, 2.0, inplace=True)


@case(gc.InvalidArgumentError, r"takes a Dispatch")
def dispatch_of_something_else(env, rec):
    rec.dispatch([42])


@case(gc.InvalidArgumentError, r"wrap host data with ctx\.tensor")
def numpy_array_as_an_operand(env, rec):
    rec.add(env.f, np.ones(8, np.float32))


@case(gc.InvalidArgumentError, r"Python number")
def string_scalar(env, rec):
    rec.scale(env.f, "2")


@case(gc.InvalidArgumentError, r"Python number")
def none_scalar(env, rec):
    rec.scale(env.f, None)


@case(gc.InvalidArgumentError, r"pass an integer")
def fractional_fill_of_an_int_tensor(env, rec):
    rec.fill(env.i, 2.5)


@case(gc.InvalidArgumentError, r"pass an integer")
def nan_fill_of_an_int_tensor(env, rec):
    rec.fill(env.i, float("nan"))


@case(gc.InvalidArgumentError, r"use a value in \[0, 4294967296\)")
def negative_fill_of_a_uint_tensor(env, rec):
    rec.fill(env.ctx.empty((4,), "uint32"), -1)


@case(gc.InvalidArgumentError, r"pass numbers shaped like the tensor", recording=False)
def write_of_strings(env, cmd):
    env.f.write(["x"] * 8)


# -- sizes and device limits ------------------------------------------------------------------------

@case(gc.OutOfMemoryError, r"use smaller tensors", recording=False)
def tensor_larger_than_any_heap(env, cmd):
    env.ctx.empty((max(env.ctx.memory.heap_sizes) // 4 + 1024,))


@case(gc.OutOfMemoryError, r"use smaller tensors", recording=False)
def shape_whose_size_overflows_64_bits(env, cmd):
    env.ctx.empty((1 << 40, 1 << 40))


@case(gc.OutOfMemoryError, r"use smaller tensors", profiles=("modern",), recording=False)
def tensor_larger_than_one_allocation(env, cmd):
    # (maxMemoryAllocationSize: 4 GiB - 2 MiB of a 141 GB heap on an H200; a 1.0 host cannot ask it)
    env.ctx.empty((env.ctx.limits.max_memory_allocation_size // 4 + 1024,))


@case(gc.UnsupportedError, r"rec.sort has no windowed form; split the work into smaller tensors", recording=False)
def tensor_past_max_storage_buffer_range(env, cmd):
    # (point-wise ops, reductions, concat, matmul... run such tensors in windows)
    # One allocation may hold less than one binding reaches (an H200's
    # maxMemoryAllocationSize is below its 4 GiB maxStorageBufferRange), so
    # a context with a smaller reach makes the tensor.
    ctx = env.other()
    limit_binding_range(ctx, 1 << 20)
    n = ctx.limits.max_storage_buffer_range // 4 + 16
    with ctx.record(cmd) as rec:
        rec.sort(ctx.empty((n,), "uint32"))


@case(gc.UnsupportedError, r"use a smaller image", recording=False)
def image_wider_than_the_device_allows(env, cmd):
    env.ctx.image((env.ctx.limits.max_image_dimension_2d + 1, 4), "rgba8_unorm")


@case(gc.UnsupportedError, r"use a smaller image", recording=False)
def image_of_a_million_texels_square(env, cmd):
    env.ctx.image((1 << 20, 1 << 20), "rgba32f")


@case(gc.UnsupportedError, r"use fewer layers", recording=False)
def image_with_more_layers_than_the_device_allows(env, cmd):
    env.ctx.image((4, 4), "rgba8_unorm", layers=env.ctx.limits.max_image_array_layers + 1)


@case(gc.GuestComputeError, r"use (a )?smaller image", recording=False)
def image_of_more_bytes_than_the_device_allows(env, cmd):
    # Within every extent and layer limit: refused for its bytes (maxResourceSize, or the heap).
    side, layers = env.ctx.limits.max_image_dimension_2d, env.ctx.limits.max_image_array_layers
    env.ctx.image((side, side), "rgba32f", layers=layers)


@case(gc.UnsupportedError, r"split it into several kernels")
def too_many_bindings(env, rec):
    n = env.ctx.device.pipelines.max_bindings + 1
    spec = _kernel(n)
    rec.dispatch(Dispatch(spec, (env.f.buffer,) * n, spec.pack({"p": 0}), (1, 1, 1)))


@case(gc.UnsupportedError, r"pass the rest in a small tensor")
def push_constants_too_large(env, rec):
    words = env.ctx.limits.max_push_constants // 4 + 1
    spec = _kernel(1, words)
    rec.dispatch(Dispatch(spec, (env.f.buffer,), spec.pack({"p": [0] * words}), (1, 1, 1)))


@case(gc.KernelError, r"pass the bytes glslc", recording=True)
def kernel_whose_spirv_is_garbage(env, rec):
    spec = _kernel(1)
    rec.dispatch(Dispatch(spec, (env.f.buffer,), spec.pack({"p": 0}), (1, 1, 1), spirv=b"\x00" * 64))


@case(gc.KernelError, r"recompile it", recording=True)
def kernel_whose_spirv_is_cut_short(env, rec):
    # A real module (with the SPIR-V magic) cut mid-instruction.
    spirv = env.ctx.device.spirv.get(_tiny_glsl(), "vulkan1.0")
    spec = _kernel(1)
    cut = spirv[: (len(spirv) // 2) & ~3]
    rec.dispatch(Dispatch(spec, (env.f.buffer,), spec.pack({"p": 0}), (1, 1, 1), spirv=cut))


def _tiny_glsl() -> str:
    return ("#version 450\nlayout(local_size_x = 64) in;\n"
            "layout(std430, set = 0, binding = 0) buffer B { float x[]; };\n"
            "layout(push_constant) uniform P { uint n; } pc;\n"
            "void main() { uint i = gl_GlobalInvocationID.x; if (i < pc.n) x[i] += 1.0; }\n")


# -- user kernels (ctx.kernel / rec.run_kernel) ---------------------------------------------------------

# glslang refuses binding numbers far below what some drivers allow (the NVIDIA
# driver without push descriptors: about 2^20 storage buffers per stage).
GLSL_MAX_BINDINGS = 4096


def _glsl(n_bindings: int = 1, push_words: int = 1) -> str:
    buffers = "".join(f"layout(std430, set = 0, binding = {i}) buffer B{i} {{ float x{i}[]; }};\n"
                      for i in range(n_bindings))
    others = "".join(f" + x{i}[i]" for i in range(1, n_bindings))     # every binding used: none optimized away
    return ("#version 450\nlayout(local_size_x = 64) in;\n" + buffers
            + f"layout(push_constant) uniform P {{ uint n[{push_words}]; }} pc;\n"
            + f"void main() {{ uint i = gl_GlobalInvocationID.x; if (i < pc.n[{push_words - 1}]) "
            + f"x0[i] += 1.0{others}; }}\n")


@case(gc.UnsupportedError, r"split it, or pack buffers together", recording=False)
def user_kernel_with_too_many_bindings(env, cmd):
    n = env.ctx.device.pipelines.max_bindings + 1
    if n > GLSL_MAX_BINDINGS:
        pytest.skip(f"this device allows {n - 1} bindings per kernel: more than a GLSL source can "
                    f"declare for glslc ({GLSL_MAX_BINDINGS}), so no kernel can pass the limit")
    env.ctx.kernel(_glsl(n_bindings=n))


@case(gc.UnsupportedError, r"pass the rest in a small tensor", recording=False)
def user_kernel_with_too_many_push_constants(env, cmd):
    env.ctx.kernel(_glsl(push_words=env.ctx.limits.max_push_constants // 4 + 1))


@case(gc.KernelError, r"recompile it from its source", recording=False)
def user_kernel_spirv_with_a_corrupt_id_bound(env, cmd):
    # Structurally readable, but invalid: drivers may crash on such code (lavapipe does).
    bad = bytearray(env.ctx.kernel(_glsl()).spirv)
    bad[12:16] = (3).to_bytes(4, "little")
    env.ctx.kernel(bytes(bad))


@case(gc.KernelError, r"recompile it", recording=False)
def user_kernel_spirv_that_is_garbage(env, cmd):
    env.ctx.kernel(b"\x03\x02\x23\x07" + bytes(range(60)))


@case(gc.KernelError, r"fix the source", recording=False)
def user_kernel_glsl_that_does_not_compile(env, cmd):
    env.ctx.kernel("#version 450\nlayout(local_size_x = 1) in;\nvoid main() { undeclared = 1; }\n")


@case(gc.InvalidArgumentError, r"GLSL text \(str\), a kernel file.s path or SPIR-V bytes", recording=False)
def user_kernel_from_neither_text_nor_bytes(env, cmd):
    env.ctx.kernel(12345)


@case(gc.InvalidArgumentError, r"has 1 storage-buffer bindings but got 2 tensors")
def user_kernel_given_too_many_tensors(env, rec):
    rec.run_kernel(env.ctx.kernel(_glsl()), [env.f, env.f], push=np.uint32(8), groups=1)


@case(gc.InvalidArgumentError, r"push is 2 bytes")
def user_kernel_given_push_constants_of_the_wrong_size(env, rec):
    rec.run_kernel(env.ctx.kernel(_glsl()), [env.f], push=b"\x08\x00", groups=1)


@case(gc.WrongContextError, r"another context")
def user_kernel_of_another_context(env, rec):
    rec.run_kernel(env.other().kernel(_glsl()), [env.f], push=np.uint32(8), groups=1)


# -- the test ------------------------------------------------------------------------------------------

PARAMS = [pytest.param(p, name, id=f"{name}-{p}") for name, c in CASES.items() for p in c.profiles]


def test_there_are_enough_distinct_cases():
    assert len(CASES) >= 30, len(CASES)


@pytest.mark.parametrize("profile,name", PARAMS)
def test_hostile_input(request, profile, name):
    c = CASES[name]
    host = request.getfixturevalue(f"{profile}_host")
    ctx = host.adopt()
    env = Env(host, ctx)
    try:
        witness = _host_buffer(host, "witness", 64)
        host.write_buffer(witness, np.zeros(16, np.float32))
        cmd = host.begin()
        host.fill_buffer(cmd, witness, ONE, 32)                       # the host's work before
        with pytest.raises(c.error) as info:
            if c.recording:
                with ctx.record(cmd) as rec:
                    c.fn(env, rec)
            else:
                c.fn(env, cmd)
        err = info.value
        assert isinstance(err, gc.GuestComputeError)
        assert re.search(c.hint, str(err)), f"message does not say what to do: {err}"
        with ctx.record(cmd) as rec:                                   # the guest still works
            after = rec.add(env.f, 1.0)
        host.fill_buffer(cmd, witness, TWO, 32, offset=32)            # the host's work after
        host.submit_and_wait(cmd)
        np.testing.assert_array_equal(host.read_buffer(witness, np.float32, 16), [1.0] * 8 + [2.0] * 8)
        np.testing.assert_array_equal(after.numpy(), np.arange(8, dtype=np.float32) + 1)
    finally:
        env.close()


# -- not errors: NaN/Inf and zero-size tensors behave like numpy ----------------------------------------

SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 3.4e38], np.float32)
OTHERS = np.array([1.0, -np.inf, -np.inf, np.inf, np.nan, np.nan, 0.0, 3.4e38], np.float32)


def _same(got, want):
    np.testing.assert_array_equal(got, want)        # treats NaN as equal to NaN


@pytest.mark.parametrize("profile", PROFILES)
def test_nan_and_inf_propagate_like_numpy(request, profile):
    host = request.getfixturevalue(f"{profile}_host")
    ctx = host.adopt()
    try:
        a, b = ctx.tensor(SPECIALS), ctx.tensor(OTHERS)
        with np.errstate(all="ignore"):
            want = {
                "add": SPECIALS + OTHERS, "sub": SPECIALS - OTHERS, "mul": SPECIALS * OTHERS,
                "div": SPECIALS / OTHERS, "scale0": SPECIALS * np.float32(0),
                "maximum": np.maximum(SPECIALS, OTHERS), "minimum": np.minimum(SPECIALS, OTHERS),
                "sqrt": np.sqrt(SPECIALS), "log": np.log(SPECIALS),
                "exp": np.exp(SPECIALS), "copy": SPECIALS.copy(), "cumsum": np.cumsum(SPECIALS),
                "fill_inf": np.full(4, np.inf, np.float32), "fill_nan": np.full(4, np.nan, np.float32),
                "fill_neg_inf": np.full(4, -np.inf, np.float32),
            }
        witness = _host_buffer(host, "witness", 64)
        host.write_buffer(witness, np.zeros(16, np.float32))
        cmd = host.begin()
        host.fill_buffer(cmd, witness, ONE, 64)
        with ctx.record(cmd) as rec:
            got = {
                "add": rec.add(a, b), "sub": rec.sub(a, b), "mul": rec.mul(a, b), "div": rec.div(a, b),
                "scale0": rec.scale(a, 0.0), "maximum": rec.maximum(a, b), "minimum": rec.minimum(a, b),
                "sqrt": rec.sqrt(a), "log": rec.log(a), "exp": rec.exp(a), "copy": rec.copy(a),
                "cumsum": rec.cumsum(a), "fill_inf": rec.fill(ctx.empty((4,)), float("inf")),
                "fill_nan": rec.fill(ctx.empty((4,)), float("nan")),
                "fill_neg_inf": rec.fill(ctx.empty((4,)), -float("inf")),
            }
        host.submit_and_wait(cmd)
        np.testing.assert_array_equal(host.read_buffer(witness, np.float32, 16), np.ones(16, np.float32))
        for k, w in want.items():
            g = got[k].numpy()
            assert g.dtype == np.float32, k
            _same(np.isnan(g), np.isnan(w))             # NaN exactly where numpy has NaN,
            _same(np.isposinf(g), np.isposinf(w))       # +inf and -inf likewise,
            _same(np.isneginf(g), np.isneginf(w))
            np.testing.assert_allclose(g, w, rtol=2e-6, equal_nan=True, err_msg=k)   # the rest close
    finally:
        ctx.close()


@pytest.mark.parametrize("profile", PROFILES)
def test_zero_size_tensors_like_numpy(request, profile):
    host = request.getfixturevalue(f"{profile}_host")
    ctx = host.adopt()
    try:
        z = ctx.empty((0,))
        z2 = ctx.tensor(np.zeros((3, 0), np.float32))
        one = ctx.tensor(np.ones(1, np.float32))
        buf = _host_buffer(host, "import", 64)
        imported = ctx.import_buffer(buf, (0,), "float32", offset=64, buffer_size=64)
        witness = _host_buffer(host, "witness", 64)
        host.write_buffer(witness, np.zeros(16, np.float32))
        cmd = host.begin()
        host.fill_buffer(cmd, witness, ONE, 64)
        with ctx.record(cmd) as rec:
            results = [rec.add(z, z), rec.add(z, one), rec.scale(z2, 3.0), rec.fill(z2, 1.0),
                       rec.copy(imported), rec.cumsum(z2, axis=1), rec.sort(z)]
            assert rec.dispatches == 0           # nothing to do is recorded as nothing
            results.append(rec.matmul(z2, ctx.empty((0, 5))))   # an empty sum: zeros, as numpy
        host.submit_and_wait(cmd)
        np.testing.assert_array_equal(host.read_buffer(witness, np.float32, 16), np.ones(16, np.float32))
        want = [np.zeros(0) + np.zeros(0), np.zeros(0) + np.ones(1), np.zeros((3, 0)) * 3, np.zeros((3, 0)),
                np.zeros(0), np.cumsum(np.zeros((3, 0)), axis=1), np.sort(np.zeros(0)),
                np.zeros((3, 0)) @ np.zeros((0, 5))]
        assert len(results) == len(want)
        for r, w in zip(results, want):
            assert r.shape == w.shape
            _same(r.numpy(), w.astype(np.float32))
    finally:
        ctx.close()
