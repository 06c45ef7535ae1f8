"""records/columns: a batch of records joined key by key equals decoding each and concatenating;
anything that does not fit gives None (the caller then decodes record by record)."""

from __future__ import annotations

import numpy as np
import pytest

from mdloader_plugin.core.blocks import exclusive_offsets
from mdloader_plugin.records import codec
from mdloader_plugin.records.columns import Gather, gather_columns, part_starts
from mdloader_plugin.sources import synth


def packed(graphs):
    recs = [codec.encode(g) for g in graphs]
    sizes = np.array([r.size for r in recs], dtype=np.int64)
    return np.concatenate(recs), exclusive_offsets(sizes), sizes


def edge_axis(name, ndim):
    return 1 if name == "edge_index" else 0


def test_join_equals_decode_and_concatenate():
    graphs = list(synth.generate("hydragnn", 5, 0, 12))
    buf, offs, sizes = packed(graphs)
    pick = [3, 0, 7, 7, 11]
    cols = gather_columns(buf, offs[pick], sizes[pick], edge_axis)
    assert cols is not None and cols.count == len(pick)
    for key in graphs[0]:
        ax = edge_axis(key, graphs[0][key].ndim)
        want = np.concatenate([graphs[i][key] for i in pick], axis=ax)
        assert cols.arrays[key].dtype == want.dtype and np.array_equal(cols.arrays[key], want), key
        assert cols.sizes[key].tolist() == [graphs[i][key].shape[ax] for i in pick], key
        assert cols.axis[key] == ax
    assert cols.arrays["x"].ctypes.data % 16 == 0 and cols.arrays["x"].flags.writeable
    buf[:] = 0  # fresh memory: nothing refers to the records' buffer
    assert np.array_equal(cols.arrays["y"], np.concatenate([graphs[i]["y"] for i in pick]))


def test_scalars_become_one_entry_each():
    recs = [{"e": np.float64(i) * 1.5, "n": np.array([i, i + 1], np.int32)} for i in range(4)]
    buf, offs, sizes = packed(recs)
    cols = Gather()(buf, offs, sizes)
    assert cols.arrays["e"].tolist() == [0.0, 1.5, 3.0, 4.5]
    assert cols.arrays["n"].tolist() == [0, 1, 1, 2, 2, 3, 3, 4]


def test_mixed_schemas_and_bad_bounds_give_none():
    a = {"x": np.zeros((2, 3), np.float32)}
    b = {"x": np.zeros((2, 3), np.float64)}  # another dtype: another header
    buf, offs, sizes = packed([a, b])
    assert gather_columns(buf, offs, sizes) is None
    c = {"x": np.zeros((2, 4), np.float32)}  # disagrees off the joined axis
    buf, offs, sizes = packed([a, c])
    assert gather_columns(buf, offs, sizes) is None
    buf, offs, sizes = packed([a, a])
    assert gather_columns(buf, offs, sizes - 8) is None  # a record cut short


def test_unknown_dtype_code_falls_back_to_decode_which_names_it():
    rec = codec.encode({"x": np.zeros(3, np.float32)})
    nlen, code, ndim, pad, off = codec._ENTRY.unpack_from(rec, codec._FIXED.size)
    codec._ENTRY.pack_into(rec, codec._FIXED.size, nlen, 250, ndim, pad, off)
    assert Gather()(rec, [0], [rec.size]) is None  # the caller decodes record by record...
    with pytest.raises(codec.CodecError) as e:
        codec.decode(rec)
    assert str(e.value).startswith(  # ... and the decode names the code and the valid range
        f"array 'x': unknown dtype code 250 (valid 0..{len(codec._DTYPES) - 1})")


def test_part_starts():
    assert part_starts([3, 0, 5]).tolist() == [0, 3, 3, 8]
    assert part_starts([]).tolist() == [0]
