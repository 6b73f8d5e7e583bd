"""The `guestcompute` command line: each command runs, prints text, and
prints parseable JSON with --json."""
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from guestcompute import cli
from guestcompute.device import pipeline_store as ps
from guestcompute import bake
from guestcompute.errors import InvalidArgumentError
from guestcompute.vk import command_stream, native_build
from guestcompute.ops import all_specs

ROOT = Path(__file__).resolve().parents[2]


def _gc(args, cache_dir, extra_env=None, check=True):
    env = dict(os.environ, GUESTCOMPUTE_CACHE_DIR=str(cache_dir), **(extra_env or {}))
    proc = subprocess.run([sys.executable, "-m", "guestcompute", *args], env=env, cwd=cache_dir,
                          capture_output=True, text=True, timeout=300)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_entry_point_is_declared():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["guestcompute"] == "guestcompute.cli:main"
    assert callable(cli.main)


def test_info_text_and_json(tmp_path):
    text = _gc(["info"], tmp_path).stdout
    assert "devices:" in text and str(tmp_path) in text
    data = json.loads(_gc(["info", "--json"], tmp_path).stdout)
    assert data["devices"] and isinstance(data["chosen"], int)
    assert data["devices"][data["chosen"]]["name"]
    assert data["caches"]["root"] == str(tmp_path)
    assert "api_version" in data["would_use"]
    # what gc.requirements(..., bfloat16=True) would add: never what the default already lists
    assert not set(data["would_use"]["opt_in"]) & set(data["would_use"]["device_extensions"])
    assert set(data["would_use"]["opt_in"]) <= {"VK_KHR_shader_bfloat16"}
    assert data["memory"]["heaps"][0]["size"] > 0 and data["memory"]["max_allocations"] > 0
    assert "maxMemoryAllocationCount" in text and "heap 0:" in text
    # --json before the command works too
    assert json.loads(_gc(["--json", "info"], tmp_path).stdout)["version"]


def test_doctor_passes_here(tmp_path):
    proc = _gc(["doctor", "--json"], tmp_path)
    data = json.loads(proc.stdout)
    names = {c["name"]: c for c in data["checks"]}
    assert {"loader", "driver (ICD)", "validation layer", "glslc", "built-in kernels",
            "cache directory", "compute"} <= set(names)
    assert data["ok"] is True
    assert names["compute"]["status"] == "ok" and names["cache directory"]["status"] == "ok"
    assert "allocations" in names["compute"]["detail"]
    assert "[  OK] loader" in _gc(["doctor"], tmp_path).stdout


