"""Programs: guest work recorded once into a secondary command buffer and
replayed in any host command buffer with one vkCmdExecuteCommands — the
CUDA-graph idea in Vulkan terms (IREE #7679 memoized a reusable secondary
body the same way).

- The secondary is begun with SIMULTANEOUS_USE, so frames still in flight
  may replay it while the next frame records another replay, and with an
  inheritance info naming no render pass (compute runs outside one).
- Values that change per frame live in a small parameter buffer the program
  reads; ``rec.execute(prog, params=...)`` rewrites it with vkCmdUpdateBuffer
  in the host's buffer just before the replay, so nothing is re-recorded.
- A program remembers every tensor and image it captured (the arguments
  and results of the ops ``fn`` recorded, and the bases of views) and the
  uid it had (a tensor's Buffer's, an image's, a user kernel's). When one
  was reallocated (``Tensor.resize``), rebound (``Image.rebind``) or
  reloaded (a user kernel made with ``watch=True``) the program is
  re-recorded at its next execute, into a *fresh* secondary: the old one may
  still be pending, so it is freed only once the epoch of its last replay
  retired. (Pre-planned ``rec.dispatch(...)`` calls name buffers, not
  tensors: they are kept alive but never trigger a re-record.)
- Barriers inside the secondary order the program's own dispatches; the
  barrier before and after the replay (against earlier guest work, the
  host's declared accesses, parameter updates) is recorded in the host's
  buffer by ``rec.execute``, from the program's read / write sets.

A host that pre-records a primary command buffer executing a program must
record it again when the program re-records (``prog.version`` changes):
the primary names the old secondary, which retires with its epoch.

Thread-safety: a program may be executed from several threads at once
(each into its own command buffer); recording (first, or re-recording) is
serialized by the context's program pool lock.
"""
from __future__ import annotations

import inspect
import struct
import threading

import numpy as np
import vulkan as vk
from vulkan import ffi

from ..dtypes import as_dtype, host_scalar
from ..errors import (ContextClosedError, DTypeError, InvalidArgumentError, UnsupportedError,
                      WrongContextError, check)
from ..image import Image, ImageLevel
from ..tensor import Buffer, Tensor
from ..vk import sync
from ..vk.commands import allocate_command_buffer, create_command_pool
from ..vk.structs import new
from .encoder import Target
from .recorder import Recorder

_EMPTY = frozenset()

# vkCmdUpdateBuffer moves at most 65536 bytes; parameters are a few scalars.
_MAX_PARAMS = 1024
_PARAM_DTYPES = ("float32", "int32", "uint32")
# GLSL's scalar names mean the 32-bit types, as in push_layout and in the
# shader that reads the field (numpy would read "float" as float64).
_GLSL_SCALARS = {"float": "float32", "int": "int32", "uint": "uint32"}


