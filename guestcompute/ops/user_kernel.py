"""User kernels: the caller's own GLSL or SPIR-V, recorded like a built-in.

``ctx.kernel(source)`` compiles GLSL through the content-addressed SPIR-V
cache (glslc runs once per distinct source) or takes SPIR-V bytes, reflects
its bindings, access and push-constant size (:func:`guestcompute.spirv.reflect.reflect`),
checks them against what guestcompute can bind, and creates the pipeline
right away — so recording never compiles. The kernel's spec is keyed by the
SHA-256 of its SPIR-V, entry point and workgroup size: the same code gives
the same pipeline however often ``ctx.kernel`` is called.

Record it with ``rec.run_kernel(kernel, [tensors...], push=..., groups=...)``
or ``kernel(rec, *tensors, push=..., groups=...)``. Barriers come from the
reflected access: a ``readonly`` binding only reads, a ``writeonly`` one
only writes, anything else does both.

What a kernel may declare (anything else is an UnsupportedError at
``ctx.kernel``): storage buffers, 2-D storage images (``image2D`` /
``uimage2D``), sampled images (``sampler2D``, or ``texture2D`` with a
separate ``sampler``) in set 0 at bindings 0..n-1, a push
constant block up to the device's limit, a workgroup size that is literal
or given by ``local_size_{x,y,z}_id`` = 0, 1, 2 (other specialization
constants may not use ids 0-2, which carry the workgroup size), shared
memory up to ``maxComputeSharedMemorySize`` (counted for the chosen
workgroup size), and only SPIR-V capabilities whose features and extensions
the host enabled and declared at adoption (``int64_t`` needs
``shaderInt64``, ``float16_t`` storage needs 16-bit storage...; see
:mod:`guestcompute.spirv.capabilities`: the message names what to enable).

``push_layout=[(name, type[, count]), ...]`` names the push-constant
fields so that ``push=`` may be a dict. Types are numpy names ``uint32``,
``int32``, ``float32`` or their GLSL names ``uint``, ``int``, ``float``, and
the GLSL vectors ``uvec2``/``ivec2``/``vec2``/``uvec4``/``ivec4``/``vec4``;
a dict must give exactly the declared fields (a missing or unknown key is
an InvalidArgumentError naming the fields).

Binding ``i`` is the *whole* buffer of ``tensors[i]``: a view's offset and
strides are not applied — pass them in push constants if the kernel needs
them.
"""
from __future__ import annotations

import hashlib
import itertools
import struct
import threading
from dataclasses import dataclass

import numpy as np

from ..errors import (GuestComputeError, InvalidArgumentError, KernelError, OutOfMemoryError,
                      UnsupportedError, VulkanError, WrongContextError)
from ..image import SAMPLED, STORAGE, TEXTURE, Image, ImageBinding, ImageLevel, SamplerBinding, storage_format
from . import pixels as px
from .base import Dispatch, OpResult, check_tensor, op
from ..spirv.capabilities import check_capabilities, check_shared_memory
from ..log import log
from .kernel_sources import Recipe, source_spirv
from ..spirv.reflect import reflect, workgroup_memory_size
from ..kernels.spec import READ, READWRITE, WRITE, Binding, KernelSpec, Push, family



@family("user")
def _no_source(spec: KernelSpec) -> str:
    # User kernels bring SPIR-V; there is no GLSL to render from the spec.
    raise KernelError("a user kernel's spec has no GLSL source; it is recorded from its SPIR-V")


@dataclass(frozen=True)
class Compiled:
    """One compile of a user kernel: everything a dispatch reads, swapped
    whole when a watched kernel reloads (a recording thread reads it once
    per dispatch, so it sees the old or the new kernel, never a mix)."""
    spirv: bytes
    reflection: object
    spec: KernelSpec
    packer: object              # a KernelSpec packing dict push values, or None
    source_key: str             # the compiled text's key ("" for SPIR-V given as bytes)
    files: tuple                # the files it was read from (kernel file, includes)
    prints: tuple = ()          # (format number, PrintCall) of its debugPrintfEXT calls; the log binds last


_uids = itertools.count(1)


def _user_bindings(compiled: Compiled) -> tuple:
    """The reflected bindings the caller passes resources for (the print log, bound last, is the library's)."""
    bindings = compiled.reflection.bindings
    return bindings[:-1] if compiled.prints else bindings


