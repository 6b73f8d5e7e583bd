"""The persisted VkPipelineCache: file format checks, cold/warm processes,
bad files, concurrent writers, read-only cache directories, host caches,
and warm-up."""
import json
import logging
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from vulkan import ffi

from guestcompute.device import pipeline_store as ps
from guestcompute.errors import InvalidArgumentError, UnsupportedError
from guestcompute.ops.base import registered_ops
from guestcompute.vk.structs import new

# A host process in a box: adopt, run one add under validation, close, and
# report what the pipeline cache did.
CHILD = r"""
import json, logging, sys
import numpy as np
from guestcompute.testing import HeadlessHost

warnings = []
class Collect(logging.Handler):
    def emit(self, record):
        warnings.append(record.getMessage())
logging.getLogger("guestcompute").addHandler(Collect())

mode = sys.argv[1]
host = HeadlessHost("modern")
ctx = host.adopt()
a = np.arange(1000, dtype=np.float32)
ta, tb = ctx.tensor(a), ctx.tensor(a + 1)
out = host.run(ctx, lambda rec: rec.mul(ta, tb) if mode == "mul" else rec.add(ta, tb))
ok = bool(np.array_equal(out.numpy(), a * (a + 1) if mode == "mul" else a + a + 1))
if mode == "saveloop":
    # Force a real write each time: several processes renaming onto one file.
    for _ in range(int(sys.argv[2])):
        ctx.device.pipeline_cache._file_digest = None
        ctx.device.pipeline_cache.save()
ctx.close()
stats = ctx.cache_stats()
result = {"ok": ok, "warnings": warnings, "validation": list(host.messages),
          "stats": {k: v for k, v in stats.items() if k.startswith("pipeline")}}
host.close()
print(json.dumps(result))
"""


def _child_env(cache_dir):
    env = dict(os.environ)
    env["GUESTCOMPUTE_CACHE_DIR"] = str(cache_dir)
    return env


def _start(cache_dir, *args):
    return subprocess.Popen([sys.executable, "-c", CHILD, *args], env=_child_env(cache_dir),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc) -> dict:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["ok"], "wrong results"
    assert not result["validation"], result["validation"]
    return result


def _run_child(cache_dir, *args) -> dict:
    return _finish(_start(cache_dir, *args))


def _cache_file(cache_dir):
    files = list((cache_dir / "pipelines").glob("*.bin"))
    assert len(files) == 1, files
    return files[0]


def _add_and_check(host, ctx):
    a = np.linspace(-3, 3, 777, dtype=np.float32)
    ta, tb = ctx.tensor(a), ctx.tensor(a * 2)
    out = host.run(ctx, lambda rec: rec.add(ta, tb))
    np.testing.assert_allclose(out.numpy(), a * 3, rtol=1e-6)


def _ident(ctx):
    return ps.DeviceIdentity.from_limits(ctx.limits)


# -- the file format on its own ---------------------------------------------------

IDENT = ps.DeviceIdentity(0x10de, 0x2335, 0x1234567, bytes(range(16)))


def _driver_blob(ident, payload=b"driver bytes" * 10, uuid=None, version=1):
    head = ps.DRIVER_HEADER.pack(32, version, ident.vendor_id, ident.device_id, uuid or ident.uuid)
    return head + payload


def test_pack_roundtrip():
    data = _driver_blob(IDENT)
    blob = ps.pack(data, IDENT)
    assert ps.unpack(blob, IDENT) == data
    assert ps.describe(blob)["problem"] is None
    assert ps.describe(blob)["library_version"] == ps.library_version()


@pytest.mark.parametrize("change, reason", [
    (lambda b: b[:40], "truncated"),
    (lambda b: b[:-1], "size mismatch"),
    (lambda b: b + b"x", "size mismatch"),
    (lambda b: b[:-3] + bytes([b[-3] ^ 0x10]) + b[-2:], "checksum"),
    (lambda b: b"NOTOURS!" + b[8:], "bad magic"),
    (lambda b: b"", "truncated"),
])
def test_unpack_rejects_damage(change, reason):
    blob = ps.pack(_driver_blob(IDENT), IDENT)
    with pytest.raises(ps.RejectedFile, match=reason):
        ps.unpack(change(blob), IDENT)


