"""Synchronization: every pipeline stage and access mask guestcompute uses,
the hazard tracker, and the barrier state of one recording.

All masks live here so that no two files can disagree about, say, which
accesses count as writes. The module records nothing: it says which
barrier is needed, and the recorder emits it.

**Hazards.** ``HazardTracker`` keeps, per hazard key (``Buffer.hazard_keys``:
a guest buffer's VkBuffer, or a byte range of a host VkBuffer; an image's
VkImage and subresource), whether it was written
or read since the last barrier, and the stages (and write accesses) that did
it. A command that reads something written (RAW), writes something read
(WAR) or writes something written (WAW) since then needs a barrier; the
barrier is one global VkMemoryBarrier from the accumulated stages, as cheap
as buffer barriers on every driver we know, and it covers all buffers.
After any barrier the tracker starts over. A barrier's second scope
covers all the stages guest work itself uses (``GUEST_STAGES``), except the
one before a direct dispatch: that reaches compute shaders only
(``DISPATCH_STAGES``), since on NVIDIA's driver each dependent dispatch
behind a barrier that also reaches the transfer and indirect stages took
about 2.4 us more (5.2 against 2.9 us a link of a chain of small
dispatches, measured on an H100). Earlier work is then ordered before
compute shaders only: the tracker notes it (``narrowed``), and the next
work of another stage (an indirect dispatch, a copy, a host hook) gets a
barrier from the dispatches' stage first, even where no key conflicts; a
barrier from there to every guest stage ends it. The
command stream's walkers can apply this rule themselves as they record
(vk/command_stream.py): the Python walker with a HazardTracker, the C walker
with its twin (vk/native_tracker.py).

**Barrier state.** ``BarrierState`` is what one recording has ordered so
far: whether the entry barrier was recorded, which host stages/accesses the
entry barriers covered, the host-shared buffers met (for the exit barrier),
and the stages of guest work other than dispatches (program replays,
parameter updates, host hooks). Its methods return the masks of the
barrier each step needs.
"""
from __future__ import annotations

from typing import NamedTuple

import vulkan as vk
from vulkan import ffi

from .structs import array

# -- pipeline stages -----------------------------------------------------------
COMPUTE = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
TRANSFER = vk.VK_PIPELINE_STAGE_TRANSFER_BIT
HOST = vk.VK_PIPELINE_STAGE_HOST_BIT
INDIRECT = vk.VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT
TOP_OF_PIPE = vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT
BOTTOM_OF_PIPE = vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT

# -- accesses -------------------------------------------------------------------
SHADER_READ = vk.VK_ACCESS_SHADER_READ_BIT
SHADER_WRITE = vk.VK_ACCESS_SHADER_WRITE_BIT
SHADER_RW = SHADER_READ | SHADER_WRITE
TRANSFER_READ = vk.VK_ACCESS_TRANSFER_READ_BIT
TRANSFER_WRITE = vk.VK_ACCESS_TRANSFER_WRITE_BIT
INDIRECT_READ = vk.VK_ACCESS_INDIRECT_COMMAND_READ_BIT
HOST_READ = vk.VK_ACCESS_HOST_READ_BIT
HOST_WRITE = vk.VK_ACCESS_HOST_WRITE_BIT
MEMORY_WRITE = vk.VK_ACCESS_MEMORY_WRITE_BIT

# Every access bit that writes memory (a release, or an ownership-transfer
# half, may only name writes).
WRITE_ACCESS = (SHADER_WRITE | TRANSFER_WRITE | vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT
                | vk.VK_ACCESS_DEPTH_STENCIL_ATTACHMENT_WRITE_BIT | HOST_WRITE | MEMORY_WRITE)

# The stages and accesses guest work itself uses: dispatches, parameter
# updates and staging copies, indirect-argument reads. Every guest barrier's
# second scope, so the hazard tracker may start over after any barrier.
GUEST_STAGES = COMPUTE | TRANSFER | INDIRECT
GUEST_ACCESS = SHADER_RW | TRANSFER_READ | TRANSFER_WRITE | INDIRECT_READ
GUEST_WRITES = SHADER_WRITE | TRANSFER_WRITE

# The second scope of a hazard barrier before a direct dispatch (the module notes).
DISPATCH_STAGES, DISPATCH_ACCESS = COMPUTE, SHADER_RW