class UserKernel:
    """A compiled user kernel bound to one context. Attributes:
    ``name``, ``entry``, ``workgroup``, ``spirv``, ``reflection``, ``spec``,
    ``push_size``, ``bindings`` (reflected, in binding order), ``files``
    (the kernel file and what it includes), ``uid`` (changes at each
    reload), ``version`` (reloads so far), ``last_error`` (the latest failed
    reload's KernelError, None once one succeeds)."""

    def __init__(self, ctx, compiled: Compiled, name: str, recipe: Recipe = None, on_reload=None, on_print=None):
        self.ctx, self.name, self.recipe, self.on_reload, self.on_print = ctx, name, recipe, on_reload, on_print
        self._compiled = compiled
        self.uid, self.version, self.last_error = next(_uids), 0, None
        self._reload_lock = threading.Lock()

    # A program that recorded this kernel records again once its uid changes.
    captured_by_uid = True

    spirv = property(lambda self: self._compiled.spirv)
    reflection = property(lambda self: self._compiled.reflection)
    spec = property(lambda self: self._compiled.spec)
    files = property(lambda self: self._compiled.files)
    entry = property(lambda self: self._compiled.reflection.entry_point)
    workgroup = property(lambda self: self._compiled.spec.workgroup)
    bindings = property(lambda self: _user_bindings(self._compiled))
    prints = property(lambda self: tuple(call for _, call in self._compiled.prints))
    push_size = property(lambda self: self._compiled.reflection.push_constant_size)

    def __repr__(self):
        return (f"<UserKernel {self.name!r} bindings={len(self.bindings)} push={self.push_size}B "
                f"workgroup={self.workgroup}>")

    def __call__(self, rec, *tensors, push=None, groups=(1, 1, 1)):
        """Record this kernel: ``kernel(rec, a, b, push=..., groups=(x, y, z))``."""
        return rec.run_kernel(self, list(tensors), push=push, groups=groups)

    def reload(self) -> bool:
        """Compile the kernel's files again now (``watch=True`` does this when
        one changes). True when a new pipeline is in use from the next
        recorded dispatch; False when the text is unchanged or the compile
        failed — then the last good pipeline stays, the error is
        ``last_error``, logged and passed to ``on_reload``. Never raises for
        the kernel's code; any thread, also while others record."""
        if self.recipe is None or not self.files:
            raise InvalidArgumentError(f"kernel {self.name!r} was not made from a file or #includes; "
                                       "there is nothing to reload")
        with self._reload_lock:
            try:
                fresh = compile_recipe(self.ctx, self.recipe, self.name, self._compiled.source_key, self.on_print)
            except (KernelError, UnsupportedError, InvalidArgumentError) as e:
                self.last_error = e
                log.warning("guestcompute: kernel %r kept its last good pipeline: %s", self.name, e)
                self._notify(e)
                return False
            if fresh is None:
                return False
            self._compiled, self.uid, self.version, self.last_error = fresh, next(_uids), self.version + 1, None
            # Remembered calls and programs look at their arguments again (a new uid: plan again).
            self.ctx.count_swap()
        log.info("guestcompute: kernel %r reloaded (version %d)", self.name, self.version)
        self._notify(None)
        return True

    def _notify(self, error) -> None:
        if self.on_reload is None:
            return
        try:
            self.on_reload(self, error)
        except Exception:       # the callback's own failure must not stop the watcher
            log.exception("guestcompute: the on_reload callback of kernel %r raised", self.name)

    # -- planning ----------------------------------------------------------------
    def push_bytes(self, push, compiled: Compiled = None) -> bytes:
        """The push-constant bytes for ``push``: bytes-like, a numpy array or
        structured scalar, or a dict (needs ``push_layout`` at creation)."""
        compiled = compiled or self._compiled
        packer, size = compiled.packer, compiled.reflection.push_constant_size
        if push is None:
            data = b""
        elif isinstance(push, (bytes, bytearray, memoryview)):
            data = bytes(push)
        elif isinstance(push, (np.ndarray, np.generic)):
            data = push.tobytes()
        elif isinstance(push, dict):
            if packer is None:
                raise InvalidArgumentError(f"kernel {self.name!r}: a dict of push constants needs "
                                           "push_layout=[(name, type), ...] in ctx.kernel(...)")
            self._check_push_keys(push, packer)
            try:
                data = packer.pack(push)
            except KeyError as e:
                raise InvalidArgumentError(f"kernel {self.name!r}: push constant {e} is missing") from None
            except (struct.error, TypeError) as e:
                raise InvalidArgumentError(f"kernel {self.name!r}: bad push constant value ({e})") from None
        else:
            raise InvalidArgumentError(f"kernel {self.name!r}: push must be bytes, a numpy array/struct "
                                       f"or a dict, got {type(push).__name__}")
        if len(data) != size:
            raise InvalidArgumentError(f"kernel {self.name!r}: push is {len(data)} bytes, the kernel's "
                                       f"push-constant block is {size} bytes")
        return data

    def _check_push_keys(self, push: dict, packer) -> None:
        # A misspelt key would otherwise be dropped and its field sent as zero.
        known = [f.name for f in packer.push]
        unknown = [k for k in push if k not in known]
        if unknown:
            raise InvalidArgumentError(f"kernel {self.name!r}: unknown push constant(s) "
                                       f"{', '.join(map(repr, unknown))}; its push_layout declares "
                                       f"{', '.join(map(repr, known))}")

    def dispatch(self, tensors, push=None, groups=(1, 1, 1)) -> list:
        """Validate the arguments and return the dispatch (or none for an
        empty grid)."""
        ctx, compiled = self.ctx, self._compiled
        spec, bindings = compiled.spec, _user_bindings(compiled)
        if isinstance(tensors, (list, tuple)):
            tensors = list(tensors)
        else:
            raise InvalidArgumentError(f"kernel {self.name!r}: buffers must be a list of tensors")
        if len(tensors) != len(bindings):
            if all(b.kind == "buffer" for b in spec.bindings):
                raise InvalidArgumentError(f"kernel {self.name!r} has {len(bindings)} storage-buffer "
                                           f"bindings but got {len(tensors)} tensors; pass one per binding")
            raise InvalidArgumentError(f"kernel {self.name!r} has {len(bindings)} bindings but got "
                                       f"{len(tensors)} resources; pass one per binding, in binding order")
        resources = []
        for i, (arg, sb, rb) in enumerate(zip(tensors, spec.bindings, bindings)):
            if sb.kind == "buffer":
                resources.append(check_tensor(ctx, arg, f"kernel {self.name!r} binding {i}").buffer)
            else:
                resources.append(_image_resource(ctx, self, i, sb, rb, arg))
        data = self.push_bytes(push, compiled)
        grid = _grid(groups, ctx.limits.max_workgroup_count, self.name)
        if 0 in grid:
            return []
        if compiled.prints:
            resources.append(ctx.print_logs.buffer())       # the epoch's print log, bound last
        return [Dispatch(spec, tuple(resources), data, grid, spirv=compiled.spirv)]


