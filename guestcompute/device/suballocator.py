"""The suballocator: guest buffers carved out of large device-memory blocks,
and buffers of dropped tensors kept for reuse.

Why: a ``vkAllocateMemory`` per tensor costs tens of microseconds even on a
CPU driver (far more on kernel-mode drivers), and drivers cap the number of
live allocations (``maxMemoryAllocationCount``: 4,096 on many Windows
drivers, the minimum the spec guarantees). Renderers and ML frameworks
allocate small tensors unpredictably, so each buffer gets its own VkBuffer
bound at an offset of a shared VkDeviceMemory block instead.

Each tensor keeps a VkBuffer of its own (rather than being a sub-range of
one VkBuffer per block): every command that names a buffer — descriptors,
copies, indirect dispatches, queue-family transfers, host reads — stays a
whole-buffer command, the hazard tracker and the descriptor cache keep
keying on the buffer's uid, and the validation layer sees one resource per
tensor. ``benchmarks/memory.py`` measures what that costs over bare
offset bookkeeping.

Policy (numbers in the constants below):

- Blocks per memory type, growing from ``block_size / 8`` to
  ``block_size`` (64 MiB, or 1/8 of a smaller heap) as a type fills up.
- Buffers of ``dedicated_from`` bytes and more (half a block) get memory of
  their own, as do buffers when no block can be made and buffers of a usage
  the driver prefers dedicated memory for (VkMemoryDedicatedRequirements,
  asked once per usage; that memory is then allocated as dedicated).
- Sizes are rounded up to a class (``size_class``: eight per power of
  two). A released buffer is kept, bound, on a recycle list keyed by (class,
  usage, host visibility): the next request of that key takes it back with
  no Vulkan call. Per-frame temporaries are therefore reused frame after
  frame and a steady frame loop allocates nothing after warm-up. The list
  holds at most as many bytes and buffers as are in use (or the
  ``RECYCLE_FLOOR`` amounts); past that, released buffers are destroyed.
- :meth:`tick` (every epoch advance) ages the recycle list and empty
  blocks: what stayed unused for ``KEEP_TICKS`` advances goes back to the
  driver. :meth:`trim` returns it all at once. When an allocation would
  pass maxMemoryAllocationCount or the heap's budget, idle blocks are
  freed first.

Thread-safety: every method may be called from any thread.
"""
from __future__ import annotations

import bisect
import collections
import threading

from vulkan import ffi

from ..errors import OutOfMemoryError, check
from ..vk.memory import HOST_VISIBLE, STORAGE_USAGE, Allocation, MemoryManager

BLOCK_SIZE = 64 << 20          # the largest block, for heaps of 512 MiB and more
FIRST_BLOCK_FRACTION = 8       # the first block of a memory type is BLOCK_SIZE / 8
KEEP_TICKS = 8                 # epoch advances an idle recycled buffer or empty block is kept
RECYCLE_FLOOR = 16 << 20       # recycled bytes always allowed, beyond as many as are in use
RECYCLE_FLOOR_BUFFERS = 1024   # recycled buffers always allowed, likewise


