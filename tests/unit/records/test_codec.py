"""Codec: exact round trips for any dtype and shape, zero-copy decode, no pickle, clear errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mdloader_plugin.records import codec

DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
          np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128]

arrays = st.sampled_from(DTYPES).flatmap(
    lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5)))
names = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF),
                min_size=1, max_size=20).filter(lambda s: len(s.encode()) < 256)
samples = st.dictionaries(names, arrays, min_size=0, max_size=8)


@settings(max_examples=800, deadline=None)
@given(samples)
def test_round_trip_is_exact(sample):
    rec = codec.encode(sample)
    assert rec.size % 8 == 0 and rec.size == codec.record_size(sample)
    out = codec.decode(rec)
    assert list(out) == list(sample)
    for k, a in sample.items():
        assert out[k].dtype == a.dtype and out[k].shape == a.shape
        assert out[k].tobytes() == a.tobytes()  # bitwise: NaNs and signed zeros included


@settings(max_examples=200, deadline=None)
@given(st.lists(samples, min_size=1, max_size=6))
def test_records_end_to_end_stay_aligned_and_independent(batch):
    sizes = [codec.record_size(s) for s in batch]
    buf = np.empty(sum(sizes), dtype=np.uint8)
    pos = 0
    for s, n in zip(batch, sizes):
        assert codec.encode_into(buf, pos, s) == n
        pos += n
    pos = 0
    for s, n in zip(batch, sizes):
        out = codec.decode(buf, pos, n)
        for k, a in s.items():
            assert out[k].tobytes() == a.tobytes()
            if out[k].size:
                assert out[k].ctypes.data % 8 == 0
        pos += n


def test_decode_returns_views_not_copies():
    rec = codec.encode({"x": np.arange(6, dtype=np.float32).reshape(2, 3)})
    out = codec.decode(rec)
    assert np.shares_memory(out["x"], rec)
    rec[-8:] = 0
    assert out["x"][1, 1] == 0  # the view sees the buffer


def test_non_contiguous_and_big_endian_inputs():
    a = np.arange(24, dtype=np.int64).reshape(4, 6)[:, ::2]
    out = codec.decode(codec.encode({"a": a, "be": np.arange(3, dtype=">i4")}))
    assert np.array_equal(out["a"], a)
    assert out["be"].tolist() == [0, 1, 2]


@pytest.mark.parametrize("bad", [b"", b"XXXX" + bytes(20), b"MDLG\x02" + bytes(19)])
def test_malformed_records_raise(bad):
    with pytest.raises(codec.CodecError):
        codec.decode(np.frombuffer(bad, dtype=np.uint8))


def test_truncated_record_raises():
    rec = codec.encode({"x": np.ones(100)})
    with pytest.raises(codec.CodecError, match="claims"):
        codec.decode(rec[:-16])


def test_object_arrays_are_refused_never_pickled():
    with pytest.raises(codec.CodecError, match="not supported"):
        codec.encode({"o": np.array([{"a": 1}], dtype=object)})