def _grid(groups, max_count, name) -> tuple:
    if isinstance(groups, (int, np.integer)) and not isinstance(groups, bool):
        groups = (int(groups),)
    if not isinstance(groups, (tuple, list)) or not 1 <= len(groups) <= 3 or \
            any(isinstance(g, bool) or not isinstance(g, (int, np.integer)) or g < 0 for g in groups):
        raise InvalidArgumentError(f"kernel {name!r}: groups must be 1-3 non-negative ints, got {groups!r}")
    grid = tuple(int(g) for g in groups) + (1,) * (3 - len(groups))
    for axis, (g, most) in enumerate(zip(grid, max_count)):
        if g > most:
            raise UnsupportedError(f"kernel {name!r}: {g} workgroups along {'xyz'[axis]} exceed the "
                                   f"device's maxComputeWorkGroupCount ({most})")
    return grid


def _workgroup(ctx, r, workgroup, name) -> tuple:
    ids = r.local_size_spec_ids
    for axis, sid in enumerate(ids):
        if sid is not None and sid != axis:
            raise UnsupportedError(f"kernel {name!r}: local_size_{'xyz'[axis]}_id is {sid}; use "
                                   f"{axis} (ids 0-2 carry the workgroup size)")
    clash = sorted(set(r.spec_constants) & {0, 1, 2} - {s for s in ids if s is not None})
    if clash:
        raise UnsupportedError(f"kernel {name!r}: specialization constant id(s) {clash} are reserved "
                               "for the workgroup size; renumber them from 3")
    default = r.local_size if r.local_size is not None else r.local_size_default
    if default is None:
        raise KernelError(f"kernel {name!r}: its workgroup size is computed by spec-constant "
                          "operations; declare it with literals or local_size_*_id")
    if workgroup is None:
        wg = tuple(default)
    else:
        if isinstance(workgroup, int) and not isinstance(workgroup, bool):
            workgroup = (workgroup,)
        if not isinstance(workgroup, (tuple, list)) or not 1 <= len(workgroup) <= 3 or \
                any(isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in workgroup):
            raise InvalidArgumentError(f"kernel {name!r}: workgroup must be 1-3 positive ints, "
                                       f"got {workgroup!r}")
        wg = tuple(workgroup) + (1,) * (3 - len(workgroup))
        for axis, (w, sid, lit) in enumerate(zip(wg, ids, default)):
            if sid is None and w != lit:
                raise InvalidArgumentError(
                    f"kernel {name!r}: the workgroup size along {'xyz'[axis]} is fixed at {lit} in the "
                    f"shader; declare local_size_{'xyz'[axis]}_id = {axis} to choose it at ctx.kernel()")
    lim = ctx.limits
    if any(w > m for w, m in zip(wg, lim.max_workgroup_size)) or \
            wg[0] * wg[1] * wg[2] > lim.max_workgroup_invocations:
        raise UnsupportedError(f"kernel {name!r}: workgroup {wg} exceeds the device's limits "
                               f"(size {lim.max_workgroup_size}, {lim.max_workgroup_invocations} invocations)")
    return wg


