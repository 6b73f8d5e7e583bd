"""gc.load_safetensors: files written here by hand (a small writer of the
public format) and, where the safetensors package is installed, by it;
every dtype, paths and bytes, memory mapping, and a typed error naming the
broken rule for each kind of corrupt header."""
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import guestcompute as gc
from safetensors_files import CODES, pack, pack_arrays, with_header


def sample_arrays():
    rng = np.random.default_rng(4)
    out = {}
    for code, t in CODES.items():
        if np.dtype(t).kind == "f":
            out[f"t_{code}"] = (rng.standard_normal((3, 5)) * 100).astype(t)
        elif np.dtype(t).kind in "iu":
            info = np.iinfo(t)
            out[f"t_{code}"] = rng.integers(info.min, info.max, (3, 5), dtype=t, endpoint=True)
    out["t_BOOL"] = rng.random((4, 2)) > 0.5
    out["scalar"] = np.array(2.5, np.float32)
    out["empty"] = np.zeros((0, 7), np.float32)
    out["odd"] = np.arange(3, dtype=np.uint8)          # leaves the next tensor unaligned
    out["after_odd"] = np.arange(6, dtype=np.float32).reshape(2, 3)
    return out


def test_every_dtype_round_trips_in_the_headers_order():
    arrays = sample_arrays()
    got = gc.load_safetensors(pack_arrays(arrays, metadata={"format": "np"}))
    assert list(got) == list(arrays)
    for name, a in arrays.items():
        assert got[name].dtype == a.dtype and got[name].shape == a.shape, name
        np.testing.assert_array_equal(got[name], a)
    assert got["t_F64"].dtype == np.float64               # kept: a reader loses nothing


def test_bf16_widens_to_float32_exactly():
    values = np.array([1.0, -2.5, 3.140625, 0.0, -0.0, np.inf, -np.inf, 2.0**100, 2.0**-130, 3 * 2.0**16],
                      np.float32)
    bits = (values.view(np.uint32) >> 16).astype("<u2")   # these values are bfloat16 numbers
    got = gc.load_safetensors(pack([("w", "BF16", (2, 5), bits.tobytes())]))["w"]
    assert got.dtype == np.float32 and got.shape == (2, 5)
    np.testing.assert_array_equal(got.ravel(), values)
    # every bfloat16 bit pattern (NaNs included) is the top half of its float32
    every = np.arange(2**16, dtype="<u2")
    got = gc.load_safetensors(pack([("all", "BF16", every.shape, every.tobytes())]))["all"]
    np.testing.assert_array_equal(got.view(np.uint32), every.astype(np.uint32) << 16)


@pytest.mark.parametrize("kind", ["str", "pathlib", "bytes", "bytearray", "memoryview"])
def test_paths_and_bytes_give_the_same_arrays(tmp_path, kind):
    arrays = sample_arrays()
    blob = pack_arrays(arrays)
    path = tmp_path / "w.safetensors"
    path.write_bytes(blob)
    src = {"str": str(path), "pathlib": path, "bytes": blob, "bytearray": bytearray(blob),
           "memoryview": memoryview(blob)}[kind]
    got = gc.load_safetensors(src)
    for name, a in arrays.items():
        np.testing.assert_array_equal(got[name], a)


def test_a_path_is_memory_mapped_read_only(tmp_path):
    path = tmp_path / "w.safetensors"
    path.write_bytes(pack_arrays({"w": np.arange(4096, dtype=np.float32)}))
    w = gc.load_safetensors(path)["w"]
    assert not w.flags.owndata and not w.flags.writeable     # a view of the mapping, not a copy
    with pytest.raises(ValueError):
        w[0] = 1
    path.unlink()                                            # the mapping outlives the file's name
    assert w[4095] == 4095


def test_an_empty_file_of_tensors():
    assert gc.load_safetensors(with_header(b"{}")) == {}
    assert gc.load_safetensors(with_header(b'{"__metadata__": {"a": "b"}}')) == {}


def test_unsupported_dtypes_name_the_tensor():
    blob = pack([("ok", "F32", (1,), bytes(4)), ("scale", "F8_E4M3", (2,), bytes(2))])
    with pytest.raises(gc.DTypeError, match=r"'scale'.*F8_E4M3"):
        gc.load_safetensors(blob)


def test_bad_sources():
    with pytest.raises(gc.InvalidArgumentError, match="path or the file's bytes"):
        gc.load_safetensors(123)
    with pytest.raises(FileNotFoundError):
        gc.load_safetensors("no-such-file.safetensors")


def test_an_empty_file_on_disk(tmp_path):
    (tmp_path / "e.safetensors").write_bytes(b"")
    with pytest.raises(gc.InvalidArgumentError, match="empty"):
        gc.load_safetensors(tmp_path / "e.safetensors")


F4 = np.float32(1).tobytes()


