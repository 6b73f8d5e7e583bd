"""The hazard tracker the walkers run: the C walker (gc_record with its
gc_tracker) and the Python walker (with sync.HazardTracker) record the same
calls and end in the same tracker state for any stream, and both match a
plain model of the rule written here.

No device: both walkers record through logging fakes (ctypes callbacks in
the C walker's function table, a Python object for the Python walker), and
the handles are made up.
"""
import gc as pygc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from vulkan import ffi

from guestcompute.vk import command_stream, sync
from guestcompute.vk.command_stream import CommandInterpreter, DispatchCommand
from guestcompute.vk.native_tracker import NativeTracker

from stream_fakes import CFunctions, FakeBuffer, FakeDescriptors, FakePipe, PythonFunctions, address, built_library

DST_STAGES, DST_ACCESS = sync.GUEST_STAGES, sync.GUEST_ACCESS
PIPES = [FakePipe(0x1000 + 0x10 * i, 0x2000 + 0x10 * i) for i in range(2)]
DESCRIPTORS = [FakeDescriptors(count=2), FakeDescriptors(bound_set=0x3000)]
INDIRECT = (FakeBuffer(0x4000), 16)
CMD = 0x5000
STATE = ("stages", "access", "dst_stages", "dst_access", "barriers", "hazard_barriers", "covered_stages",
         "covered_access", "narrowed")


@pytest.fixture(scope="module")
def library_path(tmp_path_factory):
    return built_library(tmp_path_factory)


# -- running a sequence of steps -----------------------------------------------------

def _command(pipe, desc, push, indirect, reads, writes):
    return DispatchCommand(PIPES[pipe], DESCRIPTORS[desc], bytes([push]) * 4 if push else b"", (push + 1, 2, 3),
                           INDIRECT if indirect else None, reads, writes)


def run(steps, walker: str, monkeypatch, library_path):
    """Drive one walker through ``steps``; returns its log and its tracker's state."""
    log = []
    if walker == "native":
        monkeypatch.setattr(command_stream, "native_library_path", lambda: library_path)
        interpreter = CommandInterpreter(CFunctions(log), mode="require")
    else:
        interpreter = CommandInterpreter(PythonFunctions(log), mode="off")
    tracker = interpreter.tracker(DST_STAGES, DST_ACCESS)
    stream = interpreter.stream(ffi.cast("VkCommandBuffer", CMD), ffi.new("VkMemoryBarrier *", {
        "sType": 46}), tracker)
    for step in steps:
        kind, args = step[0], step[1:]
        if kind == "dispatch":
            stream.append(args[0])
        elif kind == "barrier":
            stream.barrier(*args)
        else:
            stream.flush()
            if kind == "touch":
                tracker.touch(*args)
            elif kind == "after_barrier":
                tracker.after_barrier()
            elif kind == "needs":
                log.append(("needs", tracker.needs_barrier(*args)))
            elif kind == "set":
                tracker.stages, tracker.access = args
            elif kind == "forget_bound":
                stream.forget_bound()
    stream.flush()
    return log, state_of(tracker)


def state_of(tracker) -> dict:
    state = {name: getattr(tracker, name) for name in STATE}
    state["written"], state["read"] = tracker.written_keys(), tracker.read_keys()
    return state


# -- the model: the rule, written plainly ------------------------------------------------

