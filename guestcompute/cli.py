"""The ``guestcompute`` command: info, doctor, bake, cache stats|clear, bench.

Every command prints text for people, or one JSON document with ``--json``.
Exit status: 0 fine, 1 a failure (doctor found a problem, bake failed or is
stale with ``--check``), 2 a usage problem or something missing (bench
without the benchmark suite).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_DEVICE_TYPES = {0: "other", 1: "integrated GPU", 2: "discrete GPU", 3: "virtual GPU", 4: "CPU"}


# -- helpers -------------------------------------------------------------------

def _dir_usage(path: Path, pattern: str) -> dict:
    files = sorted(path.glob(pattern)) if path.is_dir() else []
    return {"path": str(path), "files": len(files), "bytes": sum(f.stat().st_size for f in files)}


def _human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _emit(args, data: dict, text: str) -> None:
    if args.json:
        print(json.dumps(data, indent=2, default=str))
    else:
        print(text)


def _cache_locations(cache_dir=None) -> dict:
    from .paths import cache_root
    from .spirv.baked_files import BAKED_DIR, SUFFIX
    from .bake import read_index
    root = cache_root(cache_dir)
    baked = _dir_usage(BAKED_DIR, f"*{SUFFIX}")
    baked["index_kernels"] = len(read_index().get("kernels", {}))
    return {"root": str(root), "spirv": _dir_usage(root / "spirv", "*.spv"),
            "pipelines": _dir_usage(root / "pipelines", "*.bin"), "baked": baked}


def _cache_text(c: dict) -> list:
    lines = [f"  cache root       {c['root']}"]
    for name in ("spirv", "pipelines", "baked"):
        d = c[name]
        files = f"{d['files']} file" + ("" if d["files"] == 1 else "s")
        lines.append(f"  {name:<16} {d['path']}  ({files}, {_human_bytes(d['bytes'])})")
    return lines


# -- info ------------------------------------------------------------------------

def _device_record(index: int, pd) -> dict:
    from vulkan import ffi, lib

    from .host.declarations import version_tuple
    from .vk.structs import new
    props = new("VkPhysicalDeviceProperties")
    lib.vkGetPhysicalDeviceProperties(pd, props)
    return {"index": index, "name": ffi.string(props.deviceName).decode(),
            "type": _DEVICE_TYPES.get(props.deviceType, str(props.deviceType)),
            "api_version": "%d.%d" % version_tuple(props.apiVersion),
            "driver_version": props.driverVersion, "vendor_id": f"0x{props.vendorID:04x}",
            "device_id": f"0x{props.deviceID:04x}",
            "pipeline_cache_uuid": bytes(ffi.buffer(props.pipelineCacheUUID, 16)).hex()}


def _memory_record(pd, instance_api) -> dict:
    """The chosen device's memory heaps, with the process's budget and usage
    where VK_EXT_memory_budget is supported (and Vulkan 1.1 to ask)."""
    from vulkan import lib

    from .host.requirements import supported_extensions
    from .vk.memory import heap_budgets
    from .vk.structs import new
    props = new("VkPhysicalDeviceMemoryProperties")
    lib.vkGetPhysicalDeviceMemoryProperties(pd, props)
    dev = new("VkPhysicalDeviceProperties")
    lib.vkGetPhysicalDeviceProperties(pd, dev)
    heaps = [{"index": i, "size": props.memoryHeaps[i].size,
              "device_local": bool(props.memoryHeaps[i].flags & 1)} for i in range(props.memoryHeapCount)]
    if instance_api >= (1, 1) and "VK_EXT_memory_budget" in supported_extensions(pd):
        for heap, (budget, usage) in zip(heaps, heap_budgets(pd, len(heaps))):
            heap["budget"], heap["usage"] = budget, usage
    return {"max_allocations": dev.limits.maxMemoryAllocationCount,
            "max_storage_buffer_range": dev.limits.maxStorageBufferRange, "heaps": heaps}


def _heap_text(heap: dict) -> str:
    kind = "device-local" if heap["device_local"] else "host"
    text = f"  heap {heap['index']}: {_human_bytes(heap['size'])} {kind}"
    if "budget" in heap:
        text += f", budget {_human_bytes(heap['budget'])}, in use {_human_bytes(heap['usage'])}"
    return text


def _memory_text(mem: dict) -> list:
    budget = "" if any("budget" in h for h in mem["heaps"]) else " (no VK_EXT_memory_budget: sizes only)"
    return ([f"memory{budget}:"] + [_heap_text(h) for h in mem["heaps"]]
            + [f"  at most {mem['max_allocations']} allocations (maxMemoryAllocationCount); one binding "
               f"reaches {_human_bytes(mem['max_storage_buffer_range'])} (maxStorageBufferRange)"])


def cmd_info(args) -> int:
    from vulkan import ffi, lib

    from . import __version__
    from .host.requirements import requirements
    from .vk import bootstrap
    data = {"version": __version__, "loader_api_version": "%d.%d" % bootstrap.instance_api_version(),
            "glslc": shutil.which("glslc"), "caches": _cache_locations(args.cache_dir)}
    instance, _, inst_api = bootstrap.create_instance((1, 3), validation=False,
                                                      app_name="guestcompute-info")
    try:
        devices = bootstrap.physical_devices(instance)
        data["devices"] = [_device_record(i, pd) for i, pd in enumerate(devices)]
        chosen = bootstrap.pick_physical_device(instance) if devices else None
        data["chosen"] = next((i for i, pd in enumerate(devices) if pd == chosen), None)
        if chosen is not None:
            req = requirements(chosen, inst_api)
            asked = requirements(chosen, inst_api, bfloat16=True)     # what the opt-in adds here
            data["would_use"] = {"api_version": "%d.%d" % req.api_version,
                                 "device_extensions": list(req.device_extensions),
                                 "features": list(req.features),
                                 "opt_in": [e for e in asked.device_extensions if e not in req.device_extensions]}
            data["memory"] = _memory_record(chosen, inst_api)
    finally:
        lib.vkDestroyInstance(instance, ffi.NULL)
    lines = [f"guestcompute {data['version']}  (Vulkan loader {data['loader_api_version']})", "devices:"]
    for d in data["devices"]:
        mark = "*" if d["index"] == data["chosen"] else " "
        lines.append(f" {mark}[{d['index']}] {d['name']}  ({d['type']}, Vulkan {d['api_version']}, "
                     f"vendor {d['vendor_id']} device {d['device_id']}, driver {d['driver_version']})")
    if not data["devices"]:
        lines.append("   none (install a Vulkan driver, e.g. mesa-vulkan-drivers)")
    if "would_use" in data:
        w = data["would_use"]
        lines += ["would use (* chosen; GUESTCOMPUTE_DEVICE picks another):",
                  f"  Vulkan {w['api_version']}",
                  f"  extensions: {', '.join(w['device_extensions']) or 'none'}",
                  f"  features:   {', '.join(w['features']) or 'none'}"]
        if w["opt_in"]:
            lines.append(f"  opt-in:     {', '.join(w['opt_in'])} (gc.requirements(..., bfloat16=True): "
                         "bfloat16 networks on the tensor cores)")
    if "memory" in data:
        lines += _memory_text(data["memory"])
    lines += ["caches:"] + _cache_text(data["caches"])
    native = data["command_interpreter"] = _native_record()
    lines.append("command interpreter: " + (f"C, {native['path']}" if native["built"] else
                                            "Python walker (run `guestcompute build-native` with a C compiler)")
                 + ("" if native["mode"] == "auto" else f"  ({native['mode']} by GUESTCOMPUTE_NATIVE)"))
    lines.append(f"glslc: {data['glslc'] or 'not installed (only needed for user GLSL)'}")
    _emit(args, data, "\n".join(lines))
    return 0


# -- doctor ------------------------------------------------------------------------

def _check(name, status, detail, fix=None) -> dict:
    return {"name": name, "status": status, "detail": detail, "fix": fix if status != "ok" else None}


def _doctor_checks(cache_dir=None) -> list:
    checks = []
    try:
        from .vk import bootstrap
        api = bootstrap.instance_api_version()
        checks.append(_check("loader", "ok", "Vulkan loader %d.%d" % api))
    except Exception as e:   # noqa: BLE001  (report whatever the loader does)
        return [_check("loader", "fail", str(e), "install the Vulkan loader (Debian/Ubuntu: apt-get "
                       "install libvulkan1)")]
    devices = []
    try:
        from vulkan import ffi, lib
        instance, _, _ = bootstrap.create_instance((1, 3), validation=False,
                                                   app_name="guestcompute-doctor")
        try:
            devices = [_device_record(i, pd)["name"]
                       for i, pd in enumerate(bootstrap.physical_devices(instance))]
        finally:
            lib.vkDestroyInstance(instance, ffi.NULL)
    except Exception as e:   # noqa: BLE001
        checks.append(_check("driver (ICD)", "fail", f"cannot create a Vulkan instance: {e}",
                             "install a Vulkan driver (apt-get install mesa-vulkan-drivers for the "
                             "CPU driver lavapipe, or your GPU vendor's); check VK_ICD_FILENAMES"))
    else:
        if devices:
            checks.append(_check("driver (ICD)", "ok", "devices: " + "; ".join(devices)))
        else:
            checks.append(_check("driver (ICD)", "fail", "the loader found no Vulkan device",
                                 "install a Vulkan driver (apt-get install mesa-vulkan-drivers for "
                                 "lavapipe, or your GPU vendor's); check VK_ICD_FILENAMES"))
    if bootstrap.VALIDATION_LAYER in bootstrap.available_layers():
        checks.append(_check("validation layer", "ok", bootstrap.VALIDATION_LAYER))
    else:
        checks.append(_check("validation layer", "warn", f"{bootstrap.VALIDATION_LAYER} is not installed "
                             "(only tests and debugging need it)",
                             "apt-get install vulkan-validationlayers"))
    glslc = shutil.which("glslc")
    if glslc:
        from .bake import glslc_version
        checks.append(_check("glslc", "ok", f"{glslc} ({glslc_version()})"))
    else:
        checks.append(_check("glslc", "warn", "not installed: built-in kernels need none, user GLSL "
                             "kernels cannot compile", "apt-get install glslc"))
    checks.append(_baked_check(glslc))
    checks.append(_native_check())
    checks.append(cache_dir_check(cache_dir))
    if devices:
        checks.append(_compute_check(cache_dir))
    return checks


def _native_check() -> dict:
    native = _native_record()
    if native["built"]:
        return _check("command interpreter", "ok", f"C, {native['path']}")
    return _check("command interpreter", "warn", ("does not load" if native["error"] else "not built")
                  + ": recording uses the Python walker (same "
                  "commands, more host time per op)",
                  "run `guestcompute build-native` (needs a C compiler: apt-get install gcc libc6-dev)")


def _baked_check(glslc) -> dict:
    from .bake import stale
    try:
        s = stale()
    except Exception as e:   # noqa: BLE001  (a broken kernel module is worth reporting, not a crash)
        return _check("built-in kernels", "fail", f"cannot enumerate the kernel catalogue: {e}",
                      "reinstall guestcompute")
    if not s["missing"]:
        return _check("built-in kernels", "ok", "every built-in kernel ships precompiled")
    detail = f"{len(s['missing'])} built-in kernel variants have no precompiled SPIR-V"
    if glslc:
        return _check("built-in kernels", "warn", detail + "; glslc compiles them on first use",
                      "run `guestcompute bake` in the source checkout, or reinstall the package")
    return _check("built-in kernels", "fail", detail + " and glslc is missing",
                  "run `guestcompute bake` where glslc is installed, or apt-get install glslc")


def cache_dir_check(cache_dir) -> dict:
    from .paths import cache_root
    root = cache_root(cache_dir)
    fix = ("make the directory writable, or point GUESTCOMPUTE_CACHE_DIR at a writable one; "
           "without it each process compiles its pipelines again")
    try:
        for sub in ("spirv", "pipelines"):
            (root / sub).mkdir(parents=True, exist_ok=True)
            # Really write: permission bits say nothing when running as root.
            with tempfile.NamedTemporaryFile(dir=root / sub, prefix=".doctor-"):
                pass
    except OSError as e:
        return _check("cache directory", "warn", f"{root} is not writable ({e})", fix)
    return _check("cache directory", "ok", f"{root} is writable")


def _compute_check(cache_dir) -> dict:
    import numpy as np

    from .context import Context
    try:
        with Context.create(cache_dir=cache_dir) as ctx:
            a = np.arange(1000, dtype=np.float32)
            ta, tb = ctx.tensor(a), ctx.tensor(a * 2)
            out = ctx.run(lambda rec: rec.add(ta, tb)).numpy()
            name = ctx.limits.device_name
            memory = ctx.memory_report()
        if not np.array_equal(out, a * 3):
            return _check("compute", "fail", f"a vector add on {name} returned wrong values",
                          "update the Vulkan driver; report the device to guestcompute")
        return _check("compute", "ok", f"vector add on {name} is correct; memory: "
                      + _memory_summary(memory))
    except Exception as e:   # noqa: BLE001
        return _check("compute", "fail", f"a vector add failed: {e}",
                      "see the checks above; GUESTCOMPUTE_DEVICE picks another device")


def _memory_summary(report: dict) -> str:
    """One line of ctx.memory_report(): allocations and per-heap budget."""
    parts = [f"{report['allocations']} of {report['max_allocations']} allocations"]
    for h in report["heaps"]:
        if "budget" in h:
            parts.append(f"heap {h['index']} {_human_bytes(h['usage'])} used of "
                         f"{_human_bytes(h['budget'])} budget")
        else:
            parts.append(f"heap {h['index']} {_human_bytes(h['size'])} (no budget query)")
    return ", ".join(parts)


def cmd_doctor(args) -> int:
    checks = _doctor_checks(args.cache_dir)
    failed = [c for c in checks if c["status"] == "fail"]
    lines = []
    for c in checks:
        lines.append(f"[{c['status'].upper():>4}] {c['name']}: {c['detail']}")
        if c["fix"]:
            lines.append(f"       fix: {c['fix']}")
    lines.append("all good" if not failed else f"{len(failed)} problem(s) found")
    _emit(args, {"ok": not failed, "checks": checks}, "\n".join(lines))
    return 1 if failed else 0


# -- bake ------------------------------------------------------------------------------

def cmd_bake(args) -> int:
    from .errors import GuestComputeError
    from . import bake
    if args.check:
        s = bake.stale(args.out)
        ok = not s["missing"] and not s["unused"]
        text = "the bake is up to date" if ok else (
            f"the bake is stale: {len(s['missing'])} specs without SPIR-V, {len(s['unused'])} unused "
            "files; run `guestcompute bake`")
        _emit(args, {"ok": ok, **s}, text)
        return 0 if ok else 1

    def progress(done, total):
        if not args.json and sys.stderr.isatty():
            print(f"\rcompiling {done}/{total}", end="" if done < total else "\n", file=sys.stderr)
    try:
        report = bake.bake(args.out, jobs=args.jobs, clean=not args.no_clean, force=args.force,
                           progress=progress)
    except GuestComputeError as e:
        print(f"guestcompute bake: {e}", file=sys.stderr)
        return 1
    _emit(args, report.as_dict(),
          f"baked {report.specs} kernel specs ({report.sources} sources) into {report.out_dir}: "
          f"{report.compiled} compiled, {report.kept} kept, {len(report.removed)} removed, "
          f"{report.seconds:.1f} s ({report.compiler})")
    return 0


# -- build-native --------------------------------------------------------------------

def _native_record() -> dict:
    from .errors import UnsupportedError
    from .vk.command_stream import ENV, load, native_library_path
    path, error = native_library_path(), None
    if path is not None:
        try:
            load(path)
        except UnsupportedError as e:    # a broken build: contexts fall back to the Python walker
            error = str(e)
    return {"built": path is not None and error is None, "path": str(path) if path else None,
            "error": error, "mode": os.environ.get(ENV, "auto")}


def cmd_build_native(args) -> int:
    from .vk.native_build import build
    if args.cache_dir:
        os.environ["GUESTCOMPUTE_CACHE_DIR"] = args.cache_dir
    try:
        path = build()
    except RuntimeError as e:
        _emit(args, {"ok": False, "error": str(e)}, f"guestcompute build-native: {e}")
        return 0 if args.optional else 1
    _emit(args, {"ok": True, "path": str(path)}, f"built the command interpreter: {path}")
    return 0


# -- cache -------------------------------------------------------------------------------

def cmd_cache_stats(args) -> int:
    from .paths import read_cache_file
    from .device.pipeline_store import MAX_FILE_BYTES, describe
    data = _cache_locations(args.cache_dir)
    pipes = Path(data["pipelines"]["path"])
    entries = []
    for f in sorted(pipes.glob("*.bin")) if pipes.is_dir() else []:
        try:
            info = describe(read_cache_file(f, MAX_FILE_BYTES))    # never blocks on a FIFO
        except OSError as e:
            info = {"problem": f"unreadable ({e})"}
        entries.append({"file": f.name, "bytes": f.stat().st_size, **info})
    data["pipelines"]["entries"] = entries
    lines = ["caches:"] + _cache_text(data)
    for e in entries:
        state = "ok" if e["problem"] is None else e["problem"]
        who = (f"vendor 0x{e['vendor_id']:04x} device 0x{e['device_id']:04x} driver "
               f"{e['driver_version']}, guestcompute {e['library_version']}") if "vendor_id" in e else ""
        lines.append(f"    {e['file']}: {_human_bytes(e['bytes'])} {who} [{state}]")
    _emit(args, data, "\n".join(lines))
    return 0


def cmd_cache_clear(args) -> int:
    from .paths import cache_root
    root = cache_root(args.cache_dir)
    both = not (args.spirv or args.pipelines)
    # Only our own file patterns: the directory may be shared with other things.
    targets = []
    if both or args.spirv:
        targets.append((root / "spirv", ("*.spv", ".*.tmp")))
    if both or args.pipelines:
        targets.append((root / "pipelines", ("*.bin", ".*.tmp")))
    removed, freed, errors = 0, 0, []
    for folder, patterns in targets:
        for pattern in patterns:
            for f in folder.glob(pattern) if folder.is_dir() else []:
                try:
                    size = f.stat().st_size
                    f.unlink()
                except OSError as e:
                    errors.append(f"{f}: {e}")
                    continue
                removed += 1
                freed += size
    data = {"root": str(root), "removed_files": removed, "freed_bytes": freed, "errors": errors}
    text = f"removed {removed} files ({_human_bytes(freed)}) from {root}"
    if errors:
        text += "\ncould not remove:\n  " + "\n  ".join(errors)
    _emit(args, data, text)
    return 1 if errors else 0


# -- bench -------------------------------------------------------------------------------

def find_benchmark_suite(start=None):
    """The source checkout that holds the benchmark suite (``benchmarks/run.py``),
    searched from ``start`` (default: the working directory) upwards, or None.

    The suite is not part of the installed package: it compares against
    torch and raw Vulkan loops a library user does not need. ``bench`` runs
    it as its own process (``python -m benchmarks.run`` in that checkout),
    so the package never imports from the source tree."""
    here = Path(start or os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "benchmarks" / "run.py").is_file():
            return folder
    return None


def cmd_bench(args) -> int:
    root = find_benchmark_suite()
    if root is None:
        msg = ("the benchmark suite is not available: run `guestcompute bench` inside a source "
               "checkout (it needs benchmarks/run.py)")
        if args.json:
            print(json.dumps({"ok": False, "error": msg}))
        else:
            print(msg, file=sys.stderr)
        return 2
    argv = list(args.bench_args)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if args.json and "--json" not in argv:
        argv.append("--json")
    return subprocess.run([sys.executable, "-m", "benchmarks.run", *argv], cwd=root).returncode


# -- entry point ---------------------------------------------------------------------------

def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number, at least 1")
    return value


def _parser() -> argparse.ArgumentParser:
    # Options accepted before or after the subcommand; SUPPRESS keeps a
    # subcommand's default from overwriting a value given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print one JSON document for machines")
    common.add_argument("--cache-dir", default=argparse.SUPPRESS,
                        help="cache directory (default: GUESTCOMPUTE_CACHE_DIR, else the XDG cache)")
    p = argparse.ArgumentParser(prog="guestcompute", parents=[common],
                                description="GPU compute inside a host renderer's Vulkan device.")
    sub = p.add_subparsers(dest="command", metavar="command")
    s = sub.add_parser("info", parents=[common], help="devices, the chosen one, features, caches")
    s.set_defaults(fn=cmd_info)
    s = sub.add_parser("doctor", parents=[common], help="check the installation, with fix hints")
    s.set_defaults(fn=cmd_doctor)
    s = sub.add_parser("bake", parents=[common], help="precompile every built-in kernel to SPIR-V")
    s.add_argument("--out", help="output directory (default: the package's kernels/baked)")
    s.add_argument("--jobs", type=_at_least_one, default=None, help="parallel glslc processes (default: CPUs)")
    s.add_argument("--force", action="store_true", help="recompile files that already exist")
    s.add_argument("--no-clean", action="store_true", help="keep files no kernel needs any more")
    s.add_argument("--check", action="store_true",
                   help="only report whether the bake is up to date (exit 1 when stale)")
    s.set_defaults(fn=cmd_bake)
    s = sub.add_parser("build-native", parents=[common],
                       help="compile the C command interpreter that records batches of commands")
    s.add_argument("--optional", action="store_true",
                   help="exit 0 without a compiler (recording then uses the Python walker)")
    s.set_defaults(fn=cmd_build_native)
    s = sub.add_parser("cache", parents=[common], help="on-disk caches: stats | clear")
    cache_sub = s.add_subparsers(dest="cache_command", metavar="stats|clear")
    c = cache_sub.add_parser("stats", parents=[common], help="what the caches hold")
    c.set_defaults(fn=cmd_cache_stats)
    c = cache_sub.add_parser("clear", parents=[common], help="delete cached SPIR-V and pipelines")
    c.add_argument("--spirv", action="store_true", help="only the SPIR-V cache")
    c.add_argument("--pipelines", action="store_true", help="only the pipeline caches")
    c.set_defaults(fn=cmd_cache_clear)
    s = sub.add_parser("bench", parents=[common], help="run the benchmark suite (source checkout)")
    s.add_argument("bench_args", nargs=argparse.REMAINDER, help="passed to the benchmark runner")
    s.set_defaults(fn=cmd_bench)
    return p


def main(argv=None) -> int:
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    bench_args = None
    if "bench" in argv:
        # Everything after `bench` belongs to the benchmark runner; argparse's
        # REMAINDER would reject a first argument that looks like an option.
        cut = argv.index("bench") + 1
        argv, bench_args = argv[:cut], argv[cut:]
    args = parser.parse_args(argv)
    if bench_args is not None:
        args.bench_args = bench_args
    args.json = getattr(args, "json", False) or "--json" in (bench_args or ())
    args.cache_dir = getattr(args, "cache_dir", None)
    if getattr(args, "fn", None) is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return args.fn(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