def entry(**info) -> bytes:
    """A one-tensor file "w" with header entry ``info`` (defaults: an F32
    scalar at [0, 4]) and 4 bytes of data."""
    info = {"dtype": "F32", "shape": [], "data_offsets": [0, 4], **info}
    return with_header(json.dumps({"w": {k: v for k, v in info.items() if v is not None}}).encode(), F4)


CORRUPT = {
    "short": (b"\x01\x00\x00", "shorter than the 8-byte"),
    "zero header": (struct.pack("<Q", 0), "header length 0"),
    "huge header": (struct.pack("<Q", 2**40) + b"{}", "header length"),
    "header past the end": (struct.pack("<Q", 100) + b"{}", "runs past the end"),
    "not utf-8": (with_header(b'{"\xff": 1}'), "not UTF-8"),
    "not json": (with_header(b"{not json}"), "not valid JSON"),
    "a list": (with_header(b"[1, 2]"), "not a JSON object"),
    "a duplicate name": (with_header(b'{"w": {}, "w": {}}'), "appears twice"),
    "a missing key": (entry(data_offsets=None), "expected the keys"),
    "an extra key": (entry(stride=[1]), "expected the keys"),
    "not an entry": (with_header(b'{"w": 3}'), "expected the keys"),
    "a numeric dtype": (entry(dtype=1), "not a string"),
    "a negative dim": (entry(shape=[-1]), "shape"),
    "a float dim": (entry(shape=[1.0]), "shape"),
    "a bool dim": (entry(shape=[True]), "shape"),
    "a shape string": (entry(shape="1"), "shape"),
    "three offsets": (entry(data_offsets=[0, 4, 4]), "data_offsets"),
    "reversed offsets": (entry(data_offsets=[4, 0]), "data_offsets"),
    "negative offset": (entry(data_offsets=[-4, 0]), "data_offsets"),
    "size against shape": (entry(shape=[2]), "is 8 bytes, its data_offsets"),
    "offsets past the data": (entry(data_offsets=[4, 8]), r"\[4, 8\] run past the 4 bytes"),
    "trailing bytes": (entry() + b"\x00" * 4, "cover 4 bytes of the data but the file holds 8"),
    "an empty name": (with_header(b'{"": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}}', F4),
                      "empty name"),
    "metadata of numbers": (with_header(b'{"__metadata__": {"a": 1}}'), "__metadata__"),
    "a bad bool": (pack([("b", "BOOL", (2,), b"\x01\x02")]), "BOOL byte is 2"),
}


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_corrupt_files_raise_a_typed_error(case):
    blob, message = CORRUPT[case]
    with pytest.raises(gc.InvalidArgumentError, match=message):
        gc.load_safetensors(blob)


def two(a_offsets, b_offsets, data=bytes(8)) -> bytes:
    header = {"a": {"dtype": "F32", "shape": [1], "data_offsets": a_offsets},
              "b": {"dtype": "F32", "shape": [1], "data_offsets": b_offsets}}
    return with_header(json.dumps(header).encode(), data)


def test_tensors_must_tile_the_data():
    assert set(gc.load_safetensors(two([4, 8], [0, 4]))) == {"a", "b"}   # any header order
    with pytest.raises(gc.InvalidArgumentError, match="'b'.*overlaps"):
        gc.load_safetensors(two([0, 4], [0, 4], bytes(4)))
    with pytest.raises(gc.InvalidArgumentError, match="'b'.*gap of 4"):
        gc.load_safetensors(two([0, 4], [8, 12], bytes(12)))
    with pytest.raises(gc.InvalidArgumentError, match="'a'.*gap of 4"):
        gc.load_safetensors(two([4, 8], [8, 12], bytes(12)))       # the data must start at 0


def test_files_of_the_safetensors_package():
    st = pytest.importorskip("safetensors.numpy")
    arrays = sample_arrays()
    got = gc.load_safetensors(st.save(arrays, metadata={"format": "np"}))
    assert set(got) == set(arrays)
    for name, a in arrays.items():
        assert got[name].dtype == a.dtype and got[name].shape == a.shape, name
        np.testing.assert_array_equal(got[name], a)


def test_the_safetensors_package_reads_this_tests_writer(tmp_path):
    """The writer above is the format (so the corrupt cases break only what
    they say they break)."""
    st = pytest.importorskip("safetensors.numpy")
    arrays = sample_arrays()
    got = st.load(pack_arrays(arrays))
    for name, a in arrays.items():
        np.testing.assert_array_equal(got[name], a)


def test_reading_a_file_needs_no_vulkan():
    """gc.load_safetensors works where the Vulkan loader cannot load (a tool
    that only converts weights)."""
    code = ("import sys; sys.modules['vulkan'] = None\n"
            "import numpy as np, guestcompute as gc\n"
            "blob = b'\\x10' + bytes(7) + b'{}' + b' ' * 14\n"
            "assert gc.load_safetensors(blob) == {}\n")
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, env=dict(os.environ, PYTHONPATH=str(root)),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