# Earlier guest work (previous frames, other recordings, uploads) that a
# recording's first command waits for.
EARLIER_GUEST_STAGES = COMPUTE | TRANSFER
EARLIER_GUEST_WRITES = SHADER_WRITE | TRANSFER_WRITE

ALL_BITS = 0xFFFFFFFF

# -- image layouts ---------------------------------------------------------------
# Guest work uses every image in GENERAL: storage writes need it and sampled
# reads are legal in it, so dispatches that read one mip and write the next
# (generate_mips, bloom chains) need barriers for memory only, never layout
# transitions. An imported image is transitioned once on entry (host layout
# -> GENERAL) and once on exit (GENERAL -> the host's exit layout).
UNDEFINED = vk.VK_IMAGE_LAYOUT_UNDEFINED
GENERAL = vk.VK_IMAGE_LAYOUT_GENERAL
GUEST_LAYOUT = GENERAL
# Writing a layout transition is a write: its source scope must include the
# last accesses of the old layout, and what follows must wait for it.
IMAGE_GUEST_ACCESS = SHADER_RW | TRANSFER_READ | TRANSFER_WRITE


def handle_value(handle) -> int:
    """A Vulkan handle as an int: what two imports of one object share."""
    return int(ffi.cast("uintptr_t", handle))


# Hazard keys name memory by the Vulkan object holding it, never by the
# guest object that reaches it: two imports of one VkImage, or a guest
# tensor's VkBuffer imported with import_buffer, are one resource to the
# tracker. A handle value the driver reuses after a destroy can only add
# barriers (the old object's work is finished before it is destroyed).
#
# A key is a 64-bit integer — what the walkers' trackers hold (the C one in
# hash sets of uint64) — hashed from what it names. No table maps names to
# keys, so nothing grows with the buffers a long run makes; two resources
# share a key only by a 64-bit hash collision, which can only add a barrier.
_KEY_BITS = (1 << 64) - 1


def _hazard_key(*name) -> int:
    return hash(name) & _KEY_BITS


def buffer_hazard_key(handle_key: int) -> int:
    """A whole VkBuffer: every guest buffer has one of its own."""
    return _hazard_key("buffer", handle_key)


def image_hazard_key(handle_key: int, mip: int, layer: int) -> int:
    """One subresource (mip level, array layer) of a VkImage."""
    return _hazard_key("image", handle_key, mip, layer)


def range_hazard_key(uid: int) -> int:
    """One imported byte range of a host's VkBuffer (device/imported_ranges.py)."""
    return _hazard_key("range", uid)


class ImageTransition(NamedTuple):
    """One VkImageMemoryBarrier over every mip and layer of an image."""
    handle: object
    aspect: int
    mip_levels: int
    array_layers: int
    old_layout: int
    new_layout: int
    src_access: int
    dst_access: int


def image_barriers(transitions):
    """A VkImageMemoryBarrier[] for ``transitions`` (queue family ignored)."""
    return array("VkImageMemoryBarrier", [dict(
        sType=vk.VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER, srcAccessMask=t.src_access, dstAccessMask=t.dst_access,
        oldLayout=t.old_layout, newLayout=t.new_layout, srcQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
        dstQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED, image=t.handle,
        subresourceRange=dict(aspectMask=t.aspect, baseMipLevel=0, levelCount=t.mip_levels, baseArrayLayer=0,
                              layerCount=t.array_layers)) for t in transitions])


def whole_image_transition(img, old_layout: int, new_layout: int, src_access: int, dst_access: int):
    return ImageTransition(img.handle, img.format.aspect, img.mip_levels, img.array_layers, old_layout,
                           new_layout, src_access, dst_access)


def first_layout_transition(img):
    """A new guest image's move from UNDEFINED to GUEST_LAYOUT, where it
    stays (nothing to wait for: it holds nothing yet)."""
    return whole_image_transition(img, UNDEFINED, GUEST_LAYOUT, 0, IMAGE_GUEST_ACCESS)