def model(steps):
    """What either walker must record, and the tracker state it must end in."""
    log, t = [], dict.fromkeys(STATE, 0)
    t.update(dst_stages=DST_STAGES, dst_access=DST_ACCESS, written=set(), read=set())
    bound = [None, None]

    def barrier(src, dst, src_access, dst_access):
        log.append(("barrier", CMD, src, dst, 0, 1, src_access, dst_access))
        # From the dispatches to every guest stage: all earlier work ordered
        # for everything; else what was tracked (and left) stays ordered for
        # compute shaders only.
        everything = (src & sync.COMPUTE and src_access & sync.SHADER_WRITE
                      and dst & DST_STAGES == DST_STAGES and dst_access & DST_ACCESS == DST_ACCESS)
        t["narrowed"] = 0 if everything else int(bool(t["narrowed"] or t["stages"]))
        t["barriers"] += 1
        t["covered_stages"] |= src
        t["covered_access"] |= src_access
        clear()

    def clear():
        t["written"], t["read"], t["stages"], t["access"] = set(), set(), 0, 0

    def touch(reads, writes, stages, access):
        t["read"] |= set(reads)
        t["written"] |= set(writes)
        t["stages"] |= stages
        t["access"] |= access if writes else 0

    def conflict(reads, writes):
        return bool(t["written"] & (set(reads) | set(writes)) or t["read"] & set(writes))

    for step in steps:
        kind = step[0]
        if kind == "dispatch":
            py = step[1].py_fields
            indirect = py.indirect_buffer is not None
            if py.flags and ((indirect and t["narrowed"]) or conflict(py.hazard_reads, py.hazard_writes)):
                # Before a direct dispatch the barrier reaches compute shaders only.
                dst, dst_access = (DST_STAGES, DST_ACCESS) if indirect else (sync.COMPUTE, sync.SHADER_RW)
                barrier(sync.COMPUTE | t["stages"], dst, sync.SHADER_WRITE | t["access"], dst_access)
                t["hazard_barriers"] += 1
            pipe, layout, desc = address(py.pipeline), address(py.layout), py.descriptors
            if bound[0] != pipe:
                log.append(("bind", CMD, 1, pipe))
                bound[0] = pipe
            if bound[1] != (layout, desc):
                if py.descriptor_writes is not None:
                    log.append(("descriptors", CMD, 1, layout, 0, py.descriptor_write_count,
                                address(py.descriptor_writes)))
                else:
                    log.append(("set", CMD, 1, layout, 0, 1, address(py.descriptor_set), 0))
                bound[1] = (layout, desc)
            if py.push_size:
                log.append(("push", CMD, layout, 0x20, 0, bytes(ffi.buffer(py.push, py.push_size))))
            if py.indirect_buffer is not None:
                log.append(("indirect", CMD, address(py.indirect_buffer), py.indirect_offset))
            else:
                log.append(("dispatch", CMD, py.group_x, py.group_y, py.group_z))
            if py.flags:
                touch(py.hazard_reads, py.hazard_writes, sync.COMPUTE, sync.SHADER_WRITE)
        elif kind == "barrier":
            src, dst, src_access, dst_access, covering = step[1:]
            if covering and src:
                src, src_access = src | t["stages"], src_access | t["access"]
            barrier(src, dst, src_access, dst_access)
        elif kind == "touch":
            touch(*step[1:])
        elif kind == "after_barrier":
            clear()
        elif kind == "needs":
            log.append(("needs", conflict(*step[1:])))
        elif kind == "set":
            t["stages"], t["access"] = step[1:]
        elif kind == "forget_bound":
            bound = [None, None]
    t["written"], t["read"] = frozenset(t["written"]), frozenset(t["read"])
    return log, t


# -- random streams ----------------------------------------------------------------------

keys = st.lists(st.one_of(st.integers(0, 40), st.sampled_from([2**32, 2**63, 2**64 - 1])), max_size=6)
stages = st.sampled_from([0, sync.COMPUTE, sync.TRANSFER, sync.TRANSFER | sync.HOST, sync.INDIRECT])
accesses = st.sampled_from([0, sync.SHADER_WRITE, sync.TRANSFER_WRITE, sync.SHADER_RW | sync.HOST_WRITE])
dispatches = st.builds(_command, st.integers(0, 1), st.integers(0, 1), st.integers(0, 2), st.booleans(),
                       st.one_of(st.none(), keys), st.one_of(st.none(), keys)).map(lambda c: ("dispatch", c))
steps = st.lists(st.one_of(
    dispatches, dispatches, dispatches,
    st.tuples(st.just("barrier"), stages, stages, accesses, accesses, st.booleans()),
    st.tuples(st.just("touch"), keys, keys, stages.filter(bool), accesses),
    st.tuples(st.just("needs"), keys, keys),
    st.tuples(st.just("set"), stages, accesses),
    st.just(("after_barrier",)), st.just(("flush",)), st.just(("forget_bound",))), max_size=40)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=steps)