def test_doctor_fails_with_a_fix_hint_when_no_driver(tmp_path):
    missing = str(tmp_path / "no-such-icd.json")
    env = {"VK_ICD_FILENAMES": missing, "VK_DRIVER_FILES": missing}
    proc = _gc(["doctor", "--json"], tmp_path, env, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    icd = next(c for c in data["checks"] if c["name"] == "driver (ICD)")
    assert icd["status"] == "fail" and "mesa-vulkan-drivers" in icd["fix"]
    assert data["ok"] is False


def test_doctor_warns_about_an_unwritable_cache_dir(tmp_path):
    (tmp_path / "file").write_bytes(b"")
    check = cli.cache_dir_check(tmp_path / "file" / "cache")
    assert check["status"] == "warn" and "GUESTCOMPUTE_CACHE_DIR" in check["fix"]


def test_cache_stats_and_clear(modern_host, tmp_path, capsys):
    ctx = modern_host.adopt(cache_dir=tmp_path)
    a = ctx.tensor(np.ones(32, np.float32))
    modern_host.run(ctx, lambda rec: rec.add(a, a))
    ctx.close()
    (tmp_path / "pipelines" / "zz-foreign.bin").write_bytes(b"garbage")
    (tmp_path / "pipelines" / "keep-me.txt").write_text("not ours")

    assert cli.main(["cache", "stats", "--json", "--cache-dir", str(tmp_path)]) == 0
    data = json.loads(capsys.readouterr().out)
    entries = {e["file"]: e for e in data["pipelines"]["entries"]}
    good = entries[ps.DeviceIdentity.from_limits(ctx.limits).file_name()]
    assert good["problem"] is None and good["vendor_id"] == ctx.limits.vendor_id
    assert entries["zz-foreign.bin"]["problem"]
    assert data["pipelines"]["files"] == 2

    assert cli.main(["cache", "stats", "--cache-dir", str(tmp_path)]) == 0
    assert "[ok]" in capsys.readouterr().out

    assert cli.main(["--json", "cache", "clear", "--pipelines", "--cache-dir", str(tmp_path)]) == 0
    cleared = json.loads(capsys.readouterr().out)
    assert cleared["removed_files"] == 2 and not cleared["errors"]
    assert (tmp_path / "pipelines" / "keep-me.txt").exists()       # only our own files go

    assert cli.main(["cache", "clear", "--cache-dir", str(tmp_path)]) == 0
    assert "removed" in capsys.readouterr().out
    assert not list((tmp_path / "spirv").glob("*.spv"))


def test_bake_command(tmp_path, monkeypatch, capsys):
    few = list(all_specs())[:2]
    monkeypatch.setattr(bake, "catalogue", lambda: iter(few))
    out = tmp_path / "baked"
    assert cli.main(["bake", "--out", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["specs"] == 2 and report["compiled"] == report["sources"]
    assert cli.main(["bake", "--out", str(out)]) == 0
    assert "0 compiled" in capsys.readouterr().out
    assert cli.main(["bake", "--check", "--out", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    (out / ("1" * 64 + ".spvz")).write_bytes(b"old")
    assert cli.main(["bake", "--check", "--out", str(out)]) == 1
    assert "stale" in capsys.readouterr().out

    monkeypatch.setenv("PATH", str(tmp_path))            # no glslc
    assert cli.main(["bake", "--out", str(out), "--force"]) == 1
    assert "apt-get install glslc" in capsys.readouterr().err


def test_bench_without_the_suite_says_so(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)              # no benchmarks/run.py here or above
    if cli.find_benchmark_suite() is not None:
        pytest.skip("a benchmark suite lies above the temporary directory")
    assert cli.main(["bench"]) == 2
    assert "benchmark suite is not available" in capsys.readouterr().err
    assert cli.main(["bench", "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["ok"] is False


def test_bench_runs_the_checkouts_suite_as_its_own_process(monkeypatch, tmp_path):
    """The suite runs as ``python -m benchmarks.run`` in the checkout found
    from the working directory upwards; the package imports none of it."""
    suite = tmp_path / "benchmarks"
    suite.mkdir()
    (suite / "__init__.py").write_text("")
    (suite / "run.py").write_text(
        "import json, pathlib, sys\n"
        "log = pathlib.Path(__file__).with_name('seen.jsonl')\n"
        "with log.open('a') as f:\n"
        "    f.write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "sys.exit(3 if 'fail' in sys.argv else 0)\n")
    inner = tmp_path / "somewhere" / "deeper"
    inner.mkdir(parents=True)
    monkeypatch.chdir(inner)
    assert cli.find_benchmark_suite() == tmp_path.resolve()
    assert cli.main(["bench", "--", "--only", "add"]) == 0
    assert cli.main(["--json", "bench", "quick"]) == 0
    assert cli.main(["bench", "fail"]) == 3
    seen = [json.loads(line) for line in (suite / "seen.jsonl").read_text().splitlines()]
    assert seen == [["--only", "add"], ["quick", "--json"], ["fail"]]
    assert "benchmarks.run" not in sys.modules


def test_no_command_prints_usage(capsys):
    assert cli.main([]) == 2
    assert "usage" in capsys.readouterr().err


def test_python_dash_m_cache(tmp_path):
    assert "cache root" in _gc(["cache", "stats"], tmp_path).stdout
    proc = _gc(["cache"], tmp_path, check=False)          # a subcommand is missing
    assert proc.returncode == 2 and "usage" in proc.stderr


def test_doctor_reports_a_missing_loader_instead_of_crashing():
    """Importing the package must not load Vulkan, so doctor can say what to install."""
    import subprocess
    import sys
    code = ("import sys; sys.modules['vulkan'] = None\n"      # as if the loader could not load
            "import guestcompute\n"
            "from guestcompute import cli\n"
            "sys.exit(cli.main(['doctor', '--json']))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] is False
    assert report["checks"][0]["name"] == "loader" and "libvulkan1" in report["checks"][0]["fix"]


def test_build_native_with_a_missing_compiler_fails_cleanly(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(native_build, "library_dirs", lambda: [tmp_path])
    monkeypatch.setenv("CC", "/nonexistent/cc")
    assert cli.main(["build-native"]) == 1
    assert "cannot run the C compiler '/nonexistent/cc'" in capsys.readouterr().out
    assert not list(tmp_path.iterdir())
    assert cli.main(["build-native", "--optional"]) == 0


def test_bake_refuses_a_job_count_below_one(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["bake", "--jobs", "-1"])
    assert exit_.value.code == 2 and "--jobs: '-1': give a whole number, at least 1" in capsys.readouterr().err
    for jobs in (0, -1, 2.5, True):
        with pytest.raises(InvalidArgumentError, match="jobs="):
            bake.bake(jobs=jobs, specs=[])


def test_info_and_doctor_report_a_library_that_does_not_load(tmp_path, monkeypatch, capsys):
    broken = tmp_path / command_stream.library_name()
    broken.write_bytes(b"")
    monkeypatch.setattr(command_stream, "native_library_path", lambda: broken)
    assert cli.main(["info", "--json", "--cache-dir", str(tmp_path)]) == 0
    native = json.loads(capsys.readouterr().out)["command_interpreter"]
    assert not native["built"] and "does not load" in native["error"]
    cli.main(["doctor", "--json", "--cache-dir", str(tmp_path)])
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert checks["command interpreter"]["status"] == "warn"
    assert checks["command interpreter"]["detail"].startswith("does not load")