class TrackerRules:
    """What both hazard trackers — :class:`HazardTracker`, which the Python
    walker runs, and the C walker's ``native_tracker.NativeTracker`` — derive
    from their fields (``stages``, ``access``, ``dispatch_stages``,
    ``dispatch_access``, ``barriers``, ``covered_stages``, ``covered_access``)
    and their ``after_barrier``: one copy of the rules for both."""
    __slots__ = ()

    @staticmethod
    def conflict(written, read, reads, writes) -> bool:
        """Does work reading ``reads`` and writing ``writes`` meet what was
        ``written`` (RAW, WAW) or ``read`` (WAR) since the last barrier?"""
        return not (written.isdisjoint(reads) and written.isdisjoint(writes) and read.isdisjoint(writes))

    def hazard_sources(self) -> tuple:
        """(stages, access) a dispatch's hazard barrier waits for: every
        dispatch's, and what other guest work (hooks, updates) did since."""
        return self.dispatch_stages | self.stages, self.dispatch_access | self.access

    def covering(self, src_stage: int, src_access: int) -> tuple:
        """A barrier's sources widened, when there is a barrier at all, by
        the work tracked since the last one (see BarrierState.covering_tracked)."""
        if src_stage:
            src_stage |= self.stages
            src_access |= self.access
        return src_stage, src_access

    def hazard_scope(self, indirect: bool) -> tuple:
        """(stages, access): the second scope of a hazard barrier before a
        dispatch: compute shaders, and every guest stage before an indirect
        one (the command processor reads its parameters)."""
        return (self.dst_stages, self.dst_access) if indirect else (self.near_stages, self.near_access)

    def narrowed_after(self, src_stage: int, src_access: int, dst_stage: int, dst_access: int) -> int:
        """1 where earlier guest work is left ordered before compute shaders
        only after a barrier with these scopes: a barrier from the
        dispatches' stage to every guest stage orders all of it (a narrower
        one before it reached that stage); one that reaches less leaves the
        work tracked so far, and any left before."""
        from_dispatches = (src_stage & self.dispatch_stages == self.dispatch_stages
                           and src_access & self.dispatch_access == self.dispatch_access)
        to_guest = dst_stage & self.dst_stages == self.dst_stages and dst_access & self.dst_access == self.dst_access
        if from_dispatches and to_guest:
            return 0
        return 1 if self.narrowed or self.stages else 0

    def barrier_recorded(self, src_stage: int, src_access: int, dst_stage: int, dst_access: int) -> None:
        self.narrowed = self.narrowed_after(src_stage, src_access, dst_stage, dst_access)
        self.barriers += 1
        self.covered_stages |= src_stage
        self.covered_access |= src_access
        self.after_barrier()


class HazardTracker(TrackerRules):
    """Per hazard key: written or read since the last barrier (see the module notes).

    Also the Python walker's twin of the C walker's gc_tracker (see
    vk/native_tracker.py, same interface): ``dst_stages`` / ``dst_access``
    are the second scope of a barrier it asks for (``near_stages`` /
    ``near_access`` before a direct dispatch, see the module notes);
    ``barriers`` counts the barriers recorded through it
    (``hazard_barriers`` those the walker added for a hazard);
    ``covered_stages`` / ``covered_access`` OR their sources; ``narrowed``:
    earlier work is ordered before compute shaders only.
    """
    __slots__ = ("written", "read", "stages", "access", "dst_stages", "dst_access", "barriers",
                 "hazard_barriers", "covered_stages", "covered_access", "narrowed")
    dispatch_stages, dispatch_access = COMPUTE, SHADER_WRITE     # what a tracked dispatch adds
    near_stages, near_access = DISPATCH_STAGES, DISPATCH_ACCESS

    def __init__(self, dst_stages: int = GUEST_STAGES, dst_access: int = GUEST_ACCESS):
        self.written: set = set()
        self.read: set = set()
        self.stages = 0      # stages that touched anything since the last barrier
        self.access = 0      # write accesses made since the last barrier
        self.dst_stages, self.dst_access = dst_stages, dst_access
        self.barriers = self.hazard_barriers = 0
        self.covered_stages = self.covered_access = 0
        self.narrowed = 0

    def needs_barrier(self, reads, writes) -> bool:
        return self.conflict(self.written, self.read, reads, writes)

    def after_barrier(self) -> None:
        self.written.clear()
        self.read.clear()
        self.stages = 0
        self.access = 0

    def touch(self, reads, writes, stages: int = COMPUTE, access: int = SHADER_WRITE) -> None:
        self.read.update(reads)
        self.written.update(writes)
        self.stages |= stages
        if writes:
            self.access |= access

    def written_keys(self) -> frozenset:
        return frozenset(self.written)

    def read_keys(self) -> frozenset:
        return frozenset(self.read)