def test_both_walkers_record_what_the_model_says(steps, monkeypatch, library_path):
    expected = model(steps)
    assert run(steps, "python", monkeypatch, library_path) == expected
    assert run(steps, "native", monkeypatch, library_path) == expected


@pytest.mark.parametrize("walker", ["python", "native"])
def test_a_large_key_set_grows_and_clears(walker, monkeypatch, library_path):
    """Thousands of keys between barriers (the C set grows many times), then
    one dispatch reading the last one written: one barrier, then a fresh set."""
    writes = [_command(0, 0, 0, False, [], [k * 7919 + 1]) for k in range(3000)]
    steps = [("dispatch", c) for c in writes] + [("needs", [2], [])]
    steps += [("dispatch", _command(1, 1, 1, False, [2999 * 7919 + 1], [5])), ("needs", [5], [])]
    log, state = run(steps, walker, monkeypatch, library_path)
    assert (log, state) == model(steps)
    assert log.count(("needs", False)) == 1 and log[-1] == ("needs", True)
    assert state["hazard_barriers"] == 1 and state["written"] == {5}


@pytest.mark.parametrize("walker", ["python", "native"])
def test_a_barrier_cut_short_stops_before_it(walker, monkeypatch, library_path):
    steps = [("dispatch", _command(0, 0, 0, False, None, None))]
    log = []
    if walker == "native":
        monkeypatch.setattr(command_stream, "native_library_path", lambda: library_path)
        interpreter = CommandInterpreter(CFunctions(log), mode="require")
    else:
        interpreter = CommandInterpreter(PythonFunctions(log), mode="off")
    stream = interpreter.stream(ffi.cast("VkCommandBuffer", CMD), ffi.new("VkMemoryBarrier *"))
    stream.append(steps[0][1])
    stream.words += (command_stream.BARRIER, 1, 2)
    with pytest.raises(RuntimeError, match="cut short at word 1 of 4"):
        stream.flush()
    assert [entry[0] for entry in log] == ["bind", "descriptors", "dispatch"] and not stream.words


def _library_with(lib, **functions):
    """``lib`` with some of its functions replaced (to count the calls)."""
    class Library:
        def __getattr__(self, name):
            return functions[name] if name in functions else getattr(lib, name)
    return Library()


def test_the_c_tracker_is_freed_with_its_owner(library_path):
    lib = command_stream.load(library_path)
    freed = []

    def tracker_free(pointer):
        freed.append(address(pointer))
        lib.tracker_free(pointer)

    tracker = NativeTracker(_library_with(lib, tracker_free=tracker_free))
    tracker.touch([1, 2], [3])
    where = address(tracker.pointer)
    del tracker
    pygc.collect()
    assert freed == [where]


def test_a_replay_alone_never_makes_the_c_tracker(library_path):
    lib = command_stream.load(library_path)
    made = []

    def tracker_new(*args):
        made.append(args)
        return lib.tracker_new(*args)

    tracker = NativeTracker(_library_with(lib, tracker_new=tracker_new))
    assert not tracker.needs_barrier([1], [2])
    tracker.touch([1], [2], sync.TRANSFER, sync.TRANSFER_WRITE)      # what a replay's after_work does
    assert tracker.needs_barrier([2], []) and tracker.needs_barrier([], [1])
    assert not tracker.needs_barrier([3], [4])
    assert tracker.written_keys() == {2} and tracker.read_keys() == {1}
    tracker.after_barrier()                                            # the exit barrier
    assert not tracker.needs_barrier([2], [1]) and (tracker.stages, tracker.access) == (0, 0)
    assert made == []
    tracker.touch([5], [6])
    tracker.pointer                                                    # a walk needs it now
    assert len(made) == 1 and tracker.written_keys() == {6} and tracker.needs_barrier([6], [])
