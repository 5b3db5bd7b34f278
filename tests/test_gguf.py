"""common/gguf.h against the gguf package (llama.cpp's own Python reader and writer).

A file written by gguf's GGUFWriter with every metadata value type (arrays included) and a tensor
of every type Folio dequantizes (random blocks, so every bit pattern of the packed values is met)
is read back through tests/tools/gguf_dump: the metadata equal, and each tensor dequantized equal
to gguf.quants.dequantize. A type Folio cannot dequantize is an error naming the tensor and the
type. Corrupt and truncated files are tests/unit/test_gguf.c's and the fuzzer's.
"""

import json
import subprocess

import numpy as np
import pytest

from conftest import bin_path

import gguf  # noqa: E402  (deploy/requirements-test.txt)
Q = gguf.GGMLQuantizationType

# The types Folio dequantizes, and one it does not (its data must still be size-checked).
DEQUANT_TYPES = [Q.F32, Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q2_K, Q.Q3_K,
                 Q.Q4_K, Q.Q5_K, Q.Q6_K]
UNSUPPORTED = Q.IQ4_NL

# Byte offsets of the f16 scales in each block type; the test fills them with finite values
# (random bits would give inf/NaN scales, which prove nothing).
F16_FIELDS = {Q.Q8_0: [0], Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2],
              Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208], Q.Q2_K: [80, 82], Q.Q3_K: [108], Q.IQ4_NL: [0]}


def random_tensor(rng, qtype, rows, cols):
    """(array to hand GGUFWriter, raw_dtype) for a [rows, cols] tensor of qtype."""
    if qtype == Q.F32:
        return rng.standard_normal((rows, cols)).astype(np.float32), None
    if qtype == Q.F16:
        return rng.standard_normal((rows, cols)).astype(np.float16), None
    if qtype == Q.BF16:
        bits = (rng.standard_normal((rows, cols)).astype(np.float32).view(np.uint32) >> 16)
        return bits.astype(np.uint16).view(np.uint8).reshape(rows, cols * 2), Q.BF16
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    nblocks = rows * cols // block
    raw = rng.integers(0, 256, (nblocks, size), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        scale = rng.uniform(-0.1, 0.1, nblocks).astype(np.float16)
        raw[:, off : off + 2] = scale.view(np.uint8).reshape(nblocks, 2)
    return raw.reshape(rows, cols // block * size), qtype


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    rng = np.random.default_rng(7)
    path = tmp_path_factory.mktemp("gguf") / "all_types.gguf"
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_uint8("t.u8", 250)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 65000)
    w.add_int16("t.i16", -32000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_uint64("t.u64", 2**63 - 5)
    w.add_int64("t.i64", -(2**62))
    w.add_float32("t.f32", 0.15625)
    w.add_float64("t.f64", 1e-300)
    w.add_bool("t.true", True)
    w.add_bool("t.false", False)
    w.add_string("t.str", "h\u00e9llo \u65e5\u672c \U0001F600")
    w.add_array("t.strs", ["a", "", "\u0120t", "<|im_end|>"])
    w.add_key_value("t.ints", [1, -2, 3], gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.INT32)
    w.add_key_value("t.floats", [0.5, -1.25], gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.FLOAT32)
    w.add_array("t.nested", [[1, 2], [3]])
    tensors = {}
    for i, qtype in enumerate(DEQUANT_TYPES + [UNSUPPORTED]):
        block = gguf.GGML_QUANT_SIZES[qtype][0]
        cols = max(block, 64) * 2
        arr, raw = random_tensor(rng, qtype, 3, cols)
        name = f"tensor.{qtype.name}"
        w.add_tensor(name, arr, raw_dtype=raw)
        tensors[name] = (qtype, arr, cols)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    out = path.parent / "dequant.bin"
    proc = subprocess.run([str(bin_path("gguf_dump")), str(path), str(out)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), np.fromfile(out, dtype=np.float32), tensors


def test_metadata_of_every_type(written):
    dump, _, _ = written
    kv = dump["kv"]
    assert dump["version"] == 3
    assert kv["general.architecture"] == "llama"
    assert kv["t.u8"] == 250 and kv["t.i8"] == -100
    assert kv["t.u16"] == 65000 and kv["t.i16"] == -32000
    assert kv["t.u32"] == 4000000000 and kv["t.i32"] == -2000000000
    assert kv["t.u64"] == 2**63 - 5 and kv["t.i64"] == -(2**62)
    assert kv["t.f32"] == 0.15625 and kv["t.f64"] == 1e-300
    assert kv["t.true"] is True and kv["t.false"] is False
    assert kv["t.str"] == "h\u00e9llo \u65e5\u672c \U0001F600"
    assert kv["t.strs"] == ["a", "", "\u0120t", "<|im_end|>"]
    assert kv["t.ints"] == [1, -2, 3]
    assert kv["t.floats"] == [0.5, -1.25]
    assert kv["t.nested"] == 2  # an array of arrays: its count, no element accessors


@pytest.mark.parametrize("qtype", DEQUANT_TYPES, ids=lambda t: t.name)
def test_dequantize_equals_gguf_package(written, qtype):
    dump, floats, tensors = written
    offset = 0
    for t in dump["tensors"]:
        want_type, arr, cols = tensors[t["name"]]
        n = 3 * cols
        assert t["type"] == want_type.name and t["ne"] == [cols, 3]
        if t["name"] == f"tensor.{qtype.name}":
            ours = floats[offset : offset + n].reshape(3, cols)
            if qtype in (Q.F32, Q.F16):
                want = arr.astype(np.float32)
            else:
                want = gguf.quants.dequantize(arr, qtype).astype(np.float32)
            assert want.shape == (3, cols)
            assert np.all(np.isfinite(want))
            np.testing.assert_allclose(ours, want, rtol=1e-6, atol=1e-9)
            return
        if "error" not in t:
            offset += n
    pytest.fail(f"tensor.{qtype.name} not in the dump")


def test_unsupported_type_is_an_error_naming_tensor_and_type(written):
    dump, _, _ = written
    (entry,) = [t for t in dump["tensors"] if t["name"] == f"tensor.{UNSUPPORTED.name}"]
    assert "tensor.IQ4_NL" in entry["error"] and "type IQ4_NL" in entry["error"]
    assert "cannot be dequantized" in entry["error"]