@pytest.mark.parametrize("field", ["vendor_id", "device_id", "driver_version", "uuid"])
def test_unpack_rejects_foreign_device(field):
    other = dict(vars(IDENT))
    other[field] = b"\xff" * 16 if field == "uuid" else other[field] + 1
    foreign = ps.DeviceIdentity(**other)
    with pytest.raises(ps.RejectedFile, match="another device or driver"):
        ps.unpack(ps.pack(_driver_blob(foreign), foreign), IDENT)


def test_unpack_rejects_other_versions():
    data = _driver_blob(IDENT)
    with pytest.raises(ps.RejectedFile, match="written by guestcompute 0.0.1"):
        ps.unpack(ps.pack(data, IDENT, version="0.0.1"), IDENT)
    blob = bytearray(ps.pack(data, IDENT))
    blob[8:10] = (ps.FORMAT_VERSION + 1).to_bytes(2, "little")
    with pytest.raises(ps.RejectedFile, match="file format"):
        ps.unpack(bytes(blob), IDENT)


def test_unpack_checks_the_driver_header_too():
    # Our header is intact and matches, but the driver's own header inside
    # the data names another device: still never handed to the driver.
    bad_uuid = ps.pack(_driver_blob(IDENT, uuid=b"\x01" * 16), IDENT)
    with pytest.raises(ps.RejectedFile, match="driver header belongs to another device"):
        ps.unpack(bad_uuid, IDENT)
    with pytest.raises(ps.RejectedFile, match="driver header version"):
        ps.unpack(ps.pack(_driver_blob(IDENT, version=7), IDENT), IDENT)
    with pytest.raises(ps.RejectedFile, match="no complete VkPipelineCache header"):
        ps.unpack(ps.pack(b"short", IDENT), IDENT)


def test_file_name_is_per_device():
    assert IDENT.file_name() == "10de-2335-000102030405060708090a0b0c0d0e0f.bin"


# -- contexts ---------------------------------------------------------------------

def test_close_saves_and_next_context_loads(host, tmp_path):
    ctx = host.adopt(cache_dir=tmp_path)
    assert ctx.cache_stats()["pipeline_cache_loaded"] is False
    _add_and_check(host, ctx)
    ctx.close()
    path = _cache_file(tmp_path)
    assert path.name == _ident(ctx).file_name()
    assert ps.unpack(path.read_bytes(), _ident(ctx))
    assert ctx.cache_stats()["pipeline_cache_saved"] == 1

    again = host.adopt(cache_dir=tmp_path)
    try:
        stats = again.cache_stats()
        assert stats["pipeline_cache_loaded"] is True
        assert stats["pipeline_cache_bytes_loaded"] == len(path.read_bytes()) - ps.HEADER.size
        assert stats["pipeline_cache_rejected"] is None
        _add_and_check(host, again)
    finally:
        again.close()


def test_cold_then_warm_process(tmp_path):
    cold = _run_child(tmp_path, "add")
    assert cold["warnings"] == []
    assert cold["stats"]["pipeline_cache_loaded"] is False
    assert cold["stats"]["pipeline_cache_saved"] == 1
    assert cold["stats"]["pipelines_created"] >= 1
    assert _cache_file(tmp_path).stat().st_size > ps.HEADER.size

    warm = _run_child(tmp_path, "add")
    assert warm["warnings"] == []
    assert warm["stats"]["pipeline_cache_loaded"] is True          # found and validated
    assert warm["stats"]["pipeline_cache_bytes_loaded"] > 0
    assert warm["stats"]["pipeline_cache_rejected"] is None
    assert warm["stats"]["pipelines_created"] >= 1                   # still counted, now from the cache


def _valid_file(host, tmp_path):
    ctx = host.adopt(cache_dir=tmp_path)
    _add_and_check(host, ctx)
    ctx.close()
    return _cache_file(tmp_path).read_bytes(), _ident(ctx)


