"""The VkPipelineCache, persisted per physical device.

File: ``<cache root>/pipelines/<vendor>-<device>-<uuid>.bin`` holding our
header followed by the driver's own cache data (vkGetPipelineCacheData).

Nothing from the file reaches the driver before both headers check out:
ours (magic, format and library version, vendor/device IDs, driver version,
pipelineCacheUUID, data size, SHA-256 of the data) and the driver's
VkPipelineCacheHeaderVersionOne. Drivers are supposed to reject foreign
data themselves, but some crash on it, and a truncated or bit-flipped file
would otherwise be trusted. A bad file is logged, ignored and replaced on
the next save; an unwritable cache directory costs a warning, nothing more.
Only a regular file of at most :data:`MAX_FILE_BYTES` is read at all (see
:func:`.paths.read_cache_file`): a named pipe, a device or a larger file at
the cache path is reported the same way, never opened blocking or read whole.

Writes go through a unique temp file + rename, so a reader (or a second
process writing at the same moment) only ever sees a complete file. Before
saving, a cache we own also merges whatever another process saved in the
meantime, so concurrent processes add up instead of erasing each other
(the last rename still wins any race that is that close).

Thread-safety: :meth:`ContextPipelineCache.save` may be called from any
thread (a lock serialises saves); the VkPipelineCache itself is internally
synchronised by the driver, so pipelines may be created while it saves.
"""
from __future__ import annotations

import hashlib
import struct
import threading
from dataclasses import dataclass
from pathlib import Path

import vulkan as vk
from vulkan import ffi

from ..errors import GuestComputeError, check
from ..log import log
from ..version import __version__
from ..vk.structs import new
from ..paths import CacheFileRefused, atomic_write, cache_root, read_cache_file

MAGIC = b"GCPIPEC\x00"
FORMAT_VERSION = 1
# magic, format version, header size, library version, vendorID, deviceID,
# driverVersion, pipelineCacheUUID, data size, SHA-256 of the data
HEADER = struct.Struct("<8sHH16sIII16sQ32s")
# VkPipelineCacheHeaderVersionOne: headerSize, headerVersion, vendorID, deviceID, UUID
DRIVER_HEADER = struct.Struct("<IIII16s")
# The largest file read back. Drivers' caches for every built-in kernel stay
# far below it; a larger file (or one that never ends, like a link to
# /dev/zero) is ignored with a warning instead of exhausting memory.
MAX_FILE_BYTES = 256 << 20


class RejectedFile(GuestComputeError):
    """A pipeline cache file failed a check; ``str(e)`` is the reason."""


def library_version() -> str:
    return __version__


@dataclass(frozen=True)
class DeviceIdentity:
    """What a driver's pipeline cache data is only valid for."""
    vendor_id: int
    device_id: int
    driver_version: int
    uuid: bytes

    @classmethod
    def from_limits(cls, limits) -> "DeviceIdentity":
        return cls(limits.vendor_id, limits.device_id, limits.driver_version,
                   bytes(limits.pipeline_cache_uuid))

    def file_name(self) -> str:
        return f"{self.vendor_id:04x}-{self.device_id:04x}-{self.uuid.hex()}.bin"


def pack(data: bytes, ident: DeviceIdentity, version: str = None) -> bytes:
    """Our header + ``data`` (the driver's cache blob)."""
    version = (version if version is not None else library_version()).encode()[:16]
    head = HEADER.pack(MAGIC, FORMAT_VERSION, HEADER.size, version, ident.vendor_id,
                       ident.device_id, ident.driver_version, ident.uuid, len(data),
                       hashlib.sha256(data).digest())
    return head + data


def read_header(blob: bytes) -> dict:
    """Our header fields, without judging them (``guestcompute cache stats``)."""
    if len(blob) < HEADER.size:
        raise RejectedFile(f"truncated: {len(blob)} bytes is shorter than the {HEADER.size}-byte header")
    (magic, fmt, hsize, version, vendor, device, driver, uuid, size,
     digest) = HEADER.unpack_from(blob)
    if magic != MAGIC:
        raise RejectedFile("not a guestcompute pipeline cache file (bad magic)")
    return dict(format_version=fmt, header_size=hsize,
                library_version=version.rstrip(b"\0").decode(errors="replace"),
                vendor_id=vendor, device_id=device, driver_version=driver, uuid=uuid,
                data_size=size, sha256=digest)


