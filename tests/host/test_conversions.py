"""Host numbers into tensors, params and scalar operands: one rule
(docs/integration.md, "Host data and dtypes"). Rounding to the dtype is
accepted; a value the dtype cannot hold raises a typed error, for lists and
ndarrays alike, before anything is written or recorded."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import guestcompute as gc
from guestcompute.dtypes import host_array, host_scalar

# (data, dtype, what fits in the message): values the dtype cannot hold.
OUT_OF_RANGE = [
    ([2 ** 40], "int32", r"1099511627776 does not fit int32; use a value in \[-2147483648, 2147483648\)"),
    ([-2 ** 31 - 1], "int32", r"does not fit int32"),
    ([-1], "uint32", r"-1 does not fit uint32; use a value in \[0, 4294967296\)"),
    ([2 ** 32], "uint32", r"does not fit uint32"),
    ([300], "uint8", r"300 does not fit uint8; use a value in \[0, 256\)"),
    ([-1], "uint8", r"does not fit uint8"),
    ([2 ** 70], "int32", r"does not fit int32"),
    ([3e9], "int32", r"3000000000 does not fit int32"),
    ([1.5], "int32", r"1.5 is not an integer.*pass an integer"),
    ([float("nan")], "uint32", r"nan is not an integer"),
    ([float("inf")], "int32", r"inf is not an integer"),
    ([1e300], "float32", r"beyond the range of float32"),
    ([-1e39], "float32", r"beyond the range of float32"),
    ([70000.0], "float16", r"beyond the range of float16"),
    ([70000], "float16", r"beyond the range of float16"),
    ([10 ** 400], "float32", r"beyond the range of any float"),
]


@pytest.mark.parametrize("data, dtype, message", OUT_OF_RANGE)
@pytest.mark.parametrize("as_array", [False, True], ids=["list", "ndarray"])
def test_values_the_dtype_cannot_hold_raise(data, dtype, message, as_array):
    if as_array:
        data = np.array(data)          # numpy's own dtype: int64, float64, or object for 2**70
    with pytest.raises(gc.InvalidArgumentError, match=message):
        host_array(data, dtype, "ctx.tensor")


# (data, dtype, expected): accepted conversions, lists and ndarrays alike.
ACCEPTED = [
    ([1, 2], None, np.array([1, 2], np.int32)),                       # ints default to int32
    ([0.5, 1e-3], None, np.array([0.5, 1e-3], np.float32)),          # float64 rounds to float32
    ([2 ** 31 - 1, -2 ** 31], "int32", np.array([2 ** 31 - 1, -2 ** 31], np.int32)),
    ([0, 2 ** 32 - 1], "uint32", np.array([0, 2 ** 32 - 1], np.uint32)),
    ([3.0, -2.0], "int32", np.array([3, -2], np.int32)),              # integral floats
    ([2 ** 24 + 1], "float32", np.array([2 ** 24], np.float32)),     # rounding is not loss
    ([2 ** 70], "float32", np.array([2.0 ** 70], np.float32)),
    ([float("nan"), float("inf"), -float("inf")], "float32", np.array([np.nan, np.inf, -np.inf], np.float32)),
    ([3.4028235e38], "float32", np.array([3.4028235e38], np.float32)),
    ([0.1], "float16", np.array([0.1], np.float16)),
    ([True, False], "uint32", np.array([1, 0], np.uint32)),           # bool with a named dtype
    ([], None, np.zeros(0, np.float32)),
]


@pytest.mark.parametrize("data, dtype, expected", ACCEPTED)
@pytest.mark.parametrize("as_array", [False, True], ids=["list", "ndarray"])
def test_accepted_conversions(data, dtype, expected, as_array):
    if as_array:
        data = np.array(data)
    got = host_array(data, dtype)
    assert got.dtype == expected.dtype and got.flags.c_contiguous
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("data, default", [
    (np.arange(3, dtype=np.int64), "int32"), (np.arange(3, dtype=np.int8), "int32"),
    (np.arange(3, dtype=np.uint16), "uint32"), (np.arange(3, dtype=np.uint64), "uint32"),
    (np.arange(3, dtype=np.uint8), "uint8"), (np.ones(3, np.float16), "float16"),
    (np.ones(3, np.longdouble), "float32"), (np.float64(2.5), "float32"), (7, "int32"),
])
def test_default_dtype_keeps_the_kind(data, default):
    got = host_array(data)
    assert got.dtype == np.dtype(default)
    np.testing.assert_array_equal(got, np.asarray(data).astype(default))


@pytest.mark.parametrize("data, message", [
    (np.array([1 + 2j]), r"complex data.*\.real"),
    ([1, 2j], r"complex data"),
    (np.array([1, None], dtype=object), r"NoneType values cannot be converted"),
    (["one", "two"], r"convert it first"),
    (np.array([True]), r"bool data has no guestcompute dtype.*name one"),
])
def test_data_that_is_not_real_numbers_raises_a_dtype_error(data, message):
    with pytest.raises(gc.DTypeError, match=message):
        host_array(data, None if message.startswith("bool") else "float32")


def test_scalars_follow_the_same_rule():
    assert host_scalar(np.float64(0.1), "float16", "s") == float(np.float16(0.1))
    assert host_scalar(np.int64(200), "uint8", "s") == 200
    assert host_scalar(-math.inf, "float32", "s") == -math.inf
    for value, dtype in ((256, "uint8"), (1e300, "float32"), (-(10 ** 400), "float32"), (2.5, "int32")):
        with pytest.raises(gc.InvalidArgumentError):
            host_scalar(value, dtype, "s")
    for value in (True, np.bool_(False), "1", None, 1j):
        with pytest.raises(gc.InvalidArgumentError, match="must be a number"):
            host_scalar(value, "float32", "s")


# -- every entry point uses the rule (both profiles, under validation) ----------------------------

def test_ctx_tensor(ctx):
    for data, dtype, _ in OUT_OF_RANGE[:6]:
        for value in (data, np.array(data)):
            with pytest.raises(gc.InvalidArgumentError, match="does not fit"):
                ctx.tensor(value, dtype=dtype)
    with pytest.raises(gc.InvalidArgumentError, match="beyond the range of float32"):
        ctx.tensor(np.array([1.0, 1e300]))
    with pytest.raises(gc.DTypeError, match="complex"):
        ctx.tensor(np.ones(2, np.complex64), dtype="float32")
    ints = ctx.tensor([[1, -2], [3, 4]])
    assert ints.dtype == gc.int32 and ints.shape == (2, 2)
    np.testing.assert_array_equal(ints.numpy(), [[1, -2], [3, 4]])
    same = ctx.tensor(np.array([[1, -2], [3, 4]]))
    assert same.dtype == gc.int32
    scalar = ctx.tensor(2.5)
    assert scalar.shape == () and scalar.dtype == gc.float32 and scalar.numpy() == 2.5


def test_tensor_write_refuses_before_writing(ctx):
    t = ctx.tensor(np.arange(4, dtype=np.uint32))
    for bad in ([0, 1, 2, -1], np.array([0, 1, 2, -1]), np.array([0, 1, 2, 2.5]), [0, 1, 2, 2 ** 32]):
        with pytest.raises(gc.InvalidArgumentError):
            t.write(bad)
    np.testing.assert_array_equal(t.numpy(), np.arange(4))      # untouched
    t.write(np.array([4.0, 5.0, 6.0, 7.0]))                    # integral floats are fine
    np.testing.assert_array_equal(t.numpy(), [4, 5, 6, 7])
    f = ctx.tensor(np.zeros(3, np.float32))
    with pytest.raises(gc.InvalidArgumentError, match="beyond the range of float32"):
        f.write([0.0, 1e300, 0.0])
    np.testing.assert_array_equal(f.numpy(), np.zeros(3))


def test_program_params(host, ctx):
    out = ctx.empty((1,))
    prog = ctx.program(lambda rec, p: rec.add(p.dt, p.dt, out=out),
                       params={"dt": "float32", "n": "int32", "k": "uint32"})
    for bad in ({"dt": 1e300}, {"dt": -(10 ** 400)}, {"n": 2 ** 40}, {"k": -1}, {"n": 2.5}, {"dt": True}):
        with pytest.raises(gc.InvalidArgumentError):
            host.run(ctx, lambda rec: rec.execute(prog, params=bad))
    host.run(ctx, lambda rec: rec.execute(prog, params={"dt": np.float64(0.25), "n": np.int64(-3), "k": 7}))
    assert out.numpy()[0] == 0.5
    assert prog.params.values == {"dt": 0.25, "n": -3, "k": 7}


def test_scalar_operands_take_the_tensor_dtype(host, ctx):
    f, i = ctx.empty((4,)), ctx.empty((4,), "int32")
    for fn in (lambda rec: rec.fill(f, 1e300), lambda rec: rec.fill(f, -(10 ** 400)),
               lambda rec: rec.add(i, 2 ** 31), lambda rec: rec.mul(i, -2 ** 31 - 1),
               lambda rec: rec.clamp(f, -1e39, 1.0)):
        with pytest.raises(gc.InvalidArgumentError, match="does not fit|beyond the range"):
            host.run(ctx, fn)
    filled = host.run(ctx, lambda rec: (rec.fill(f, math.inf), rec.add(i, 2 ** 31 - 1)))
    np.testing.assert_array_equal(filled[0].numpy(), np.full(4, np.inf, np.float32))


def test_small_dtypes_scalars(modern_host, modern_ctx):
    host, ctx = modern_host, modern_ctx         # uint8 and float16 need the modern profile's features
    u8, f16 = ctx.empty((4,), "uint8"), ctx.empty((4,), "float16")
    with pytest.raises(gc.InvalidArgumentError, match=r"300 does not fit uint8"):
        host.run(ctx, lambda rec: rec.fill(u8, 300))
    with pytest.raises(gc.InvalidArgumentError, match="beyond the range of float16"):
        host.run(ctx, lambda rec: rec.fill(f16, 1e5))
    with pytest.raises(gc.InvalidArgumentError, match=r"300 does not fit uint8"):
        ctx.tensor([1, 300], dtype="uint8")
    host.run(ctx, lambda rec: (rec.fill(u8, 255), rec.fill(f16, 0.1)))
    np.testing.assert_array_equal(u8.numpy(), np.full(4, 255, np.uint8))
    np.testing.assert_array_equal(f16.numpy(), np.full(4, 0.1, np.float16))


@settings(max_examples=400, deadline=None)
@given(value=st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64),
                       st.integers(min_value=-2 ** 70, max_value=2 ** 70),
                       st.sampled_from([3.4028235e38, 3.4028235677973366e38, 3.40282357e38, 65504.0, 65519.99,
                                        65520.0, 16777217, 2 ** 31 - 1, 2 ** 31, -2 ** 31 - 1, 255, 256, -0.0])),
       dtype=st.sampled_from(["float32", "float16", "int32", "uint32", "uint8"]))
def test_scalar_fast_path_agrees_with_the_array_rule(value, dtype):
    """host_scalar takes Python floats and ints without numpy; what it gives
    (or refuses) must be exactly what host_array gives for the same value."""
    def outcome(convert):
        try:
            got = convert(value, dtype, "x")
        except gc.InvalidArgumentError as e:
            return "refused", str(e)
        got = got.item() if isinstance(got, np.ndarray) else got
        return type(got), ("nan" if isinstance(got, float) and math.isnan(got) else got,
                           math.copysign(1, got) if isinstance(got, float) else None)
    assert outcome(host_scalar) == outcome(host_array)


# -- complex64 ------------------------------------------------------------------------------

@pytest.mark.parametrize("data, expected", [
    (np.array([1 + 2j, -0.5j]), np.array([1 + 2j, -0.5j], np.complex64)),
    ([1, 2j], np.array([1, 2j], np.complex64)),
    (np.array([1.5, 2.0], np.float32), np.array([1.5, 2], np.complex64)),
])
def test_complex_data_makes_complex64(data, expected):
    dtype = None if np.asarray(data).dtype.kind == "c" else "complex64"
    got = host_array(data, dtype)
    assert got.dtype == np.complex64
    np.testing.assert_array_equal(got, expected)


def test_a_complex_part_beyond_float32_raises():
    with pytest.raises(gc.InvalidArgumentError, match="beyond the range of float32"):
        host_array(np.array([1 + 1e300j]))


def test_complex_tensors_round_trip_and_view_their_parts(host, ctx):
    x = np.array([[1 + 2j, 3 - 4j, -5j], [6, 7 + 8j, -9 - 1j]], np.complex64)
    t = ctx.tensor(x)
    assert t.dtype == gc.complex64 and t.shape == (2, 3)
    np.testing.assert_array_equal(t.numpy(), x)
    np.testing.assert_array_equal(t[:, ::2].numpy(), x[:, ::2])
    assert t.real.dtype == gc.float32 and t.real.shape == (2, 3)
    np.testing.assert_array_equal(t[1].real.numpy(), x[1].real)
    np.testing.assert_array_equal(t[:, 1:].imag.numpy(), x[:, 1:].imag)
    # The parts are views of the same memory: every float32 op reads and writes them.
    host.run(ctx, lambda rec: (rec.fill(t.imag, 0.5), rec.neg(t.real, out=t.real)))
    np.testing.assert_array_equal(t.numpy(), -x.real + 0.5j)
    real = ctx.tensor(np.ones(3, np.float32))
    assert real.real is real
    with pytest.raises(gc.DTypeError, match="no imaginary parts"):
        real.imag


def test_user_kernels_take_complex64_as_vec2(host, ctx):
    k = ctx.kernel("""#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Z { vec2 z[]; };
void main() { uint i = gl_GlobalInvocationID.x; if (i < 5u) z[i] = vec2(z[i].x, -z[i].y); }""")
    x = np.array([1 + 1j, 2 - 2j, 3j, -4, 5 + 0.5j], np.complex64)
    t = ctx.tensor(x)
    host.run(ctx, lambda rec: rec.run_kernel(k, [t], groups=(1, 1, 1)))
    np.testing.assert_array_equal(t.numpy(), np.conj(x))