# Reflected binding kind -> (spec Binding kind, what run_kernel takes for it).
_KINDS = {"storage_buffer": ("buffer", "a tensor"), "storage_image": ("storage", "an Image or img.level()"),
          "combined_image_sampler": ("sampled", "an Image, img.level() or (image, 'linear')"),
          "sampled_image": ("texture", "an Image or img.level()"),
          "sampler": ("sampler", "'nearest' or 'linear'")}


def _bindings(r, name) -> tuple:
    for i, b in enumerate(r.bindings):
        if b.kind == "mixed":
            raise UnsupportedError(f"kernel {name!r}: binding {b.binding} is declared by variables of different "
                                   "kinds; a binding holds one resource (several views of one storage buffer "
                                   "are fine)")
        if b.kind not in _KINDS:
            raise UnsupportedError(f"kernel {name!r}: binding {b.binding} ({b.name or 'unnamed'}) is a "
                                   f"{b.kind.replace('_', ' ')}; guestcompute binds storage buffers, storage "
                                   "images, sampled images (combined or separate) and samplers")
        if b.image is not None and not b.image.is_2d:
            raise UnsupportedError(f"kernel {name!r}: binding {b.binding} is not a plain 2-D image (arrayed, "
                                   "multisampled, 1-D, 3-D or cube); guest kernels see one 2-D level and layer")
        if b.set != 0:
            raise UnsupportedError(f"kernel {name!r}: binding {b.binding} is in set {b.set}; use set 0")
        if b.binding != i:
            raise UnsupportedError(f"kernel {name!r}: bindings must be numbered 0..n-1 without gaps, "
                                   f"found {[x.binding for x in r.bindings]}")
    out = []
    for b in r.bindings:
        kind = _KINDS[b.kind][0]
        if kind in ("sampled", "texture", "sampler"):
            access = READ
        else:
            access = READ if b.readonly else WRITE if b.writeonly else READWRITE
        out.append(Binding(b.name or f"b{b.binding}", "uint", access, kind,
                           b.image.format if b.image is not None else ""))
    return tuple(out)


def _image_resource(ctx, kernel, i: int, spec_binding, reflected, arg):
    """The resource bound at image or sampler binding ``i`` from run_kernel's ``arg``."""
    what = f"kernel {kernel.name!r} binding {i}"
    kind = spec_binding.kind
    if kind == "sampler":
        if arg not in ("nearest", "linear"):
            raise InvalidArgumentError(f"{what} is a sampler: pass 'nearest' or 'linear', got {arg!r}")
        return SamplerBinding(arg)
    sampler = "nearest"
    if kind == "sampled" and isinstance(arg, tuple) and len(arg) == 2 and arg[1] in ("nearest", "linear"):
        arg, sampler = arg
    if not isinstance(arg, (Image, ImageLevel)):
        raise InvalidArgumentError(f"{what} takes {_KINDS[reflected.kind][1]}, got {type(arg).__name__}")
    level = px.as_level(ctx, arg, what)
    img, fmt = level.image, level.image.format
    if (reflected.image.component == "uint") != fmt.integer:
        raise InvalidArgumentError(f"{what}: the kernel's image holds {reflected.image.component} values, "
                                   f"a {fmt.name} image holds {'integers' if fmt.integer else 'floats'}")
    if kind == "storage":
        if not img.storage_usage:
            raise UnsupportedError(f"{what} is a storage image; the image has no STORAGE usage")
        view = storage_format(ctx, img.format, img.mutable_format, what)
        want = reflected.image.format
        if want and want != view.qualifier:
            raise InvalidArgumentError(f"{what} is declared layout({want}); the image's storage format is "
                                       f"{view.qualifier or view.name}")
        return ImageBinding(img, level.mip, level.layer, STORAGE, view.vk_format)
    if not img.sampled_usage:
        raise UnsupportedError(f"{what} samples the image; the image has no SAMPLED usage")
    return px.sampled_binding(ctx, level, what, sampler, SAMPLED if kind == "sampled" else TEXTURE)