def unpack(blob: bytes, ident: DeviceIdentity, version: str = None) -> bytes:
    """The driver data inside ``blob`` once every check passed; otherwise
    :class:`RejectedFile` saying why."""
    h = read_header(blob)
    if h["format_version"] != FORMAT_VERSION or h["header_size"] != HEADER.size:
        raise RejectedFile(f"file format {h['format_version']} (header {h['header_size']} bytes); "
                           f"this guestcompute reads format {FORMAT_VERSION}")
    version = version if version is not None else library_version()
    if h["library_version"] != version[:16]:
        raise RejectedFile(f"written by guestcompute {h['library_version']}, this is {version}")
    theirs = DeviceIdentity(h["vendor_id"], h["device_id"], h["driver_version"], h["uuid"])
    if theirs != ident:
        raise RejectedFile(f"written for another device or driver ({_describe(theirs)}; "
                           f"this is {_describe(ident)})")
    data = blob[HEADER.size:]
    if len(data) != h["data_size"]:
        raise RejectedFile(f"size mismatch: header says {h['data_size']} bytes of data, "
                           f"file holds {len(data)} (truncated or appended to)")
    if hashlib.sha256(data).digest() != h["sha256"]:
        raise RejectedFile("checksum mismatch (the data is corrupt)")
    check_driver_header(data, ident)
    return data


def describe(blob: bytes) -> dict:
    """Everything checkable without a device, for ``guestcompute cache
    stats``: header fields plus ``problem`` (None when intact)."""
    try:
        h = read_header(blob)
    except RejectedFile as e:
        return {"problem": str(e)}
    data = blob[HEADER.size:]
    out = {k: v for k, v in h.items() if k not in ("uuid", "sha256", "header_size")}
    out["uuid"] = h["uuid"].hex()
    out["problem"] = None
    if h["format_version"] != FORMAT_VERSION:
        out["problem"] = f"file format {h['format_version']}"
    elif len(data) != h["data_size"]:
        out["problem"] = f"size mismatch ({len(data)} of {h['data_size']} bytes)"
    elif hashlib.sha256(data).digest() != h["sha256"]:
        out["problem"] = "checksum mismatch"
    return out


def check_driver_header(data: bytes, ident: DeviceIdentity) -> None:
    """The VkPipelineCacheHeaderVersionOne at the start of the driver data
    must describe this very device too."""
    if len(data) < DRIVER_HEADER.size:
        raise RejectedFile(f"driver data of {len(data)} bytes has no complete VkPipelineCache header")
    hsize, hversion, vendor, device, uuid = DRIVER_HEADER.unpack_from(data)
    if hversion != vk.VK_PIPELINE_CACHE_HEADER_VERSION_ONE:
        raise RejectedFile(f"driver header version {hversion} is unknown")
    if hsize < DRIVER_HEADER.size or hsize > len(data):
        raise RejectedFile(f"driver header size {hsize} is invalid")
    if (vendor, device, uuid) != (ident.vendor_id, ident.device_id, ident.uuid):
        raise RejectedFile("the driver header belongs to another device")


def _describe(ident: DeviceIdentity) -> str:
    return (f"vendor 0x{ident.vendor_id:04x} device 0x{ident.device_id:04x} "
            f"driver {ident.driver_version} uuid {ident.uuid.hex()}")


def pipelines_dir(cache_dir=None) -> Path:
    return cache_root(cache_dir) / "pipelines"


# -- Vulkan side ----------------------------------------------------------------

def create_vk_cache(device, fns, data: bytes = None):
    """A new VkPipelineCache, seeded with ``data`` when given."""
    blob = ffi.new("char[]", data) if data else ffi.NULL   # alive until the call returns
    info = new("VkPipelineCacheCreateInfo", initialDataSize=len(data) if data else 0,
               pInitialData=blob)
    out = ffi.new("VkPipelineCache *")
    check("vkCreatePipelineCache", fns.vkCreatePipelineCache(device, info, ffi.NULL, out))
    return out[0]


def vk_cache_data(device, fns, handle) -> bytes:
    """vkGetPipelineCacheData, retried while pipelines created meanwhile grow it."""
    size = ffi.new("size_t *")
    for _ in range(8):
        check("vkGetPipelineCacheData", fns.vkGetPipelineCacheData(device, handle, size, ffi.NULL))
        buf = ffi.new("char[]", max(size[0], 1))
        res = fns.vkGetPipelineCacheData(device, handle, size, buf)
        if res == vk.VK_SUCCESS:
            return bytes(ffi.buffer(buf, size[0]))
        if res != vk.VK_INCOMPLETE:
            check("vkGetPipelineCacheData", res)
    raise RejectedFile("the pipeline cache kept growing while it was read")