class BarrierState:
    """The barrier state of one recording (see the module notes).

    ``entered``: the entry barrier (against earlier guest work) is recorded,
    or not needed. ``covered_stages`` / ``covered_access``: host stages and
    accesses the entry barriers waited for so far (all bits: never wait for
    the host, as inside a program or a semaphore hand-off). ``imports``:
    uid -> [Buffer, written?] per host-shared buffer met, since each import
    declares its own host access; ``import_stages`` / ``import_access``: the
    OR of their declared accesses (the exit barrier's second scope).
    ``waiting_imports``: dispatch plans whose imports needed no entry
    barrier (each with ``imports``, (Buffer, written) pairs, and their ORed
    ``import_stages`` / ``import_access`` / ``import_written``): the hot path
    only appends; the exit barrier reads the ORs, and ``met_imports``
    registers them when something needs ``imports`` itself.
    ``wrote_mapped``: a write to host-mapped
    guest memory (the exit barrier makes it visible to the host).
    ``extra_stages`` / ``extra_access``: non-dispatch guest work since entry.
    ``images``: VkImage handle value -> [Image, written] per imported VkImage
    met (two imports of one VkImage are one entry: the first met gives the
    layouts), and ``image_states`` the (entry, exit) layouts a recording
    declared for some of them (``rec.using``); the exit barrier moves each
    back to its exit layout. ``users``: every import met while it waits for
    the host (each refuses ``rebind`` until the exit barrier).
    """
    __slots__ = ("hazards", "entered", "covered_stages", "covered_access", "imports", "waiting_imports",
                 "import_stages",
                 "import_access", "wrote_mapped", "extra_stages", "extra_access", "waits_for_host", "images",
                 "image_states", "users")

    def __init__(self, *, entered: bool = False, waits_for_host: bool = True, hazards=None):
        # hazards: a HazardTracker, or the C walker's (native_tracker.NativeTracker)
        self.hazards = hazards if hazards is not None else HazardTracker()
        self.entered = entered
        self.waits_for_host = waits_for_host
        self.covered_stages = self.covered_access = 0 if waits_for_host else ALL_BITS
        self.imports: dict = {}
        self.waiting_imports: list = []
        self.import_stages = self.import_access = 0
        self.images: dict = {}          # VkImage handle value -> [Image, written] per imported image met
        self.image_states: dict = {}    # VkImage handle value -> (entry, exit) a recording overrides
        self.users: list = []           # the imports whose open_recordings hold this state
        self.wrote_mapped = False
        self.extra_stages = 0
        self.extra_access = 0

    def host_image_sources(self, img, written: bool) -> tuple:
        """Register imported image ``img``; returns (stages, access,
        transition or None) the entry barrier must still include: on the
        image's first use, the host's declared stages and accesses and the
        move from its declared layout to GENERAL. A recording that does not
        wait for the host (a program capture) transitions nothing: the
        recorder replaying it does."""
        key = img.handle_key
        seen = self.images.get(key)
        if seen is not None:
            if written:
                seen[1] = True
            if seen[0] is not img and self.waits_for_host and self not in img.open_recordings:
                img.open_recordings.add(self)     # another import of the same VkImage
                self.users.append(img)
            return 0, 0, None
        self.images[key] = [img, written]
        if not self.waits_for_host:
            return 0, 0, None
        img.open_recordings.add(self)
        self.users.append(img)
        entry = self.image_states.get(key, (img.entry, img.exit))[0]
        ha = entry.access
        transition = None
        if entry.layout != GUEST_LAYOUT:
            transition = whole_image_transition(img, entry.layout, GUEST_LAYOUT, ha.access & WRITE_ACCESS,
                                                IMAGE_GUEST_ACCESS)
        return ha.stages, ha.access, transition

    def met_imports(self) -> dict:
        """``imports``, with the waiting ones registered first."""
        waiting = self.waiting_imports
        if waiting:
            for plan in waiting:
                for b, written in plan.imports:
                    self._register_import(b, written)
            waiting.clear()
        return self.imports

    def _register_import(self, b, written: bool) -> bool:
        """Note host-shared buffer ``b`` as met (and written); True the first time."""
        seen = self.imports.get(b.uid)
        if seen is not None:
            if written:
                seen[1] = True
            return False
        self.imports[b.uid] = [b, written]
        self.import_stages |= b.host_access.stages
        self.import_access |= b.host_access.access
        return True

    def host_sources(self, b, written: bool) -> tuple:
        """Register host-shared buffer ``b``; returns the (stages, access)
        the entry barrier must still wait for — none when an earlier entry
        barrier covered its declared host access already."""
        self.met_imports()
        if not self._register_import(b, written):
            return 0, 0
        stages, access = b.host_access.stages, b.host_access.access
        # Barriers the walker recorded for hazards count too (as of its last walk).
        hz = self.hazards
        if stages & ~(self.covered_stages | hz.covered_stages) or access & ~(self.covered_access | hz.covered_access):
            return stages, access
        return 0, 0

    def sources_before(self, reads, writes, force: bool, recorded_any: bool) -> tuple:
        """(stages, access) of guest work that guest work reading ``reads``
        and writing ``writes`` must wait for; ``force`` orders everything
        recorded so far (``recorded_any``: a dispatch was recorded)."""
        hz = self.hazards
        if force:
            if recorded_any or self.extra_stages:
                return COMPUTE | self.extra_stages, SHADER_WRITE | self.extra_access
            return 0, 0
        if hz.narrowed or hz.needs_barrier(reads, writes):
            # hz.stages / hz.access add what non-dispatch work (hooks, updates)
            # did; narrowed: earlier work is ordered before compute shaders only
            return COMPUTE | hz.stages, SHADER_WRITE | hz.access
        return 0, 0

    def covering_tracked(self, src_stage: int, src_access: int) -> tuple:
        """A barrier's sources widened, when there is a barrier at all, by
        the guest work tracked since the last one: recording it clears the
        tracker (barrier_recorded), so a barrier made only for a host
        import's or an image's entry must not drop an earlier write's hazard."""
        return self.hazards.covering(src_stage, src_access)

    def barrier_recorded(self, src_stage: int, src_access: int) -> None:
        """A barrier from ``src_stage`` to every guest stage was recorded."""
        self.covered_stages |= src_stage
        self.covered_access |= src_access
        hz = self.hazards
        hz.narrowed = hz.narrowed_after(src_stage, src_access, GUEST_STAGES, GUEST_ACCESS)
        hz.after_barrier()

    def after_work(self, reads, writes, stages: int, write_access: int, wrote_mapped: bool) -> None:
        """Account for non-dispatch guest work just recorded."""
        self.hazards.touch(reads, writes, stages, write_access)
        self.extra_stages |= stages
        if writes:
            self.extra_access |= write_access
        if wrote_mapped:
            self.wrote_mapped = True

    def exit_masks(self, to_host_accesses: bool):
        """(src stages, src access, dst stages, dst access) of the exit
        barrier that hands guest writes to the host — to the declared
        accesses of every host-shared buffer (``to_host_accesses``) and, for
        host-mapped guest memory, to the host — or None when none is
        needed. Resets the state for a next entry."""
        extra_stages, extra_access = self.extra_stages, self.extra_access
        src_access = dst_stage = dst_access = 0
        transitions = []
        if to_host_accesses:
            dst_stage, dst_access = self.import_stages, self.import_access
            written = any(seen[1] for seen in self.imports.values())
            for plan in self.waiting_imports:
                dst_stage |= plan.import_stages
                dst_access |= plan.import_access
                written = written or plan.import_written
            if written:
                src_access = SHADER_WRITE | extra_access
            for key, (img, written) in self.images.items():
                exit_state = self.image_states.get(key, (img.entry, img.exit))[1]
                ha = exit_state.access
                dst_stage |= ha.stages
                dst_access |= ha.access
                wrote = (SHADER_WRITE | extra_access) if written else 0
                src_access |= wrote
                if exit_state.layout != GUEST_LAYOUT:
                    transitions.append(whole_image_transition(img, GUEST_LAYOUT, exit_state.layout, wrote,
                                                              ha.access))
        if self.wrote_mapped:
            src_access = SHADER_WRITE | extra_access
            dst_stage |= HOST
            dst_access |= HOST_READ
        needed = bool(dst_stage)
        self.extra_stages = self.extra_access = 0
        self.imports.clear()
        self.waiting_imports.clear()
        self.import_stages = self.import_access = 0
        if to_host_accesses:
            self.images.clear()
            self.image_states.clear()
            for img in self.users:
                img.open_recordings.discard(self)
            self.users.clear()
        self.wrote_mapped = False
        self.entered = False
        if to_host_accesses:
            self.covered_stages = self.covered_access = 0
        self.hazards.after_barrier()
        if not needed:
            return None
        return COMPUTE | extra_stages, src_access, dst_stage, dst_access, transitions
