"""``rec.hash_grid_encode``: Instant-NGP's multiresolution hash-grid
encoding of points in [0, 1]^d through a :class:`~.hash_grid.HashGrid`.

Per level l (scale s, resolution r, table size T: ops/hash_grid.py) and
point x: ``pos = x * s + 0.5`` (a float32 product, then a float32 sum,
never fused), cell ``g = floor(pos)``, weights ``w = pos - g``. Each of the
2^d corners c (``c_k`` 0 or 1) has the index

- dense levels: ``sum_k (g_k + c_k) * r**k`` modulo T,
- hashed levels: ``xor_k (g_k + c_k) * PRIMES[k]`` (uint32 products)
  modulo T,

and the weight ``prod_k (w_k if c_k else 1 - w_k)``; the level's features
are the weighted sum of its corners' entries, written to
``out[..., l * F : (l + 1) * F]``. As in Instant-NGP, the top corner of the
last cell of a dense level lies one past the grid and reads the entry its
index wraps to. Coordinates are clamped to [0, 1] first (NaN reads as 0),
so every read stays inside the table. Tables are read in their dtype and
interpolated in float32; the result is rounded once into ``out``.

One invocation per (point, level), the level fastest: a workgroup writes one
contiguous stretch of the output, and reads only the parameters.
"""
from __future__ import annotations

from ..dtypes import float16, float32
from ..errors import InvalidArgumentError, ShapeError, WrongContextError
from ..kernels.catalogue import variants
from ..kernels.glsl_lib import LINEAR_INDEX
from ..kernels.spec import READ, WRITE, Binding, KernelSpec, Push, family, groups_for
from .base import Dispatch, OpResult, check_out, check_tensor, op
from .elementwise import storage_extensions, storage_features
from .encodings import as_glsl, batch_layout, check_points
from .hash_grid import FEATURES, PRIMES, HashGrid

WORKGROUP = 128


def _vector(dtype, width: int) -> str:
    return dtype.glsl if width == 1 else dtype.vec(width)


def _corner(spec: KernelSpec, c: int) -> str:
    """GLSL that adds corner ``c``'s weighted entry to the accumulators."""
    dims, vecs = spec.param("dims"), spec.param("vecs")
    bits = [(c >> k) & 1 for k in range(dims)]
    weight = " * ".join(f"{'w' if b else 'v'}[{k}]" for k, b in enumerate(bits))
    coord = [f"(g[{k}] + {b}u)" for k, b in enumerate(bits)]
    dense = " + ".join(coord[k] + "".join(" * res" for _ in range(k)) for k in range(dims))
    hashed = " ^ ".join(f"{coord[k]} * {PRIMES[k]}u" for k in range(dims))
    reads = " ".join(f"acc{j} += wt * {spec.param('acc')}(table[e + {j}u]);" for j in range(vecs))
    return (f"  {{\n    float wt = {weight};\n"
            f"    uint i = res != 0u ? ({dense}) % lv.z : ({hashed}) & (lv.z - 1u);\n"
            f"    uint e = (lv.w + i) * {vecs}u;\n    {reads}\n  }}")


@family("hash_grid_encode")
def _render_hash_grid(spec: KernelSpec) -> str:
    dims, vecs, width = spec.param("dims"), spec.param("vecs"), spec.param("width")
    acc = spec.param("acc")
    out_t = as_glsl(spec.param("output"))
    corners = "\n".join(_corner(spec, c) for c in range(1 << dims))
    accs = " ".join(f"{acc} acc{j} = {acc}(0.0);" for j in range(vecs))
    stores = []
    for f in range(vecs * width):
        value = f"acc{f // width}" + ("" if width == 1 else f"[{f % width}]")
        stores.append(f"  dst[o + {f} * pc.o_col] = {out_t}({value});")
    store_lines = "\n".join(stores)
    return f"""void main() {{
  uint t = {LINEAR_INDEX};
  if (t >= pc.total) return;
  uint q = t / pc.levels, l = t - q * pc.levels;
  uvec4 lv = lev[l];                   // scale bits, dense resolution (0: hashed), table size, first entry
  float scale = uintBitsToFloat(lv.x);
  uint res = lv.y;
  uint g[{dims}];
  float w[{dims}], v[{dims}];
  for (int k = 0; k < {dims}; ++k) {{
    float x = src[pc.x_off + int(q) * pc.x_row + k * pc.x_col];
    x = x >= 0.0 ? min(x, 1.0) : 0.0;  // NaN reads as 0
    precise float p = x * scale;       // rounded, then added: what the numpy reference does
    precise float pos = p + 0.5;
    float cell = floor(pos);
    g[k] = uint(cell);
    w[k] = pos - cell;
    v[k] = 1.0 - w[k];
  }}
  {accs}
{corners}
  int o = pc.o_off + int(q) * pc.o_row + int(l * {vecs * width}u) * pc.o_col;
{store_lines}
}}"""