class ContextPipelineCache:
    """The VkPipelineCache one context creates pipelines with.

    Either guestcompute's own (seeded from the file, persisted) or the
    host's (used as is, persisted only with ``persist=True``). ``persist``
    None means: persist exactly when the cache is our own.
    """

    def __init__(self, device, fns, limits, cache_dir=None, host_cache=None, persist=None):
        self.device = device
        self.fns = fns
        self.owned = host_cache is None
        self.persist = self.owned if persist is None else bool(persist)
        self.ident = DeviceIdentity.from_limits(limits)
        self.path = pipelines_dir(cache_dir) / self.ident.file_name() if self.persist else None
        self._lock = threading.Lock()
        self._file_digest = None     # SHA-256 of the driver data the file is known to hold
        self._warned_write = False
        self.stats = {"pipeline_cache_owner": "guestcompute" if self.owned else "host",
                      "pipeline_cache_persisted": self.persist,
                      "pipeline_cache_file": str(self.path) if self.path else None,
                      "pipeline_cache_loaded": False, "pipeline_cache_bytes_loaded": 0,
                      "pipeline_cache_rejected": None, "pipeline_cache_saved": 0,
                      "pipeline_cache_bytes_saved": 0, "pipeline_cache_save_error": None}
        if not self.owned:
            self.handle = host_cache
            return
        data = self._load() if self.persist else None
        self.handle = None
        if data is not None:
            try:
                self.handle = create_vk_cache(device, fns, data)
                self.stats["pipeline_cache_loaded"] = True
                self.stats["pipeline_cache_bytes_loaded"] = len(data)
                self._file_digest = hashlib.sha256(data).digest()
            except GuestComputeError as e:
                self._reject(f"the driver refused the data ({e})")
        if self.handle is None:
            self.handle = create_vk_cache(device, fns)

    # -- file --------------------------------------------------------------------
    def _read(self, report: bool = True):
        try:
            return read_cache_file(self.path, MAX_FILE_BYTES)
        except (FileNotFoundError, NotADirectoryError):
            return None        # a cold start (or a cache dir that cannot exist): nothing to say
        except CacheFileRefused as e:
            if report:
                self._reject(str(e))
            return None
        except OSError as e:
            if report:
                self._reject(f"unreadable ({e})")
            return None

    def _load(self):
        blob = self._read()
        if blob is None:
            return None
        try:
            return unpack(blob, self.ident)
        except RejectedFile as e:
            self._reject(str(e))
            return None

    def _reject(self, reason: str):
        self.stats["pipeline_cache_rejected"] = reason
        log.warning("guestcompute: ignoring pipeline cache file %s: %s; it will be replaced",
                    self.path, reason)

    def _merge_newer_file(self):
        """Fold in what another process saved since we last read or wrote the file."""
        blob = self._read(report=False)    # a bad file was reported at load; it is replaced now
        if blob is None:
            return
        try:
            data = unpack(blob, self.ident)
        except RejectedFile:
            return             # already reported at load, or about to be overwritten
        if hashlib.sha256(data).digest() == self._file_digest:
            return
        other = create_vk_cache(self.device, self.fns, data)
        try:
            src = ffi.new("VkPipelineCache[1]", [other])
            check("vkMergePipelineCaches", self.fns.vkMergePipelineCaches(self.device, self.handle, 1, src))
        finally:
            self.fns.vkDestroyPipelineCache(self.device, other, ffi.NULL)

    def save(self) -> bool:
        """Write the cache to its file if it holds anything new. True when a
        file was written. Never raises: persistence is an optimisation."""
        if not self.persist or self.handle is None:
            return False
        with self._lock:
            try:
                if self.owned:
                    self._merge_newer_file()
                data = vk_cache_data(self.device, self.fns, self.handle)
                digest = hashlib.sha256(data).digest()
                if len(data) < DRIVER_HEADER.size or digest == self._file_digest:
                    return False
                atomic_write(self.path, pack(data, self.ident))
            except OSError as e:
                self.stats["pipeline_cache_save_error"] = str(e)
                if not self._warned_write:
                    self._warned_write = True
                    log.warning("guestcompute: cannot write the pipeline cache %s (%s); pipelines "
                                "will be compiled again by the next process", self.path, e)
                return False
            except GuestComputeError as e:
                self.stats["pipeline_cache_save_error"] = str(e)
                log.warning("guestcompute: could not save the pipeline cache: %s", e)
                return False
            self._file_digest = digest
            self.stats["pipeline_cache_saved"] += 1
            self.stats["pipeline_cache_bytes_saved"] = len(data)
            return True

    def destroy(self) -> None:
        """Destroy the VkPipelineCache if guestcompute created it."""
        if self.owned and self.handle is not None:
            self.fns.vkDestroyPipelineCache(self.device, self.handle, ffi.NULL)
        self.handle = None
