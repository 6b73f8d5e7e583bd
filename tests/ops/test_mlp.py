"""Fused MLP (ctx.mlp, rec.mlp): numpy parity over depths, widths,
activations, dtypes, batch dims and images; weight updates; typed errors
before anything is recorded; kernel selection (including the GPU-only
cooperative-matrix kernel, through hand-built device facts)."""
import dataclasses
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guestcompute as gc
from guestcompute.ops import all_specs
from guestcompute.ops import matmul as mm
from guestcompute.ops import mlp
from guestcompute.ops import mlp_kernels as mk
from guestcompute.ops import mlp_op
from guestcompute.ops.mlp import apply_activation
from refusals import assert_all_refused

RNG = np.random.default_rng(11)
ACTS = ("none", "relu", "leaky_relu", "sigmoid", "tanh", "silu")
# The documented bound of the portable kernel (fp32 activations and
# accumulators): |got - ref| <= TOL * (1 + |ref|), ref numpy in float32 from
# the fp16-rounded weights; an fp16 output adds its own rounding (2^-11).
TOL = 1e-4
TOL_F16_OUT = 1e-3
# The documented bound of the cooperative-matrix kernel (fp16 activations
# between layers): |got - ref| <= KHR_TOL * max(1, max |ref|).
KHR_TOL = 2e-2


def random_layers(widths, acts=None, scale=1.0):
    acts = acts or ["relu"] * (len(widths) - 2) + ["none"]
    return [gc.Dense(RNG.standard_normal((a, b)) * scale / np.sqrt(a), RNG.standard_normal(b) * 0.1, act)
            for a, b, act in zip(widths, widths[1:], acts)]


def _bound(net, ref, tol):
    """The documented error bound of the kernel this device runs ``net``
    with: the portable kernel's ``tol * (1 + |ref|)``, or the
    cooperative-matrix (or cooperative-vector) kernel's ``KHR_TOL * max(1, max |ref|)``."""
    bound = tol * (1 + np.abs(ref))
    if mlp_op.kernel_for(net.ctx, net) in ("khr_coopmat", "nv_coopvec"):
        bound = np.maximum(bound, KHR_TOL * max(1.0, float(np.abs(ref).max(initial=0))))
    return bound


def _check(got, net, x, f16_out=False):
    ref = net.numpy(np.asarray(x, np.float32))
    got = np.asarray(got, np.float32)
    assert got.shape == ref.shape
    tol = TOL_F16_OUT if f16_out else TOL
    assert np.all(np.abs(got - ref) <= _bound(net, ref, tol)), np.abs(got - ref).max()