def encode_spec(dims: int, features: int, table, out) -> KernelSpec:
    width = min(features, 4)
    push = (Push("total", "uint"), Push("levels", "uint"), Push("x_off", "int"), Push("x_row", "int"),
            Push("x_col", "int"), Push("o_off", "int"), Push("o_row", "int"), Push("o_col", "int"))
    bindings = (Binding("src", "float", READ), Binding("lev", "uvec4", READ),
                Binding("table", _vector(table, width), READ), Binding("dst", out.glsl, WRITE))
    return KernelSpec("hash_grid_encode", bindings=bindings, push=push,
                      params=(("dims", dims), ("vecs", features // width), ("width", width),
                              ("acc", "float" if width == 1 else f"vec{width}"), ("table", table.name),
                              ("output", out.name)),
                      workgroup=(WORKGROUP, 1, 1), glsl_extensions=storage_extensions((table, out)),
                      features=storage_features((table, out)))


def _grid(ctx, grid) -> HashGrid:
    if not isinstance(grid, HashGrid):
        raise InvalidArgumentError(f"hash_grid_encode grid must be a HashGrid (ctx.hash_grid(...)), "
                                   f"got {type(grid).__name__}")
    if grid.ctx is not ctx:
        raise WrongContextError("hash_grid_encode grid belongs to another context; make one with this "
                                "context's ctx.hash_grid(...)")
    check_tensor(ctx, grid.params, "hash_grid_encode grid.params")
    check_tensor(ctx, grid.level_table, "hash_grid_encode grid levels")
    if grid.params.shape != (grid.n_params,) or grid.params.offset != 0 or grid.params.dtype != grid.dtype:
        raise ShapeError("hash_grid_encode grid.params was replaced by a tensor of another layout; "
                         "write new parameters with grid.set_params(...)")
    return grid


@op("hash_grid_encode", windows=None)
def hash_grid_encode(ctx, x, grid, out=None):
    """Instant-NGP's hash-grid encoding of points ``x`` (float32, shape
    (..., grid.n_input_dims), coordinates in [0, 1], clamped) through
    ``grid`` (``ctx.hash_grid(...)``): shape (..., n_levels *
    n_features_per_level), level after level. ``out``: float32 or float16
    (default: the grid's dtype), overlapping neither ``x`` nor the grid's
    parameters. Semantics: ops/hash_grid_encode.py."""
    x = check_points(ctx, x, "hash_grid_encode", (float32,))
    grid = _grid(ctx, grid)
    if x.shape[-1] != grid.n_input_dims:
        raise ShapeError(f"hash_grid_encode x must have shape (..., {grid.n_input_dims}) for a grid of "
                         f"{grid.n_input_dims}-d points, got {x.shape}")
    width = grid.output_dims
    shape = x.shape[:-1] + (width,)
    inputs = {"x": x, "the grid's parameters": grid.params}
    if out is not None:
        out = check_out(ctx, out, shape, (float32, float16), inputs, "hash_grid_encode out", in_place=False)
    else:
        out = ctx.empty(shape, grid.dtype)
    rows, x_row, o_row = batch_layout(x, out, width, "hash_grid_encode")
    total = rows * grid.n_levels
    if total == 0:
        return OpResult(out, [])
    spec = encode_spec(grid.n_input_dims, grid.n_features_per_level, grid.dtype, out.dtype)
    values = {"total": total, "levels": grid.n_levels, "x_off": x.offset, "x_row": x_row,
              "x_col": x.strides[-1], "o_off": out.offset, "o_row": o_row, "o_col": out.strides[-1]}
    bindings = (x.buffer, grid.level_table.buffer, grid.params.buffer, out.buffer)
    return OpResult(out, [Dispatch(spec, bindings, spec.pack(values),
                                   groups_for(total, WORKGROUP, ctx.limits.max_workgroup_count))])


@variants("hash_grid_encode")
def _hash_grid_variants():
    for dims in (2, 3):
        for features in FEATURES:
            for table in (float32, float16):
                for out in (float32, float16):
                    yield encode_spec(dims, features, table, out)