# push_layout type names: numpy's scalar names, then the GLSL ones the
# packer uses. GLSL's "uint"/"int"/"float" are 32-bit here, as in the shader
# (numpy would read them as 64-bit).
_NUMPY_PUSH_TYPES = {"uint32": "uint", "int32": "int", "float32": "float"}
_GLSL_PUSH_TYPES = ("uint", "int", "float", "uvec2", "ivec2", "vec2", "uvec4", "ivec4", "vec4")
_PUSH_TYPES_HELP = ("types uint32/int32/float32 (or GLSL uint/int/float) and "
                    "uvec2/ivec2/vec2/uvec4/ivec4/vec4")


def _push_type(t, name) -> str:
    """The packer's (GLSL) name of push_layout type ``t``."""
    if isinstance(t, np.dtype) or (isinstance(t, type) and issubclass(t, np.generic)):
        t = np.dtype(t).name                 # np.float32, np.dtype("uint32"): their numpy name
    if isinstance(t, str) and t in _GLSL_PUSH_TYPES:
        return t
    if isinstance(t, str) and t in _NUMPY_PUSH_TYPES:
        return _NUMPY_PUSH_TYPES[t]
    raise InvalidArgumentError(f"kernel {name!r}: unknown push constant type {t!r}; push_layout "
                               f"takes {_PUSH_TYPES_HELP}")


def _push_field(f, name) -> Push:
    if not isinstance(f, (tuple, list)) or not 2 <= len(f) <= 3 or not isinstance(f[0], str):
        raise InvalidArgumentError(f"kernel {name!r}: push_layout must be [(name, type[, count]), ...] "
                                   f"with {_PUSH_TYPES_HELP}; got the entry {f!r}")
    count = f[2] if len(f) == 3 else 1
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InvalidArgumentError(f"kernel {name!r}: push constant {f[0]!r} has count {count!r}; "
                                   "use a positive int")
    return Push(f[0], _push_type(f[1], name), count)


def _push_fields(layout, size, name) -> tuple:
    if layout is None:
        return ()
    if isinstance(layout, (str, bytes, dict)) or not hasattr(layout, "__iter__"):
        raise InvalidArgumentError(f"kernel {name!r}: push_layout must be [(name, type[, count]), ...] "
                                   f"with {_PUSH_TYPES_HELP}")
    fields = tuple(_push_field(f, name) for f in layout)
    names = [f.name for f in fields]
    if len(set(names)) != len(names):
        raise InvalidArgumentError(f"kernel {name!r}: push_layout names a field twice ({names})")
    declared = KernelSpec("user", push=fields).push_size
    if declared != size:
        raise InvalidArgumentError(f"kernel {name!r}: push_layout packs {declared} bytes, the kernel's "
                                   f"push-constant block is {size} bytes")
    return fields