class ProgramPool:
    """The context's secondary command buffers: one VkCommandPool on the
    adopted queue family (vkCmdExecuteCommands needs the same family as the
    host's primary). Every use of the pool — allocating, recording into one
    of its buffers, freeing — holds ``lock``, as Vulkan requires."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.lock = threading.RLock()
        self._pool = None              # made by the first program
        self.destroyed = False         # the context was closed
        self.live_command_buffers = 0
        self.stats = {"programs_recorded": 0, "program_rerecords": 0, "program_replays": 0}

    def allocate(self):
        """A fresh secondary command buffer (the caller holds ``lock``)."""
        if self.destroyed:
            raise ContextClosedError("the context was closed")
        dev = self.ctx.device
        if self._pool is None:
            self._pool = create_command_pool(dev.fns, dev.handle, dev.queue_family_index)
        cmd = allocate_command_buffer(dev.fns, dev.handle, self._pool, secondary=True)
        self.live_command_buffers += 1
        return cmd

    def free(self, cmd) -> None:
        with self.lock:
            if self._pool is None:
                return          # destroyed with the context: the pool freed it
            arr = ffi.new("VkCommandBuffer[1]", [cmd])
            self.ctx.device.fns.vkFreeCommandBuffers(self.ctx.device.handle, self._pool, 1, arr)
            self.live_command_buffers -= 1

    def destroy(self) -> None:
        with self.lock:
            self.destroyed = True
            if self._pool is not None:
                self.ctx.device.fns.vkDestroyCommandPool(self.ctx.device.handle, self._pool, ffi.NULL)
                self._pool = None
            self.live_command_buffers = 0


class Params:
    """A program's per-frame parameters: one small guest buffer, one
    1-element tensor view per field (``params.dt``), which ops read like any
    tensor (a shape-(1,) tensor broadcasts against any shape)."""

    def __init__(self, ctx, fields: dict):
        if not isinstance(fields, dict) or not fields:
            raise InvalidArgumentError('params must be a non-empty dict such as {"dt": "float32"}')
        if len(fields) > _MAX_PARAMS:
            raise InvalidArgumentError(f"at most {_MAX_PARAMS} params")
        self._names = []
        self._dtypes = {}
        for name, dtype in fields.items():
            if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
                raise InvalidArgumentError(f"param name {name!r} must be an identifier not starting with _")
            try:
                d = as_dtype(_GLSL_SCALARS.get(dtype, dtype) if isinstance(dtype, str) else dtype)
            except DTypeError:
                d = None
            if d is None or d.name not in _PARAM_DTYPES:
                raise DTypeError(f"param {name!r}: dtype {dtype!r} not supported; use one of {list(_PARAM_DTYPES)} "
                                 f"(or GLSL's {list(_GLSL_SCALARS)}, the same 32-bit types)")
            self._names.append(name)
            self._dtypes[name] = d
        # All fields are 4 bytes: field k lives at byte 4k of one buffer.
        self.tensor = ctx.tensor(np.zeros(len(self._names), np.uint32))
        self.buffer: Buffer = self.tensor.buffer
        self.uids = frozenset(self.buffer.hazard_keys)     # for the hazard tracker
        self._values = {n: 0 for n in self._names}
        self._fields = {n: Tensor(self.buffer, (1,), self._dtypes[n], offset=k, base=self.tensor)
                        for k, n in enumerate(self._names)}
        self._format = "<" + "".join({"float": "f", "int": "i", "uint": "I"}[self._dtypes[n].kind]
                                     for n in self._names)

    def __getattr__(self, name):
        fields = self.__dict__.get("_fields")
        if fields is not None and name in fields:
            return fields[name]
        raise AttributeError(f"no param {name!r}; the program declared {self.__dict__.get('_names')}")

    def __getitem__(self, name) -> Tensor:
        return self._fields[name]

    @property
    def names(self) -> list:
        return list(self._names)

    @property
    def values(self) -> dict:
        """The values the last execute wrote (fields never set are 0)."""
        return dict(self._values)

    def values_written(self, values: dict) -> None:
        """The replay recorded an update to ``values`` (what :meth:`pack` merged)."""
        self._values = values

    def pack(self, values: dict):
        """Validate ``values`` and return the whole block as a C char array
        (fields not given keep their previous values)."""
        if not isinstance(values, dict):
            raise InvalidArgumentError("params= must be a dict of field name -> number")
        merged = dict(self._values)
        for name, v in values.items():
            d = self._dtypes.get(name)
            if d is None:
                raise InvalidArgumentError(f"unknown param {name!r}; the program declared {self._names}")
            merged[name] = host_scalar(v, d, f"param {name!r}")
        data = struct.pack(self._format, *(merged[n] for n in self._names))
        return merged, ffi.new("char[]", data), len(data)


def _check_arity(fn, with_params: bool) -> None:
    """Refuse a function that cannot take the arguments the program will
    pass: calling it would raise a TypeError from inside the recording, which
    reads like a bug in the function's body. A TypeError raised *by* the body
    still propagates unchanged."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):      # no introspectable signature: the call will tell
        return
    try:
        signature.bind(*((None, None) if with_params else (None,)))
    except TypeError:
        name = getattr(fn, "__name__", type(fn).__name__)
        if with_params:
            raise InvalidArgumentError(f"ctx.program: {name}{signature} is called as fn(rec, params) because "
                                       "params= was given; give it a second parameter for the params") from None
        raise InvalidArgumentError(f"ctx.program: {name}{signature} is called as fn(rec); give it one "
                                   "parameter, the recorder (a second one only with params=)") from None