def _align_up(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def size_class(nbytes: int) -> int:
    """The byte size a buffer of ``nbytes`` is made with: a multiple of 64
    up to 1 KiB, then one of eight sizes per power of two (at most 1/8
    more than asked). Temporaries whose size drifts from frame to frame
    (a particle count, a batch) then meet a recycled buffer of their class
    instead of each carving a new one."""
    if nbytes <= 1024:
        return max(64, _align_up(nbytes, 64))
    return _align_up(nbytes, 1 << (nbytes.bit_length() - 4))


class Block:
    """One VkDeviceMemory carved into buffers. ``free`` holds the free
    ranges as sorted, non-adjacent ``[offset, size]`` pairs."""
    __slots__ = ("memory", "type_index", "size", "base", "free", "used", "live", "empty_since")

    def __init__(self, memory, type_index: int, size: int, base):
        self.memory = memory
        self.type_index = type_index
        self.size = size
        self.base = base                # host pointer (char *) when mapped, else None
        self.free = [[0, size]]
        self.used = 0                   # bytes taken, alignment padding excluded
        self.live = 0                   # buffers bound in it (recycled ones included)
        self.empty_since = None         # tick at which it became empty

    def take(self, size: int, alignment: int):
        """The offset of ``size`` free bytes (rounded up to ``alignment``)
        aligned to ``alignment`` (first fit), now taken; None when no free
        range fits. The caller gives back the rounded size."""
        # Sizes rounded up to the alignment keep every later offset aligned,
        # so taking leaves no padding fragments behind in the common case.
        size = _align_up(size, alignment)
        for i, (start, n) in enumerate(self.free):
            at = _align_up(start, alignment)
            end = at + size
            if end > start + n:
                continue
            pieces = []
            if at > start:
                pieces.append([start, at - start])
            if end < start + n:
                pieces.append([end, start + n - end])
            self.free[i:i + 1] = pieces
            self.used += size
            self.live += 1
            self.empty_since = None
            return at
        return None

    def give(self, offset: int, size: int, tick: int) -> None:
        """Return ``[offset, offset + size)``, merging it with its neighbours."""
        free = self.free
        i = bisect.bisect_left(free, [offset, 0])
        lo, hi = offset, offset + size
        if i > 0 and free[i - 1][0] + free[i - 1][1] == lo:
            i -= 1
            lo = free[i][0]
            del free[i]
        if i < len(free) and free[i][0] == hi:
            hi = free[i][0] + free[i][1]
            del free[i]
        free.insert(i, [lo, hi - lo])
        self.used -= size
        self.live -= 1
        if self.live == 0:
            self.empty_since = tick


class Suballocator:
    """Guest buffers for one device (see the module notes).

    ``create(size, usage, host_visible)`` → an :class:`Allocation`;
    ``release(alloc)`` once its last use retired. Counters:
    ``recycled_buffers`` (bound, waiting for reuse), ``blocks``,
    ``dedicated`` (buffers with memory of their own) and, for tests and the
    benchmarks, ``vulkan_buffers_created``."""

    def __init__(self, memory: MemoryManager):
        self.memory = memory
        self.fns, self.device = memory.fns, memory.device
        self._lock = threading.RLock()
        self._blocks: dict = {}          # memory type -> [Block]
        self._recycled: dict = {}        # (size, usage, host_visible) -> deque of (tick, Allocation)
        self._live: dict = {}            # id(Allocation) -> Allocation, every buffer made here
        self.tick_count = 0
        self.recycled_buffers = 0
        self.recycled_bytes = 0
        self.dedicated = 0
        self.vulkan_buffers_created = 0
        self._prefers_dedicated: dict = {}    # usage -> the driver wants memory of its own
        heap = max(memory.heap_sizes)
        self.block_size = min(BLOCK_SIZE, max(1 << 20, heap // 8))
        self.dedicated_from = self.block_size // 2
        memory.on_allocation_limit = self.trim

    # -- buffers ----------------------------------------------------------------------
    def create(self, size: int, usage: int = STORAGE_USAGE, host_visible: bool = False) -> Allocation:
        """A buffer of at least ``size`` bytes (its :func:`size_class`): a
        recycled one of the same class and kind when there is one."""
        asked, size = size, size_class(size)
        # Never past one binding's reach, or what one allocation holds, when
        # the tensor itself is not.
        for limit in (self.memory.max_binding_range, self.memory.max_allocation_size):
            if limit is not None and asked <= limit < size:
                size = _align_up(asked, 64)
        key = (size, usage, host_visible)
        with self._lock:
            waiting = self._recycled.get(key)
            if waiting:
                # Oldest first: in a steady loop every kept buffer circulates,
                # so none ages out and has to be made again later.
                a = waiting.popleft()[1]
                self.recycled_buffers -= 1
                self.recycled_bytes -= size
                self.memory.count_buffer(a)
                return a
        if size >= self.dedicated_from or self._driver_prefers_dedicated(usage):
            return self._dedicated(size, usage, host_visible)
        buffer, reqs = self.memory.new_buffer(size, usage)
        try:
            type_index = self.memory.pick_type(reqs.memoryTypeBits, host_visible)
            taken = _align_up(reqs.size, reqs.alignment)
            with self._lock:
                placed = self._place(type_index, taken, reqs.alignment)
            if placed is None:      # no block could be made: memory of its own, if that works
                self.fns.vkDestroyBuffer(self.device, buffer, ffi.NULL)
                buffer = None
                return self._dedicated(size, usage, host_visible)
            block, offset = placed
            try:
                check("vkBindBufferMemory", self.fns.vkBindBufferMemory(self.device, buffer, block.memory, offset))
            except BaseException:
                with self._lock:
                    self._give_back(block, offset, taken)
                raise
        except BaseException:
            if buffer is not None:
                self.fns.vkDestroyBuffer(self.device, buffer, ffi.NULL)
            raise
        mapped = ffi.buffer(block.base + offset, size) if block.base is not None else None
        a = Allocation(buffer, block.memory, size, mapped, self.memory.types[type_index][0], offset, block, usage)
        a.reserved = taken
        a.key = key
        self.vulkan_buffers_created += 1
        self.memory.count_buffer(a)
        with self._lock:
            self._live[id(a)] = a
        return a

    def _driver_prefers_dedicated(self, usage: int) -> bool:
        """Asked once per usage, of a small probe buffer (drivers decide by
        usage and flags, which are all a guest buffer varies in but size)."""
        prefers = self._prefers_dedicated.get(usage)
        if prefers is None:
            probe, _ = self.memory.new_buffer(256, usage)
            try:
                prefers = self.memory.prefers_dedicated(probe)
            finally:
                self.fns.vkDestroyBuffer(self.device, probe, ffi.NULL)
            self._prefers_dedicated[usage] = prefers
        return prefers

    def _dedicated(self, size: int, usage: int, host_visible: bool) -> Allocation:
        a = self.memory.create(size, usage, host_visible, dedicated=self._driver_prefers_dedicated(usage))
        a.reserved = a.block.size
        a.key = (size, usage, host_visible)
        self.vulkan_buffers_created += 1
        with self._lock:
            self._live[id(a)] = a
            self.dedicated += 1
        return a

    def create_shared(self, size: int, imported=None) -> Allocation:
        """A buffer with memory of its own that another device or CUDA can
        share (see MemoryManager.create_shared); destroyed, never recycled,
        once released."""
        a = self.memory.create_shared(size, STORAGE_USAGE, imported)
        self.vulkan_buffers_created += 1
        with self._lock:
            self._live[id(a)] = a
            self.dedicated += 1
        return a

    def holds(self, handle) -> bool:
        """Whether VkBuffer ``handle`` is one of the guest's (a tensor's own)."""
        with self._lock:
            return any(a.buffer == handle for a in self._live.values())

    def release(self, a: Allocation) -> None:
        """``a``'s last use retired: keep it for reuse (see :meth:`tick`)."""
        with self._lock:
            if id(a) not in self._live:
                return              # destroyed by destroy_all at close
            self.memory.uncount_buffer(a)
            if a.shareable:         # others may hold its memory: never hand it to another tensor
                self._destroy(a)
                return
            # Never keep more idle than is in use (or the floors): a mass
            # free gives its memory back instead of parking it.
            if (self.recycled_bytes + a.size > max(RECYCLE_FLOOR, self.memory.live_bytes)
                    or self.recycled_buffers >= max(RECYCLE_FLOOR_BUFFERS, self.memory.live_buffers)):
                self._destroy(a)
                return
            waiting = self._recycled.get(a.key)
            if waiting is None:
                waiting = self._recycled[a.key] = collections.deque()
            waiting.append((self.tick_count, a))
            self.recycled_buffers += 1
            self.recycled_bytes += a.size

    def _destroy(self, a: Allocation, idle_since: int = None) -> None:
        """Destroy a buffer for good (it is not counted live any more);
        ``idle_since``: the tick since which it was unused."""
        del self._live[id(a)]
        if a.block.__class__ is Block:
            self.fns.vkDestroyBuffer(self.device, a.buffer, ffi.NULL)
            self._give_back(a.block, a.offset, a.reserved, idle_since)
        else:
            self.memory.destroy(a, counted=False)
            self.dedicated -= 1

    # -- blocks -----------------------------------------------------------------------
    def _place(self, type_index: int, size: int, alignment: int):
        """(block, offset) of ``size`` bytes in a block of ``type_index``,
        making a block when none has room; None when none can be made."""
        blocks = self._blocks.setdefault(type_index, [])
        for block in blocks:
            offset = block.take(size, alignment)
            if offset is not None:
                return block, offset
        grown = max((b.size for b in blocks), default=self.block_size // FIRST_BLOCK_FRACTION // 2) * 2
        block_size = max(_align_up(size, 1 << 16), min(self.block_size, grown))
        try:
            memory = self.memory.allocate(block_size, type_index, f"a memory block of {block_size} bytes")
        except OutOfMemoryError:
            return None
        base = None
        if self.memory.types[type_index][0] & HOST_VISIBLE:
            try:
                base = ffi.cast("char *", self.memory.map(memory, block_size))
            except BaseException:
                self.memory.free(memory, block_size, type_index)
                raise
        block = Block(memory, type_index, block_size, base)
        blocks.append(block)
        return block, block.take(size, alignment)

    def _give_back(self, block: Block, offset: int, size: int, idle_since: int = None) -> None:
        block.give(offset, size, self.tick_count if idle_since is None else idle_since)
        if block.live == 0 and self._empty_blocks(block.type_index) > 1:
            self._free_block(block)     # one empty block per type is enough to absorb churn

    def _empty_blocks(self, type_index: int) -> int:
        return sum(1 for b in self._blocks.get(type_index, ()) if b.live == 0)

    def _free_block(self, block: Block) -> None:
        self._blocks[block.type_index].remove(block)
        self.memory.free(block.memory, block.size, block.type_index)

    # -- ageing -----------------------------------------------------------------------
    def tick(self) -> None:
        """An epoch advanced: recycled buffers and empty blocks unused for
        KEEP_TICKS advances go back to the driver."""
        with self._lock:
            self.tick_count += 1
            self._expire(self.tick_count - KEEP_TICKS)

    def trim(self) -> None:
        """Return every recycled buffer and every empty block to the driver now."""
        with self._lock:
            self._expire(None)

    def _expire(self, before) -> None:
        for key in list(self._recycled):
            waiting = self._recycled[key]
            keep = [(t, a) for t, a in waiting if before is not None and t > before]
            for t, a in waiting:
                if before is None or t <= before:
                    self.recycled_buffers -= 1
                    self.recycled_bytes -= a.size
                    self._destroy(a, t)
            if keep:
                self._recycled[key] = collections.deque(keep)
            else:
                del self._recycled[key]
        for blocks in list(self._blocks.values()):
            for block in list(blocks):
                if block.live == 0 and (before is None or block.empty_since <= before):
                    self._free_block(block)

    # -- reports and teardown ----------------------------------------------------------
    def blocks(self) -> int:
        return sum(len(b) for b in self._blocks.values())

    def block_bytes(self) -> int:
        return sum(b.size for blocks in self._blocks.values() for b in blocks)

    def destroy_all(self) -> None:
        """Teardown: every buffer made here and every block go."""
        with self._lock:
            recycled = {id(a) for waiting in self._recycled.values() for _, a in waiting}
            for a in list(self._live.values()):
                counted = id(a) not in recycled
                if a.block.__class__ is Block:
                    self.fns.vkDestroyBuffer(self.device, a.buffer, ffi.NULL)
                    if counted:
                        self.memory.uncount_buffer(a)
                else:
                    self.memory.destroy(a, counted=counted)
            self._live.clear()
            self._recycled.clear()
            self.recycled_buffers = self.recycled_bytes = self.dedicated = 0
            for blocks in self._blocks.values():
                for block in blocks:
                    self.memory.free(block.memory, block.size, block.type_index)
            self._blocks.clear()