def compile_recipe(ctx, recipe: Recipe, name: str = None, unchanged: str = None, on_print=None):
    """Compile, reflect and check ``recipe`` and create its pipeline: a
    :class:`Compiled`, or None where the source's text key is
    ``unchanged``. ``name``: the kernel's name in messages (default: its
    entry point)."""
    ctx.device.check_open()
    got = source_spirv(ctx, recipe, unchanged)
    if got is None:
        return None
    spirv, key, files, prints = got
    try:
        r = reflect(spirv)
    except GuestComputeError:
        raise
    except Exception as e:      # the reflection met something it does not expect
        raise KernelError(f"the kernel's SPIR-V could not be read ({e})") from None
    entry = recipe.entry
    if not isinstance(entry, str) or entry != r.entry_point:
        raise KernelError(f"the kernel has no compute entry point {entry!r} (its compute entry "
                          f"point is {r.entry_point!r})")
    name = name or r.entry_point
    check_capabilities(ctx.caps, r.capabilities, f"kernel {name!r}")
    bindings = _bindings(r, name)
    size = r.push_constant_size
    ctx.device.pipelines.check_limits(f"kernel {name!r}", len(bindings), size)
    fields = _push_fields(recipe.push_layout, size, name)
    wg = _workgroup(ctx, r, recipe.workgroup, name)
    # Shared arrays may be sized by the workgroup (gl_WorkGroupSize), so count them for this one.
    chosen = {sid: w for sid, w in zip(r.local_size_spec_ids, wg) if sid is not None}
    check_shared_memory(ctx.limits, workgroup_memory_size(spirv, chosen), f"kernel {name!r}")
    digest = hashlib.sha256(spirv).hexdigest()
    # The push block is opaque here: `size // 4` uint words keep the
    # layout's push range equal to the reflected size.
    push = (Push("data", "uint", size // 4),) if size else ()
    params = (("spirv", digest), ("entry", r.entry_point)) + ((("prints", True),) if prints else ())
    spec = KernelSpec("user", bindings, push, params, wg)
    access = tuple((b.reads, b.writes) for b in bindings)
    try:
        ctx.device.pipelines.get(spec, spirv, access, size, entry=r.entry_point,
                                 kinds=tuple(b.kind for b in bindings))
    except OutOfMemoryError:
        raise
    except VulkanError as e:
        raise KernelError(f"kernel {name!r}: the driver rejected it ({e})") from e
    packer = KernelSpec("user", push=fields) if fields else None
    for fid, call in prints:
        ctx.print_logs.register(fid, name, call.format, on_print)
    return Compiled(spirv, r, spec, packer, key, files, prints)


def build(ctx, source, *, entry: str = "main", workgroup=None, name: str = None, push_layout=None,
          defines=None, include_dirs=None, watch: bool = False, on_reload=None, prints: bool = True,
          on_print=None, language: str = "glsl", validate: bool = True) -> UserKernel:
    """Compile/reflect/validate ``source`` and create its pipeline (see
    :meth:`guestcompute.Context.kernel`)."""
    for what, fn, form in (("on_reload", on_reload, "(kernel, error)"), ("on_print", on_print, "(kernel_name, text)")):
        if fn is not None and not callable(fn):
            raise InvalidArgumentError(f"{what} must be callable{form}, got {type(fn).__name__}")
    if language not in ("glsl", "slang"):
        raise InvalidArgumentError(f"language must be 'glsl' or 'slang', got {language!r}")
    if not isinstance(validate, bool):
        raise InvalidArgumentError(f"validate must be True or False, got {validate!r}")
    recipe = Recipe(source, entry, workgroup, push_layout, defines, include_dirs, bool(prints), language, validate)
    compiled = compile_recipe(ctx, recipe, name, on_print=on_print)
    kernel = UserKernel(ctx, compiled, name or compiled.reflection.entry_point, recipe, on_reload, on_print)
    if watch:
        if not compiled.files:
            raise InvalidArgumentError(f"kernel {kernel.name!r}: watch=True needs a kernel file (or #included "
                                       "files) to watch; this one is text or SPIR-V without files")
        ctx.kernel_watcher.watch(kernel)
    return kernel


@op("run_kernel", windows=None)
def run_kernel(ctx, kernel, buffers=(), *, push=None, groups=(1, 1, 1)):
    """Record a user kernel (from ``ctx.kernel``): ``buffers`` is one
    resource per binding, in binding order — a tensor for a storage buffer,
    an Image or ``img.level(mip, layer)`` for an ``image2D`` or
    ``texture2D``, the same or ``(image, "linear")`` for a ``sampler2D``,
    ``"nearest"`` / ``"linear"`` for a ``sampler``; ``push`` the push
    constants (bytes, numpy data, or a dict with the kernel's
    ``push_layout``), exactly the reflected size; ``groups`` the workgroup
    counts (x[, y[, z]])."""
    if not isinstance(kernel, UserKernel):
        raise InvalidArgumentError(f"run_kernel needs a kernel from ctx.kernel(...), got "
                                   f"{type(kernel).__name__}")
    if kernel.ctx is not ctx:
        raise WrongContextError("this kernel was created by another context")
    return OpResult(None, kernel.dispatch(buffers, push, groups))