class Recording:
    """One recording of a program: the secondary command buffer and what the
    replaying recorder needs to put barriers around it."""
    __slots__ = ("cmd", "pcmd", "buffers", "reads", "writes", "imports", "images", "stages", "access",
                 "write_access", "wrote_mapped", "captured", "swaps", "value", "dispatches", "barriers", "specs",
                 "print_epoch")


class ProgramCapture(Target):
    """The target of a program's recording: its secondary command buffer.

    The program's own barriers are recorded in it, but neither entry nor
    exit barriers: the recorder replaying the program emits those in the
    host's buffer, from what this capture collects — what the program reads
    and writes, the stages it runs in, the host-shared buffers it uses and
    every tensor it captured."""
    waits_for_host = False
    enters = False
    nests_programs = False
    times = False
    kind = "a program"

    def __init__(self):
        self.tensors: dict = {}     # id(tensor) -> (tensor, Buffer uid at recording)
        self.buffers: dict = {}     # uid -> Buffer used by a command (kept alive)
        self.reads: set = set()
        self.writes: set = set()
        self.stages = sync.COMPUTE
        self.access = sync.SHADER_RW
        self.write_access = 0
        self.specs: dict = {}
        # uid -> (Image, written) of guest images still UNDEFINED: set after
        # the capture or by the first replay (see Program._record).
        self.first_layouts: dict = {}

    @property
    def capture(self):
        # A property, not an attribute: ``self.capture = self`` would be a
        # reference cycle keeping the captured tensors alive until a GC pass.
        return self

    def exit_masks(self, state):
        return None

    # -- what the recorder reports -------------------------------------------------
    def values(self, *values) -> None:
        for v in values:
            _collect_tensors(v, self.tensors, 2)

    def dispatch(self, d, plan) -> None:
        self.specs[d.spec] = None
        for img, w in plan.images:
            if img.pending_init:
                self.first_layouts[img.uid] = (img, w)
        for b in plan.stamped:
            self.buffers[b.uid] = b
        self.reads.update(plan.reads)
        if plan.writes:
            self.writes.update(plan.writes)
            self.write_access |= sync.SHADER_WRITE
        if d.indirect is not None:
            self.stages |= sync.INDIRECT
            self.access |= sync.INDIRECT_READ

    def sync(self, dst_stage, dst_access) -> None:
        self.stages |= dst_stage
        self.access |= dst_access

    def work(self, reads, writes, stages, write_access, buffers) -> None:
        for b in buffers:
            self.buffers[b.uid] = b
        self.reads.update(reads)
        if writes:
            self.writes.update(writes)
            self.write_access |= write_access
        self.stages |= stages


def _current_uid(obj) -> int:
    """The uid a captured tensor's buffer, image or kernel has now."""
    return obj.buffer.uid if isinstance(obj, Tensor) else obj.uid


def _collect_tensors(v, out: dict, depth: int) -> None:
    if isinstance(v, ImageLevel):
        v = v.image
    if isinstance(v, Image):
        if id(v) not in out:
            out[id(v)] = (v, v.uid)
    elif isinstance(v, Tensor):
        for t in (v, v.base):
            if t is not None and id(t) not in out:
                out[id(t)] = (t, t.buffer.uid)
    elif getattr(v, "captured_by_uid", False):       # a user kernel: reloading changes its uid
        if id(v) not in out:
            out[id(v)] = (v, v.uid)
    elif depth > 0 and isinstance(v, (list, tuple)):
        for item in v:
            _collect_tensors(item, out, depth - 1)
    elif depth > 0 and isinstance(v, dict):
        for item in v.values():
            _collect_tensors(item, out, depth - 1)