def _flip(blob, at):
    return blob[:at] + bytes([blob[at] ^ 0x01]) + blob[at + 1:]


BAD_FILES = {
    "truncated-header": lambda b, ident: b[:ps.HEADER.size // 2],
    "truncated-data": lambda b, ident: b[:-4],
    "empty": lambda b, ident: b"",
    "bit-flip-data": lambda b, ident: _flip(b, len(b) - 1),
    "bit-flip-header": lambda b, ident: _flip(b, 30),     # inside the library version / IDs
    "foreign-device": lambda b, ident: ps.pack(
        b[ps.HEADER.size:], ps.DeviceIdentity(ident.vendor_id ^ 1, ident.device_id, ident.driver_version,
                                              ident.uuid)),
    "other-driver-version": lambda b, ident: ps.pack(
        b[ps.HEADER.size:], ps.DeviceIdentity(ident.vendor_id, ident.device_id, ident.driver_version + 1,
                                              ident.uuid)),
    "foreign-driver-header": lambda b, ident: ps.pack(
        _driver_blob(ident, uuid=bytes(16 - i for i in range(16))), ident),
    "garbage": lambda b, ident: os.urandom(4096),
}


@pytest.mark.parametrize("damage", sorted(BAD_FILES))
def test_bad_file_is_ignored_with_warning_and_replaced(modern_host, tmp_path, caplog, damage):
    blob, ident = _valid_file(modern_host, tmp_path)
    path = _cache_file(tmp_path)
    path.write_bytes(BAD_FILES[damage](blob, ident))
    caplog.set_level(logging.WARNING, logger="guestcompute")

    ctx = modern_host.adopt(cache_dir=tmp_path)
    try:
        stats = ctx.cache_stats()
        assert stats["pipeline_cache_loaded"] is False
        assert stats["pipeline_cache_rejected"]
        assert any("ignoring pipeline cache file" in r.getMessage() for r in caplog.records)
        _add_and_check(modern_host, ctx)
    finally:
        ctx.close()
    # Replaced by a good one on close.
    assert ps.unpack(path.read_bytes(), ident)


def test_host_pipeline_cache_is_used_not_persisted(host, tmp_path):
    handle = ffi.new("VkPipelineCache *")
    info = new("VkPipelineCacheCreateInfo")
    assert host.fns.vkCreatePipelineCache(host.device, info, ffi.NULL, handle) == 0
    try:
        ctx = host.adopt(cache_dir=tmp_path, pipeline_cache=handle[0])
        assert ctx.device.pipelines.vk_cache == handle[0]
        stats = ctx.cache_stats()
        assert stats["pipeline_cache_owner"] == "host" and stats["pipeline_cache_persisted"] is False
        _add_and_check(host, ctx)
        ctx.close()
        assert not (tmp_path / "pipelines").exists()
        # Still the host's: alive after close, and it holds our pipeline.
        size = ffi.new("size_t *")
        assert host.fns.vkGetPipelineCacheData(host.device, handle[0], size, ffi.NULL) == 0

        ctx = host.adopt(cache_dir=tmp_path, pipeline_cache=handle[0], persist_pipeline_cache=True)
        _add_and_check(host, ctx)
        ctx.close()
        assert ps.unpack(_cache_file(tmp_path).read_bytes(), _ident(ctx))
    finally:
        host.fns.vkDestroyPipelineCache(host.device, handle[0], ffi.NULL)


def test_persistence_can_be_switched_off(modern_host, tmp_path):
    ctx = modern_host.adopt(cache_dir=tmp_path, persist_pipeline_cache=False)
    _add_and_check(modern_host, ctx)
    ctx.close()
    assert ctx.cache_stats()["pipeline_cache_owner"] == "guestcompute"
    assert not (tmp_path / "pipelines").exists()


def _root_ignores_permissions(path) -> bool:
    probe = path / "probe"
    try:
        probe.write_bytes(b"")
    except OSError:
        return False
    probe.unlink()
    return True


@pytest.mark.parametrize("how", ["chmod", "under-a-file"])
def test_read_only_cache_dir_works_with_a_warning(modern_host, tmp_path, caplog, how):
    if how == "chmod":
        cache = tmp_path / "ro"
        (cache / "pipelines").mkdir(parents=True)
        (cache / "spirv").mkdir()
        for d in (cache / "pipelines", cache / "spirv", cache):
            d.chmod(0o555)
        if _root_ignores_permissions(cache / "pipelines"):
            for d in (cache, cache / "pipelines", cache / "spirv"):
                d.chmod(0o755)
            pytest.skip("running as root: permission bits do not block writes "
                        "(the 'under-a-file' case covers read-only directories)")
    else:
        # A cache path below a regular file cannot be created, even by root.
        (tmp_path / "plain-file").write_bytes(b"")
        cache = tmp_path / "plain-file" / "cache"
    caplog.set_level(logging.WARNING, logger="guestcompute")
    try:
        ctx = modern_host.adopt(cache_dir=cache)
        _add_and_check(modern_host, ctx)
        ctx.close()
        stats = ctx.cache_stats()
        assert stats["pipeline_cache_saved"] == 0
        assert stats["pipeline_cache_save_error"]
        assert stats["pipeline_cache_rejected"] is None
        assert any("cannot write the pipeline cache" in r.getMessage() for r in caplog.records)
    finally:
        if how == "chmod":
            for d in (cache, cache / "pipelines", cache / "spirv"):
                d.chmod(0o755)


def test_two_processes_writing_at_once(tmp_path):
    """Both race renames onto one file; a reader never sees a torn file,
    and a third process loads the survivor."""
    saves = 25
    procs = [_start(tmp_path, "saveloop", str(saves)) for _ in range(2)]
    seen, problems = 0, []
    while any(p.poll() is None for p in procs):
        for f in (tmp_path / "pipelines").glob("*.bin") if (tmp_path / "pipelines").is_dir() else []:
            try:
                blob = f.read_bytes()
            except FileNotFoundError:
                continue
            seen += 1
            problem = ps.describe(blob)["problem"]
            if problem:
                problems.append(problem)
        time.sleep(0.002)
    results = [_finish(p) for p in procs]
    assert not problems
    for r in results:
        assert r["warnings"] == []
        assert r["stats"]["pipeline_cache_saved"] == saves
    leftovers = [p.name for p in (tmp_path / "pipelines").iterdir()]
    assert leftovers == [_cache_file(tmp_path).name]          # no temp files left behind
    third = _run_child(tmp_path, "mul")
    assert third["stats"]["pipeline_cache_loaded"] is True
    assert third["warnings"] == []
    assert seen > 0


def test_two_cold_processes_at_once(tmp_path):
    procs = [_start(tmp_path, "add"), _start(tmp_path, "mul")]
    for r in [_finish(p) for p in procs]:
        assert r["warnings"] == []
    assert _run_child(tmp_path, "add")["stats"]["pipeline_cache_loaded"] is True


# -- warm-up ----------------------------------------------------------------------

def _specs_of(ctx, op, *args):
    return [d.spec for d in registered_ops()[op](ctx, *args).dispatches]


def test_warmup_creates_ahead_with_progress(host, tmp_path):
    ctx = host.adopt(cache_dir=tmp_path)
    try:
        a = ctx.tensor(np.zeros(777, np.float32))      # the size _add_and_check uses
        specs = _specs_of(ctx, "add", a, a) + _specs_of(ctx, "mul", a, a) + _specs_of(ctx, "fill", a, 2.0)
        calls = []
        report = ctx.warmup(specs, progress=lambda done, total: calls.append((done, total)), threads=2)
        assert report.total == len(set(specs)) and report.created == report.total
        assert report.existing == 0 and report.seconds > 0 and report.threads == 2
        assert report.saved is True
        assert calls[0] == (0, report.total) and calls[-1] == (report.total, report.total)
        assert [d for d, _ in calls] == sorted(d for d, _ in calls)
        assert _cache_file(tmp_path).is_file()

        before = ctx.cache_stats()["pipelines_created"]
        _add_and_check(host, ctx)                   # nothing left to create at "frame 1"
        assert ctx.cache_stats()["pipelines_created"] == before
        again = ctx.warmup(specs)
        assert again.created == 0 and again.existing == again.total
    finally:
        ctx.close()


def test_warmup_accepts_a_program(modern_ctx):
    a = modern_ctx.tensor(np.ones(16, np.float32))

    class Program:              # anything with specs() will do
        def specs(self):
            return _specs_of(modern_ctx, "scale", a, 3.0)
    report = modern_ctx.warmup(Program(), threads=1)
    assert report.total == 1 and report.created + report.existing == 1


def test_warmup_rejects_bad_arguments(bare_host):
    ctx = bare_host.adopt(persist_pipeline_cache=False)
    try:
        with pytest.raises(InvalidArgumentError):
            ctx.warmup("everything")
        with pytest.raises(InvalidArgumentError):
            ctx.warmup([1, 2])
        with pytest.raises(InvalidArgumentError):
            ctx.warmup([], threads=0)
        from guestcompute.ops import all_specs
        f16 = next(s for s in all_specs() if "float16" in s.features)
        with pytest.raises(UnsupportedError):         # a bare 1.0 host enabled no float16
            ctx.warmup([f16])
        assert ctx.cache_stats()["pipelines_created"] == 0
    finally:
        ctx.close()


def test_warmup_by_family_name(bare_host):
    from guestcompute.ops import all_specs
    sizes = {}
    for s in all_specs():
        sizes[s.family] = sizes.get(s.family, 0) + 1
    family = min(sizes, key=sizes.get)
    ctx = bare_host.adopt(persist_pipeline_cache=False)
    try:
        report = ctx.warmup([family], threads=1)
        assert report.total + report.skipped == sizes[family]
        with pytest.raises(InvalidArgumentError, match="no built-in kernel family"):
            ctx.warmup(["no-such-family"])
        with pytest.raises(InvalidArgumentError):
            ctx.warmup([{"not": "a spec"}])
    finally:
        ctx.close()


def test_warmup_all_skips_what_the_host_did_not_enable(bare_host):
    ctx = bare_host.adopt(persist_pipeline_cache=False)
    try:
        report = ctx.warmup("all", threads=2)
        assert report.skipped > 0                    # float16 / uint8 variants
        assert report.created + report.existing == report.total > 0
        assert ctx.cache_stats()["pipelines_created"] == report.created
    finally:
        ctx.close()


def test_concurrent_requests_for_one_pipeline_create_it_once(modern_ctx):
    a = modern_ctx.tensor(np.ones(8, np.float32))
    spec = _specs_of(modern_ctx, "sub", a, a)[0]
    spirv = modern_ctx.device.spirv.get(spec.render(), spec.target_env)
    bindings = tuple((b.reads, b.writes) for b in spec.bindings)
    start = threading.Barrier(6)
    got, errors = [], []

    def worker():
        try:
            start.wait()
            got.append(modern_ctx.device.pipelines.get(spec, spirv, bindings, spec.push_size))
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len({id(p) for p in got}) == 1
    assert modern_ctx.cache_stats()["pipelines_created"] == 1


def test_specialization_constants_make_their_own_pipeline(modern_ctx):
    """One spec with other specialization constants is another pipeline;
    the same constants again are the same one (the spec-keyed fast path
    used to return the first for all)."""
    a = modern_ctx.tensor(np.ones(8, np.float32))
    spec = _specs_of(modern_ctx, "sub", a, a)[0]
    pipelines = modern_ctx.device.pipelines
    plain = pipelines.resolve(spec)
    special = pipelines.resolve(spec, None, ((7, 3),))
    assert special is not plain
    assert pipelines.resolve(spec, None, ((7, 3),)) is special
    assert pipelines.resolve(spec, None, ((7, 4),)) not in (plain, special)
    assert pipelines.resolve(spec) is plain
    assert pipelines.lookup(spec, ((7, 3),)) is special and pipelines.lookup(spec) is plain