@pytest.mark.parametrize("depth", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("width", [16, 32, 64, 128])
def test_depths_and_widths_match_numpy(modern_host, modern_ctx, depth, width):
    ctx = modern_ctx
    widths = [min(width, 64) - 3] + [width] * (depth - 1) + [7]
    net = ctx.mlp(random_layers(widths))
    x = RNG.standard_normal((300, widths[0])).astype(np.float32)
    _check(modern_host.run(ctx, lambda rec: rec.mlp(ctx.tensor(x), net)).numpy(), net, x)


@pytest.mark.parametrize("widths", [[30, 64, 16, 48, 128, 32, 64, 16, 5],                  # as deep as written out
                                    [30, 64, 16, 48, 128, 32, 64, 16, 80, 24, 40, 5]])      # deeper: the table
def test_deep_networks_of_mixed_widths_match_numpy(modern_host, modern_ctx, widths):
    """Every layer its own fan-in, width and activation, past the layers
    the cooperative-matrix kernel writes out (mlp_kernels.KHR_SLOTS)."""
    ctx = modern_ctx
    acts = [ACTS[i % len(ACTS)] for i in range(len(widths) - 1)]
    net = ctx.mlp([gc.Dense(layer.weight, layer.bias, layer.activation, slope=0.3)
                   for layer in random_layers(widths, acts)])
    x = RNG.standard_normal((300, widths[0])).astype(np.float32)
    _check(modern_host.run(ctx, lambda rec: rec.mlp(ctx.tensor(x), net)).numpy(), net, x)


@pytest.mark.parametrize("depth", [1, 2, mk.KHR_SLOTS, mk.KHR_SLOTS + 3])
def test_khr_specialization_constants(depth):
    """The KHR kernel's constants: the depth, the last layer's width in
    fragments, then per written-out layer its fan-in and width in
    fragments, activation code and slope bits (0 past the depth)."""
    widths = [20 + 7 * i for i in range(depth + 1)]
    layers = [gc.Dense(np.ones((k, n)), None, ACTS[i % len(ACTS)], slope=0.25 * i)
              for i, (k, n) in enumerate(zip(widths, widths[1:]))]
    got = dict(mk.khr_spec_constants(layers))
    assert len(got) == 2 + 4 * mk.KHR_SLOTS
    assert got[mk.KHR_DEPTH_ID] == depth and got[mk.KHR_OUT_NF_ID] == -(-widths[-1] // 16)
    for s in range(mk.KHR_SLOTS):
        k, n, code, bits = (got[base + s] for base in (mk.KHR_KF_ID, mk.KHR_NF_ID, mk.KHR_CODE_ID, mk.KHR_SLOPE_ID))
        if s < depth:
            assert (k, n) == (-(-widths[s] // 16), -(-widths[s + 1] // 16))
            assert mk.ACTIVATIONS[code] == layers[s].activation
            assert np.uint32(bits).view(np.float32) == np.float32(layers[s].slope)
        else:
            assert k == n == code == bits == 0
    glsl = mk.khr_spec(mk.KHR_TILINGS[0], "float32", "f32", "f32").render()
    for s in range(mk.KHR_SLOTS):
        assert f"if (DEPTH > {s}u) {{" in glsl and f"uint K = KF{s} * 16u, N = NF{s} * 16u" in glsl
    assert f"for (uint l = {mk.KHR_SLOTS}u; l < DEPTH; ++l) {{" in glsl


def test_the_khr_kernels_offsets_are_where_pack_puts_the_layers():
    """The KHR kernel works out each written-out layer's weight and bias
    offsets from its specialization constants; evaluated here from the
    rendered GLSL, they must match the packed network's table."""
    layers = random_layers([30, 64, 16, 48, 128, 32, 64, 16, 80, 24, 5])
    glsl = mk.khr_spec(mk.KHR_TILINGS[0], "float16", "f16", "f16").render()
    constants = dict(mk.khr_spec_constants(layers))
    names = {"DEPTH": constants[mk.KHR_DEPTH_ID]}
    for s in range(mk.KHR_SLOTS):
        names[f"KF{s}"], names[f"NF{s}"] = constants[mk.KHR_KF_ID + s], constants[mk.KHR_NF_ID + s]
    for line in glsl.splitlines():
        found = re.fullmatch(r"const uint ([WB]O\d+) = (.*);", line)
        if found:
            names[found[1]] = eval(re.sub(r"(\d+)u", r"\1", found[2]), {}, dict(names))
    table = mlp.pack(layers, "float16")[:len(layers) * mk.TABLE_WORDS].reshape(len(layers), mk.TABLE_WORDS)
    for s in range(mk.KHR_SLOTS):
        assert (names[f"WO{s}"], names[f"BO{s}"]) == (table[s, 4] // 4, table[s, 5] // 4)


def test_the_network_keeps_its_khr_constants_until_its_layers_change(ctx):
    layers = random_layers([20, 48, 9], ["leaky_relu", "none"])
    net = ctx.mlp(layers)
    made = net.khr_constants()
    assert net.khr_constants() is made and made == mk.khr_spec_constants(layers)
    new = [gc.Dense(layers[0].weight, layers[0].bias, "leaky_relu", slope=0.5), layers[1]]
    ctx.run(lambda rec: net.set_weights([layer.weight for layer in new], rec=rec))
    assert net.khr_constants() == made                    # the same activations and slopes
    net.update(new)
    assert net.khr_constants() == mk.khr_spec_constants(new) != made


@pytest.mark.parametrize("act", ACTS)
def test_each_activation(modern_host, modern_ctx, act):
    ctx = modern_ctx
    layers = random_layers([12, 32, 32, 5], [act, act, act], scale=3.0)   # wide pre-activations: saturation
    if act == "leaky_relu":
        layers = [gc.Dense(layer.weight, layer.bias, act, slope=0.2) for layer in layers]
    net = ctx.mlp(layers)
    x = RNG.standard_normal((200, 12)).astype(np.float32) * 4
    _check(modern_host.run(ctx, lambda rec: rec.mlp(ctx.tensor(x), net)).numpy(), net, x)


def test_activations_agree_with_their_definitions():
    v = np.linspace(-30, 30, 61, dtype=np.float32)
    assert np.allclose(apply_activation(v, "leaky_relu", 0.5), np.where(v > 0, v, 0.5 * v))
    assert np.allclose(apply_activation(v, "sigmoid"), 1 / (1 + np.exp(-v.astype(np.float64))))
    assert np.allclose(apply_activation(v, "silu"), v / (1 + np.exp(-v.astype(np.float64))), atol=1e-6)


@pytest.mark.parametrize("net_dtype", ["float16", "float32"])
@pytest.mark.parametrize("x_dtype", ["float16", "float32"])
@pytest.mark.parametrize("out_dtype", ["float16", "float32"])
def test_dtypes_of_weights_inputs_and_outputs(modern_host, modern_ctx, net_dtype, x_dtype, out_dtype):
    ctx = modern_ctx
    net = ctx.mlp(random_layers([20, 48, 9], ["tanh", "none"]), dtype=net_dtype)
    x = RNG.standard_normal((130, 20)).astype(x_dtype)
    out = ctx.empty((130, 9), out_dtype)
    modern_host.run(ctx, lambda rec: rec.mlp(ctx.tensor(x), net, out=out))
    _check(out.numpy(), net, x, f16_out=out_dtype == "float16")
    # float32 weights are not rounded to fp16
    if net_dtype == "float32":
        ref64 = x.astype(np.float64)
        for layer in net.layers:
            ref64 = apply_activation(ref64 @ layer.weight + layer.bias, layer.activation)
        tol = TOL_F16_OUT if out_dtype == "float16" else TOL
        assert np.all(np.abs(out.numpy() - ref64) <= tol * (1 + np.abs(ref64)))


def test_default_out_has_the_inputs_dtype_and_batch_dims(modern_host, modern_ctx):
    ctx = modern_ctx
    net = ctx.mlp(random_layers([6, 16, 3]))
    x = RNG.standard_normal((2, 3, 17, 6)).astype(np.float16)
    got = modern_host.run(ctx, lambda rec: rec.mlp(ctx.tensor(x), net))
    assert got.shape == (2, 3, 17, 3) and got.dtype == gc.float16
    _check(got.numpy(), net, x, f16_out=True)
    v = RNG.standard_normal(6).astype(np.float32)      # one query, no batch dims
    got = modern_host.run(ctx, lambda rec: rec.mlp(ctx.tensor(v), net))
    assert got.shape == (3,)
    _check(got.numpy(), net, v)


def test_strided_inputs_and_outputs(host, ctx):
    net = ctx.mlp(random_layers([5, 32, 4]), dtype="float32")
    wide = RNG.standard_normal((40, 9)).astype(np.float32)
    x = ctx.tensor(wide)[:, 2:7]                         # row stride 9
    got = host.run(ctx, lambda rec: rec.mlp(x, net))
    _check(got.numpy(), net, wide[:, 2:7])
    t = RNG.standard_normal((5, 6, 8)).astype(np.float32)
    xt = ctx.tensor(t).permute(1, 0, 2)[..., :5]         # leading dims that do not collapse: copied first
    out = ctx.zeros((6, 5, 4, 2))
    host.run(ctx, lambda rec: rec.mlp(xt, net, out=out[..., 1]))   # out's last axis strided
    _check(out.numpy()[..., 1], net, t.transpose(1, 0, 2)[..., :5])
    assert not out.numpy()[..., 0].any()


def test_float16_rows_of_whole_fragments_read_and_written_directly(modern_host, modern_ctx):
    """The cooperative-matrix kernel reads a float16 input whose rows are
    whole fragments, and writes such an output, a fragment at a time
    (mlp_kernels.DIRECT_IN, DIRECT_OUT); views that are not 16-byte
    aligned, and the rows past the last whole tile, go element by element.
    Every route must give the same result."""
    ctx = modern_ctx
    net = ctx.mlp(random_layers([32, 64, 32]))
    big = RNG.standard_normal((300, 72)).astype(np.float16)
    for cols in (slice(8, 40), slice(4, 36)):             # offset 8 halves (aligned), 4 (not)
        x = ctx.tensor(big)[:, cols]
        got = modern_host.run(ctx, lambda rec: rec.mlp(x, net))
        _check(got.numpy(), net, big[:, cols], f16_out=True)
        for out_cols in (slice(16, 48), slice(12, 44)):
            out = ctx.zeros((300, 56), "float16")
            modern_host.run(ctx, lambda rec: rec.mlp(x, net, out=out[:, out_cols]))
            _check(out.numpy()[:, out_cols], net, big[:, cols], f16_out=True)
            rest = np.delete(out.numpy(), np.arange(56)[out_cols], axis=1)
            assert not rest.any()                            # nothing written outside the view


def test_direct_fragment_routes_only_for_float16_tensors():
    """Only a float16 tensor operand gets the fragment-at-a-time route, behind its run-time test."""
    both = mk.khr_spec(mk.KHR_TILINGS[0], "float16", "f16", "f16").render()
    assert f"if ({mk.DIRECT_IN})" in both and f"if ({mk.DIRECT_OUT})" in both
    assert "coopMatLoad(h, x," in both and "coopMatStore(h, o," in both
    other = mk.khr_spec(mk.KHR_TILINGS[0], "float16", "f32", "put:rgba16f").render()
    assert mk.DIRECT_IN not in other and mk.DIRECT_OUT not in other and "coopMatLoad(h, x," not in other


def test_zero_queries(host, ctx):
    net = ctx.mlp(random_layers([5, 16, 4]), dtype="float32")
    got = host.run(ctx, lambda rec: rec.mlp(ctx.empty((0, 5)), net))
    assert got.shape == (0, 4)


def _image(ctx, data, fmt):
    return ctx.image_from(data, fmt)


def test_image_in_tensor_out(modern_host, modern_ctx):
    ctx = modern_ctx
    pixels = RNG.uniform(0, 1, (9, 21, 4)).astype(np.float16)
    img = _image(ctx, pixels, "rgba16f")
    net = ctx.mlp(random_layers([3, 32, 32, 5]))              # reads the first three channels
    got = modern_host.run(ctx, lambda rec: rec.mlp(img, net))
    assert got.shape == (9, 21, 5) and got.dtype == gc.float32
    _check(got.numpy(), net, pixels[..., :3].astype(np.float32))


@pytest.mark.parametrize("fmt", ["rgba32f", "rgba16f", "rgba8_unorm", "r32f"])
def test_per_pixel_network_writes_an_image(modern_host, modern_ctx, fmt):
    ctx = modern_ctx
    channels = 1 if fmt == "r32f" else 4
    n_out = 1 if fmt == "r32f" else 3
    net = ctx.mlp(random_layers([4, 32, n_out], ["relu", "sigmoid"]))
    pixels = RNG.uniform(0, 1, (11, 19, 4)).astype(np.float32)
    src = _image(ctx, pixels, "rgba32f")
    dst = ctx.image((19, 11), fmt)
    modern_host.run(ctx, lambda rec: rec.mlp(src, net, out=dst))
    got = dst.numpy().astype(np.float32)
    got = got.reshape(11, 19, channels)
    if fmt == "rgba8_unorm":
        got = got / 255
    ref = net.numpy(pixels)
    tol = {"rgba8_unorm": 0.5 / 255 + 1e-4, "rgba16f": 1e-3}.get(fmt, TOL)
    assert np.all(np.abs(got[..., :n_out] - ref) <= _bound(net, ref, tol) + (1e-6 if fmt != "rgba8_unorm" else 0))
    if channels == 4:
        assert np.all(got[..., 3] == 1)                  # alpha of a network with three outputs
    # a tensor of the image's pixels in, the image out
    x = ctx.tensor(pixels)
    modern_host.run(ctx, lambda rec: rec.mlp(x, net, out=dst))
    again = dst.numpy().astype(np.float32).reshape(11, 19, channels)[..., :n_out] * (1 / 255 if fmt == "rgba8_unorm" else 1)
    assert np.all(np.abs(again - ref) <= 2 * _bound(net, ref, tol) + 1e-6)


# -- new weights ---------------------------------------------------------------------------

def test_update_and_set_weights(modern_host, modern_ctx):
    ctx = modern_ctx
    net = ctx.mlp(random_layers([8, 16, 4]))
    x_np = RNG.standard_normal((50, 8)).astype(np.float32)
    x = ctx.tensor(x_np)
    first = net.numpy(x_np)
    new = random_layers([8, 16, 4], ["tanh", "sigmoid"])
    net.update(new)
    assert [layer.activation for layer in net.layers] == ["tanh", "sigmoid"]
    _check(modern_host.run(ctx, lambda rec: rec.mlp(x, net)).numpy(), net, x_np)
    # in place, recorded: the work before the update reads the old weights
    before, after = ctx.empty((50, 4)), ctx.empty((50, 4))
    net.set_weights([-layer.weight for layer in new], rec=None)
    negated = net.numpy(x_np)

    def body(rec):
        rec.mlp(x, net, out=before)
        net.set_weights([layer.weight for layer in new], rec=rec)
        rec.mlp(x, net, out=after)
    modern_host.run(ctx, body)
    assert np.all(np.abs(before.numpy() - negated) <= _bound(net, negated, TOL))
    _check(after.numpy(), net, x_np)
    assert not np.allclose(first, after.numpy())
    with pytest.raises(gc.ShapeError):
        net.update(random_layers([8, 32, 4]))
    with pytest.raises(gc.InvalidArgumentError, match="in place"):       # activations stay in place
        modern_host.run(ctx, lambda rec: net.update(random_layers([8, 16, 4], ["relu", "sigmoid"]), rec=rec))
    assert [layer.activation for layer in net.layers] == ["tanh", "sigmoid"]
    with pytest.raises(gc.InvalidArgumentError):
        net.set_weights([new[0].weight])


# -- typed errors ------------------------------------------------------------------------

def test_bad_layers_raise_typed_errors(bare_host):
    ctx = bare_host.adopt()
    try:
        w = np.ones((4, 16))
        with pytest.raises(gc.InvalidArgumentError):
            gc.Dense(w, activation="gelu")
        with pytest.raises(gc.ShapeError):
            gc.Dense(np.ones(4))
        with pytest.raises(gc.ShapeError):
            gc.Dense(w, np.ones(15))
        with pytest.raises(gc.DTypeError):
            gc.Dense(np.array([["a"]]))
        with pytest.raises(gc.InvalidArgumentError):
            gc.Dense(w, activation="leaky_relu", slope=float("nan"))
        assert gc.Dense(np.ones((16, 4)), transposed=True).shape == (4, 16)
        with pytest.raises(gc.ShapeError):                          # the chain breaks
            ctx.mlp([gc.Dense(w), gc.Dense(np.ones((8, 2)))])
        with pytest.raises(gc.ShapeError, match="rec.matmul"):        # too many inputs
            ctx.mlp([gc.Dense(np.ones((65, 16)))])
        with pytest.raises(gc.ShapeError):                           # too wide a layer
            ctx.mlp([gc.Dense(np.ones((4, 129)))])
        with pytest.raises(gc.InvalidArgumentError):
            ctx.mlp([])
        with pytest.raises(gc.InvalidArgumentError):
            ctx.mlp([w])
        with pytest.raises(gc.DTypeError):
            ctx.mlp([gc.Dense(w)], dtype="int32")
        with pytest.raises(gc.InvalidArgumentError):
            ctx.mlp([gc.Dense(w)], accumulate="float64")
        with pytest.raises(gc.InvalidArgumentError):
            ctx.mlp([gc.Dense(w)], dtype="float32", accumulate="float16")
        with pytest.raises(gc.InvalidArgumentError, match="float16"):
            ctx.mlp([gc.Dense(w * 1e6)])
    finally:
        ctx.close()


def test_bad_calls_record_nothing(modern_host):
    ctx = modern_host.adopt()
    other = modern_host.adopt()
    try:
        net = ctx.mlp(random_layers([8, 16, 4]))
        net32 = ctx.mlp(random_layers([8, 16, 4]), dtype="float32")
        x = ctx.tensor(np.ones((10, 8), np.float32))
        img = ctx.image((4, 4), "rgba16f")
        cases = [
            (gc.ShapeError, lambda rec: rec.mlp(ctx.tensor(np.ones((10, 7), np.float32)), net)),
            (gc.DTypeError, lambda rec: rec.mlp(ctx.tensor(np.ones((10, 8), np.int32)), net)),
            (gc.ShapeError, lambda rec: rec.mlp(x, net, out=ctx.empty((10, 5)))),
            (gc.DTypeError, lambda rec: rec.mlp(x, net, out=ctx.empty((10, 4), "int32"))),
            (gc.InvalidArgumentError, lambda rec: rec.mlp(x, "net")),
            (gc.WrongContextError, lambda rec: rec.mlp(x, other.mlp(random_layers([8, 16, 4])))),
            (gc.ShapeError, lambda rec: rec.mlp(img, net)),                 # 4 channels, 8 inputs
            (gc.ShapeError, lambda rec: rec.mlp(x, net, out=img)),          # not (H, W, in)
            (gc.InvalidArgumentError, lambda rec: rec.mlp(x, net, kernel="tensor_cores")),
            # float32 weights: the cooperative-matrix kernel never applies, on any device
            (gc.UnsupportedError, lambda rec: rec.mlp(x, net32, kernel="khr_coopmat")),
        ]
        pixel_net = ctx.mlp(random_layers([4, 16, 4]))
        cases += [(gc.InvalidArgumentError, lambda rec: rec.mlp(img, pixel_net, out=img)),
                  (gc.ShapeError, lambda rec: rec.mlp(img, pixel_net, out=ctx.image((5, 4), "rgba16f")))]
        assert_all_refused(modern_host, ctx, cases)
    finally:
        other.close()
        ctx.close()


def test_a_network_too_deep_for_a_loop_cap_is_refused(bare_host):
    ctx = bare_host.adopt()
    try:
        if not ctx.limits.loop_iteration_cap:
            pytest.skip("this driver caps no loops")
        net = ctx.mlp([gc.Dense(np.ones((64, 128)))] + [gc.Dense(np.eye(128))] * 60, dtype="float32")
        cmd = bare_host.begin()
        with ctx.record(cmd) as rec:
            with pytest.raises(gc.UnsupportedError, match="split"):
                rec.mlp(ctx.zeros((4, 64)), net)
            assert rec.dispatches == 0
        bare_host.submit_and_wait(cmd)
    finally:
        ctx.close()


# -- shapes at random -------------------------------------------------------------------

@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(widths=st.lists(st.integers(1, 40), min_size=2, max_size=4), rows=st.integers(1, 150),
       act=st.sampled_from(ACTS))
def test_random_shapes(modern_host, modern_ctx, widths, rows, act):
    ctx = modern_ctx
    net = ctx.mlp(random_layers(widths, [act] * (len(widths) - 1)))
    x = RNG.standard_normal((rows, widths[0])).astype(np.float32)
    _check(modern_host.run(ctx, lambda rec: rec.mlp(ctx.tensor(x), net)).numpy(), net, x)


# -- kernel selection ------------------------------------------------------------------------

KHR = mm.MatmulDevice(subgroup_size=32, subgroup_arithmetic=True, max_shared_memory=49152, max_invocations=1024,
                      coopmat_khr_shapes=((16, 16, 16, "float16"), (16, 16, 16, "float32")))
PLAIN = mm.MatmulDevice(subgroup_size=8, subgroup_arithmetic=True, max_shared_memory=32768, max_invocations=1024)


def _p(dtype="float16", acc="float32", wmax=64, x="f32", o="f32"):
    return mlp_op.Problem(dtype, acc, wmax, x, o)


def test_selection_prefers_the_khr_kernel():
    name, spec = mlp_op.select(_p(), KHR)
    assert name == "khr_coopmat" and spec.family == "mlp_khr"
    assert mk.khr_tiling(spec) == mk.KhrTiling(64, 4, 4) and spec.workgroup == (128, 1, 1)
    assert "cooperative_matrix_khr" in spec.features and spec.param("acc") == "float32"
    # four fragments a subgroup need 36 KiB; two fit in 18
    smaller = dataclasses.replace(KHR, max_shared_memory=32768)
    assert mk.khr_tiling(mlp_op.select(_p(), smaller)[1]) == mk.KhrTiling(64, 4, 2)
    # 128 wide layers: the tiling of four subgroups needs 17 KiB, two fit in 16
    tiny = dataclasses.replace(KHR, max_shared_memory=16384)
    spec = mlp_op.select(_p(wmax=128, acc="float16", x="tex", o="put:rgba8"), tiny)[1]
    assert mk.khr_tiling(spec) == mk.KhrTiling(128, 2, 1) and spec.param("acc") == "float16"
    assert mk.khr_tiling(mlp_op.select(_p(wmax=128), KHR)[1]) == mk.KhrTiling(128, 4, 1)


def test_khr_subgroups_share_no_rows():
    """Each subgroup stages, multiplies and writes out its own rows: the
    kernel has no workgroup barrier, and its shared memory is its rows of
    activations (the fp32 output tile lies over them)."""
    for t in mk.KHR_TILINGS:
        for o in ("f16", "put:rgba8"):
            glsl = mk.khr_spec(t, "float32", "f32", o).render()
            assert " barrier();" not in glsl and "subgroupBarrier();" in glsl
            assert f"shared uvec4 pool[{t.rows * t.alen}];" in glsl
    assert mk.KhrTiling(64, 4, 2).shared_bytes == 128 * 9 * 16


@pytest.mark.parametrize("device,problem,why", [
    (KHR, _p(dtype="float32"), "float16 weights"),
    (PLAIN, _p(), "did not enable"),
    (dataclasses.replace(KHR, coopmat_khr_shapes=((16, 16, 16, "float32"),)), _p(acc="float16"), "fragment"),
    (dataclasses.replace(KHR, subgroup_size=64), _p(), "32-wide"),
    (dataclasses.replace(KHR, max_shared_memory=8192), _p(wmax=128), "shared memory"),
])
def test_selection_falls_back_to_fma(device, problem, why):
    assert mlp_op.select(problem, device)[0] == "fma"
    assert why in dict(mlp_op.explain(problem, device))["khr_coopmat"]
    with pytest.raises(gc.UnsupportedError, match=why):
        mlp_op.select(problem, device, "khr_coopmat")


def test_every_spec_the_selector_makes_is_baked():
    catalogue = set(all_specs())
    for device in (KHR, PLAIN, dataclasses.replace(KHR, max_shared_memory=32768),
                   dataclasses.replace(KHR, max_shared_memory=16384)):
        for dtype in mk.WEIGHT_DTYPES:
            for acc in ("float32", "float16"):
                for wmax in (16, 64, 128):
                    for x in mk.X_LAYOUTS:
                        for o in mk.O_LAYOUTS:
                            p = _p(dtype, acc, wmax, x, o)
                            assert mlp_op.select(p, device)[1] in catalogue
                            assert mlp_op.select(p, device, "fma")[1] in catalogue


def test_the_khr_accuracy_bound_holds_for_fp16_activations():
    """The cooperative-matrix kernel rounds the input and every hidden
    activation to fp16 (and, with fp16 accumulators, every partial sum):
    numpy doing the same stays within the documented bound."""
    for depth in range(1, 6):
        widths = [32] + [64] * depth + [16]
        layers = random_layers(widths)
        x = RNG.standard_normal((500, 32)).astype(np.float32)
        h = x.astype(np.float16)
        for i, layer in enumerate(layers):
            pre = h @ layer.weight.astype(np.float16) + layer.bias.astype(np.float16)   # fp16 sums
            h = apply_activation(pre.astype(np.float32), layer.activation)
            h = h.astype(np.float16) if i + 1 < len(layers) else h
        net_ref = x
        for layer in layers:
            net_ref = apply_activation(net_ref @ layer.weight.astype(np.float16).astype(np.float32)
                                       + layer.bias.astype(np.float16).astype(np.float32), layer.activation)
        assert np.abs(h - net_ref).max() <= KHR_TOL * max(1.0, np.abs(net_ref).max()), depth


# -- warm-up -------------------------------------------------------------------------------

def test_warmup_creates_a_networks_pipelines_ahead(host, ctx):
    """``ctx.warmup([net])`` creates the pipelines the network records with
    (specialized to its layers where its kernel is), so its first frame
    creates none."""
    net = ctx.mlp(random_layers([30, 64, 48, 7]))
    report = ctx.warmup([net], threads=1)
    assert report.total == len(mlp_op.network_pipelines(ctx, net)) == report.created + report.existing
    before = ctx.cache_stats()["pipelines_created"]
    dtypes = ("float16", "float32") if ctx.caps.float16_storage else ("float32",)
    for dtype in dtypes:
        x = ctx.tensor(RNG.standard_normal((40, 30)).astype(dtype))
        for out_dtype in dtypes:
            out = ctx.empty((40, 7), out_dtype)
            host.run(ctx, lambda rec: rec.mlp(x, net, out=out))
    assert ctx.cache_stats()["pipelines_created"] == before
    assert ctx.warmup([net]).created == 0
    other = gc.Context.create()
    try:
        with pytest.raises(gc.InvalidArgumentError, match="another context"):
            other.warmup([net])
    finally:
        other.close()


def test_network_pipelines_carry_the_kernels_constants(modern_ctx):
    net = modern_ctx.mlp(random_layers([32, 64, 64, 16]))
    pairs = mlp_op.network_pipelines(modern_ctx, net, KHR)
    assert {s.family for s, _ in pairs} == {"mlp_khr"}
    assert all(c == mk.khr_spec_constants(net.layers) for _, c in pairs)
    coopvec = dataclasses.replace(KHR, coopvec_types=(("float16", "float16", "float16", "float32"),))
    pairs = mlp_op.network_pipelines(modern_ctx, net, coopvec)
    assert {s.family for s, _ in pairs} == {"mlp_coopvec"} and len(pairs) == 1    # one kernel for every layout
    assert pairs[0][1] == mlp.coopvec_constants(net.layers)
    assert mlp_op.network_pipelines(modern_ctx, net, PLAIN)[0][1] == ()