class Program:
    """Guest work recorded once, replayed with ``rec.execute(prog)``.

    Attributes: ``value`` (what ``fn`` returned at the latest recording: a
    re-record calls ``fn`` again, so allocate outputs outside ``fn`` to keep
    them stable), ``params`` (the :class:`Params`, or None), ``version``
    (bumped at every re-record), ``stats`` (records, rerecords, replays,
    dispatches and barriers of the current recording).
    """

    def __init__(self, ctx, fn, params: dict = None):
        if not callable(fn):
            raise InvalidArgumentError(f"ctx.program needs a callable fn(rec), got {type(fn).__name__}")
        _check_arity(fn, with_params=params is not None)
        self._ctx = ctx
        self._fn = fn
        self._pool = ctx.program_pool
        self.params = Params(ctx, params) if params is not None else None
        self._recording: Recording = None
        self._invalid = False
        self._last_epoch = 0        # the epoch of the latest replay
        self._lock = threading.Lock()
        self.version = 0
        self.stats = {"records": 0, "rerecords": 0, "replays": 0, "dispatches": 0, "barriers": 0}
        self._recording = self._record()

    # -- facts ---------------------------------------------------------------
    @property
    def value(self):
        return self._recording.value if self._recording is not None else None

    @property
    def stale(self) -> bool:
        """True when the next execute will re-record (invalidated, or a
        captured tensor was reallocated)."""
        r = self._recording
        if self._invalid or r is None:
            return True
        if r.print_epoch is not None and r.print_epoch != self._ctx.device.epochs.current:
            return True
        now = self._ctx.swaps
        if r.swaps == now:
            return False
        if any(_current_uid(t) != gen for t, gen in r.captured):
            return True
        r.swaps = now               # other tensors were swapped: skip this loop next time
        return False

    def invalidate(self) -> None:
        """Re-record at the next execute (e.g. after changing what ``fn``
        reads from Python state)."""
        self._invalid = True

    def specs(self) -> list:
        """Kernel specs this program uses (so ``ctx.warmup(prog)`` works)."""
        return list(self._recording.specs) if self._recording is not None else []

    # -- recording -------------------------------------------------------------
    def _record(self) -> Recording:
        ctx, pool = self._ctx, self._pool
        fns = ctx.device.fns
        with pool.lock:
            cmd = pool.allocate()
            try:
                inherit = new("VkCommandBufferInheritanceInfo", subpass=0, occlusionQueryEnable=vk.VK_FALSE)
                begin = new("VkCommandBufferBeginInfo", flags=vk.VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT,
                            pInheritanceInfo=inherit)
                check("vkBeginCommandBuffer", fns.vkBeginCommandBuffer(cmd, begin))
                capture = ProgramCapture()
                swaps = ctx.swaps
                with Recorder(ctx, cmd, capture) as rec:
                    value = self._fn(rec, self.params) if self.params is not None else self._fn(rec)
                check("vkEndCommandBuffer", fns.vkEndCommandBuffer(cmd))
            except BaseException:
                pool.free(cmd)
                raise
        # Images fn made (an op's output or scratch) get their first layout
        # now if nothing is being recorded here, else at their first replay.
        ctx.device.transfers.init_images_now([img for img, _ in capture.first_layouts.values()])
        state = rec.encoder.state
        r = Recording()
        r.cmd = cmd
        r.pcmd = ffi.new("VkCommandBuffer[1]", [cmd])
        r.buffers = tuple(capture.buffers.values())
        r.reads = frozenset(capture.reads)
        r.writes = frozenset(capture.writes)
        r.imports = tuple((b, w) for b, w in state.met_imports().values())
        r.images = tuple((img, w) for img, w in state.images.values()) + tuple(capture.first_layouts.values())
        r.stages = capture.stages
        r.access = capture.access
        r.write_access = capture.write_access or sync.SHADER_WRITE
        r.wrote_mapped = state.wrote_mapped
        captured = dict(capture.tensors)
        if self.params is not None:
            captured.setdefault(id(self.params.tensor), (self.params.tensor, self.params.buffer.uid))
        r.captured = tuple(captured.values())
        r.swaps = swaps
        r.value = value
        r.dispatches = rec.dispatches
        r.barriers = rec.barriers
        r.specs = tuple(capture.specs)
        # A kernel that prints wrote into this epoch's print log: the next epoch records again, into its own.
        prints = any(("prints", True) in spec.params for spec in r.specs)
        r.print_epoch = ctx.device.epochs.current if prints else None
        self.stats["records"] += 1
        self.stats["dispatches"] = rec.dispatches
        self.stats["barriers"] = rec.barriers
        pool.stats["programs_recorded"] += 1
        return r

    def _current(self) -> Recording:
        if not self.stale:
            return self._recording
        with self._lock:
            if not self.stale:          # another thread re-recorded meanwhile
                return self._recording
            fresh = self._record()      # raises before anything changes if fn fails
            old, self._recording = self._recording, fresh
            self._retire(old)
            self._invalid = False
            self.version += 1
            self.stats["rerecords"] += 1
            self._pool.stats["program_rerecords"] += 1
            return fresh

    def _retire(self, r: Recording) -> None:
        """Free ``r``'s secondary once the epoch of its last replay retired;
        its buffers carry that epoch too, so none is destroyed earlier."""
        if r is None:
            return
        epoch = self._last_epoch
        for b in r.buffers:
            if b.last_epoch < epoch:
                b.last_epoch = epoch
        if self.params is not None and self.params.buffer.last_epoch < epoch:
            self.params.buffer.last_epoch = epoch
        ctx, pool, cmd = self._ctx, self._pool, r.cmd
        if ctx.closed or pool.destroyed:
            return
        ctx.device.epochs.retire_later(epoch, lambda: pool.free(cmd))

    def release(self) -> None:
        """Give the program's command buffer back (after its last replay's
        epoch retires). The program re-records if executed again."""
        r, self._recording = self._recording, None
        self._retire(r)

    def __del__(self):
        try:
            if self.__dict__.get("_recording") is not None:
                self.release()
        except Exception:       # interpreter shutdown: nothing left to free into
            pass

    # -- replay -------------------------------------------------------------------
    def replay_into(self, rec: Recorder, params) -> None:
        """``rec.execute(self, params)``: update the parameters, replay the
        secondary, with the barriers around both recorded in ``rec``'s buffer."""
        ctx = self._ctx
        if rec.ctx is not ctx:
            raise WrongContextError("this program belongs to another context")
        if ctx.closed:
            raise ContextClosedError("the context was closed")
        if rec.target.family not in (None, ctx.queue_family_index):
            raise UnsupportedError("a program's secondary command buffer belongs to the adopted queue family; "
                                   "it cannot replay in a submission to another family")
        packed = None
        if params is not None:
            if self.params is None:
                raise InvalidArgumentError("this program declared no params; pass params={...} to ctx.program")
            packed = self.params.pack(params)
        r = self._current()         # host-side only: nothing recorded in rec's buffer yet
        enc = rec.encoder
        fns, cmd = ctx.device.fns, enc.command_buffer
        if packed is not None:
            # The previous replay (this frame or an earlier one) may still read
            # the block: the barrier before the update orders it after them.
            values, data, size = packed
            p = self.params
            enc.sync_before_work(_EMPTY, p.uids, (), sync.TRANSFER, sync.TRANSFER_WRITE)
            fns.vkCmdUpdateBuffer(cmd, p.buffer.handle, 0, size, data)
            enc.after_work(_EMPTY, p.uids, sync.TRANSFER, sync.TRANSFER_WRITE)
            p.values_written(values)
        enc.sync_before_work(r.reads, r.writes, r.imports, r.stages, r.access, images=r.images)
        fns.vkCmdExecuteCommands(cmd, 1, r.pcmd)
        enc.forget_bound_state()
        enc.after_work(r.reads, r.writes, r.stages, r.write_access, r.wrote_mapped)
        self._last_epoch = ctx.device.epochs.current
        self.stats["replays"] += 1
        self._pool.stats["program_replays"] += 1
