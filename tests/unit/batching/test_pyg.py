"""Column-wise collate == per-sample decode + ``Batch.from_data_list``, object for object.

Random schemas (key sets, orders, dtypes, ranks, empty graphs, 0-d values, index keys of several
dtypes) and random graphs: the fast path must build the identical batch whenever it claims the
schema, and must decline (so the general path runs) exactly where PyG infers node counts in a
way it does not reproduce."""

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mdloader_plugin.records import codec
from mdloader_plugin.records import columns
from mdloader_plugin.batching.pyg import ColumnCollate, cat_axis, pyg_collate, pyg_sample
from pyg_equal import batch_diff

F32, F64, I32, I64 = np.float32, np.float64, np.int32, np.int64

# name -> (dtype choices, shape maker from (nodes, edges, k)), per sample
KEYS = {
    "x": ([F32, F64, np.float16], lambda n, e, k: (n, k)),
    "pos": ([F32], lambda n, e, k: (n, 3)),
    "atomic_numbers": ([I64, np.uint8], lambda n, e, k: (n,)),
    "node_weight": ([F32], lambda n, e, k: (n,)),
    "edge_index": ([I64, I32], lambda n, e, k: (2, e)),
    "edge_attr": ([F32], lambda n, e, k: (e, k)),
    "face": ([I64], lambda n, e, k: (3, e)),
    "y": ([F32, F64, I64], lambda n, e, k: (k,)),
    "y_loc": ([I64], lambda n, e, k: (1, 2)),
    "cell": ([F32], lambda n, e, k: (1, 3, 3)),
    "pbc": ([np.bool_], lambda n, e, k: (1, 3)),
    "energy": ([F64], lambda n, e, k: ()),
    "fixed": ([np.int8], lambda n, e, k: (n,)),
}


@st.composite
def batches(draw):
    names = draw(st.lists(st.sampled_from(sorted(KEYS)), min_size=1, max_size=8, unique=True))
    dtypes = {k: draw(st.sampled_from(KEYS[k][0])) for k in names}
    k = draw(st.integers(1, 3))
    count = draw(st.integers(1, 9))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    out = []
    for _ in range(count):
        n, e = draw(st.integers(0, 6)), draw(st.integers(0, 9))
        sample = {}
        for name in names:
            shape = KEYS[name][1](n, e, k)
            if "index" in name or name == "face":
                arr = rng.integers(0, max(n, 1), size=shape)
            else:
                arr = rng.normal(size=shape) * 50
            sample[name] = np.asarray(arr).astype(dtypes[name])
        out.append(sample)
    return out


def fetched_of(samples, gap: int = 0) -> SimpleNamespace:
    """Records end to end (with `gap` bytes between them), as a backend hands them over."""
    recs = [codec.encode(s) for s in samples]
    nb = np.array([r.size for r in recs], dtype=np.int64)
    offs = np.concatenate([[0], np.cumsum(nb + gap)[:-1]]).astype(np.int64)
    buf = np.zeros(int(nb.sum()) + gap * len(recs), dtype=np.uint8)
    for r, o in zip(recs, offs):
        buf[o:o + r.size] = r
    return SimpleNamespace(buf=buf, offsets=offs, nbytes=nb)


def slow(fetched, to_sample=pyg_sample):
    return pyg_collate([to_sample(codec.decode(fetched.buf, int(o), int(n)))
                        for o, n in zip(fetched.offsets, fetched.nbytes)])


def fast_claims(names) -> bool:
    """Where the fast path must run: PyG counts nodes from a node key, or needs no count."""
    if any(k in ("x", "pos") or "node" in k for k in names):
        return True
    return not ({"edge_index", "face"} & set(names))


@settings(max_examples=300, deadline=None)
@given(batches(), st.sampled_from([0, 8, 24]))
def test_fast_path_builds_the_batch_from_data_list_builds(samples, gap):
    fetched = fetched_of(samples, gap)
    got = ColumnCollate(pyg_sample, pyg_collate)(fetched)
    if got is None:
        assert not fast_claims(samples[0]), f"declined keys {list(samples[0])}"
        return
    assert fast_claims(samples[0])
    want = slow(fetched)
    assert batch_diff(got, want) == ""
    for i in range(len(samples)):  # get_example undoes the increments exactly
        ex, ref = got.get_example(i), want.get_example(i)
        assert list(ex.keys()) == list(ref.keys())
        assert all(ex[k].dtype == ref[k].dtype and np.array_equal(ex[k], ref[k]) for k in ex.keys())


@settings(max_examples=150, deadline=None)
@given(batches())
def test_batch_owns_its_memory(samples):
    fetched = fetched_of(samples)
    got = ColumnCollate(pyg_sample, pyg_collate)(fetched)
    if got is None:
        return
    fetched.buf[:] = 0xAB  # a reused receive buffer must not change a batch already made
    assert batch_diff(got, slow(fetched_of(samples))) == ""


def test_hydragnn_transform_column_wise_equals_per_graph():
    from mdloader_plugin.integrations.hydragnn.graphs import make_to_sample
    from mdloader_plugin.sources import synth

    samples = list(synth.generate("hydragnn", 3, 0, 40))
    fetched = fetched_of(samples)
    for cols, mm in ((None, None), ([0, 2], (-3.0, 7.5)), ([1], (2.0, 2.0))):
        to_sample = make_to_sample(cols, mm)
        cc = ColumnCollate(to_sample, pyg_collate)
        got = cc(fetched)
        assert got is not None and cc.enabled
        assert batch_diff(got, slow(fetched, to_sample)) == ""


def test_hydragnn_heads_on_records_without_y_loc_column_wise_equals_per_graph():
    """A converted file has no y_loc: the transform adds one a graph; the column-wise batch
    still equals PyG's collate of the per-graph samples."""
    from mdloader_plugin.integrations.hydragnn.graphs import Heads, make_to_sample
    from mdloader_plugin.sources import synth

    samples = [{k: v for k, v in g.items() if k != "y_loc"}
               for g in synth.generate("hydragnn", 5, 0, 30)]
    fetched = fetched_of(samples)
    to_sample = make_to_sample([0, 1], None, Heads(["graph"], [0], [1], [1, 1, 1]))
    cc = ColumnCollate(to_sample, pyg_collate)
    got = cc(fetched)
    assert got is not None and cc.enabled and "y_loc" in got
    assert batch_diff(got, slow(fetched, to_sample)) == ""


def test_oc20_records_take_the_fast_path():
    from mdloader_plugin.sources import synth

    fetched = fetched_of(list(synth.generate("oc20", 4, 0, 12)))
    got = ColumnCollate(pyg_sample, pyg_collate)(fetched)
    assert got is not None and batch_diff(got, slow(fetched)) == ""


@pytest.mark.parametrize("case", ["missing key", "other dtype", "other feature width",
                                  "other rank"])
def test_mixed_schemas_fall_back_to_the_general_path(case):
    a = {"x": np.ones((3, 2), F32), "edge_index": np.array([[0, 1], [1, 2]], I64),
         "y": np.ones(1, F32)}
    b = dict(a)
    if case == "missing key":
        del b["y"]
    elif case == "other dtype":
        b["y"] = np.ones(1, F64)
    elif case == "other feature width":
        b["x"] = np.ones((3, 4), F32)
    else:
        b["y"] = np.ones((1, 1), F32)
    fetched = fetched_of([a, b, a])
    assert columns.gather_columns(fetched.buf, fetched.offsets, fetched.nbytes) is None
    cc = ColumnCollate(pyg_sample, pyg_collate)
    assert cc(fetched) is None and not cc.enabled  # declined once, off for good


def test_custom_collate_or_sample_without_a_twin_is_left_alone():
    assert not ColumnCollate(pyg_sample, list).enabled
    assert not ColumnCollate(lambda a: a, pyg_collate).enabled


def test_corrupt_record_is_declined_and_reported_by_the_general_path():
    samples = [{"x": np.ones((2, 2), F32)}, {"x": np.zeros((3, 2), F32)}]
    fetched = fetched_of(samples)
    fetched.buf[int(fetched.offsets[1])] ^= 0xFF  # magic of record 1
    assert ColumnCollate(pyg_sample, pyg_collate)(fetched) is None
    with pytest.raises(codec.CodecError, match="no MDLoader record"):
        slow(fetched)


@settings(max_examples=200, deadline=None)
@given(batches())
def test_gather_columns_joins_exact_bytes(samples):
    fetched = fetched_of(samples)
    cols = columns.gather_columns(fetched.buf, fetched.offsets, fetched.nbytes, cat_axis)
    assert cols is not None and cols.count == len(samples)
    for k in samples[0]:
        parts = [np.atleast_1d(s[k]) for s in samples]
        axis = parts[0].ndim - 1 if k in ("edge_index", "face") else 0
        want = np.concatenate(parts, axis=axis)
        assert cols.arrays[k].dtype == want.dtype and cols.arrays[k].shape == want.shape
        assert cols.arrays[k].tobytes() == want.tobytes()
        assert cols.sizes[k].tolist() == [p.shape[axis] for p in parts]


def test_buffer_pool_reuses_the_smallest_fitting_buffer_and_keeps_few():
    from mdloader_plugin.backends.base import BufferPool

    pool = BufferPool(slots=2)
    a = pool.take(3 << 20)
    assert a.size == 3 << 20 and a.base.size >= a.size  # room to grow
    addr = a.base.ctypes.data
    pool.give(a)
    b = pool.take(2 << 20)
    assert b.base.ctypes.data == addr and b.size == 2 << 20  # the same memory again
    c = pool.take(3 << 20)  # nothing free: a new one
    assert c.base.ctypes.data != addr
    for buf in (b, c, pool.take(10), pool.take(20)):
        pool.give(buf)
    assert sorted(x.size for x in pool._free) == sorted([b.base.size, c.base.size])  # largest two


def test_shapes_that_overflow_int64_are_declined_not_trusted():
    """A header claiming a [2**32, 2**32] array (the element count wraps to 0 in int64) must
    send the batch to the general path, whose decode names the bad array."""
    rec = codec.encode({"x": np.ones((1, 1), F32)})
    ndim_at = 16 + 2  # first entry: name length, dtype code, ndim
    assert rec[ndim_at] == 2
    shape_at = 16 + 8
    rec[shape_at:shape_at + 16] = np.array([2**32, 2**32], dtype="<i8").view(np.uint8)
    fetched = SimpleNamespace(buf=rec, offsets=np.array([0]), nbytes=np.array([rec.size]))
    assert columns.gather_columns(fetched.buf, fetched.offsets, fetched.nbytes) is None
    with pytest.raises(codec.CodecError, match="runs past the end"):
        slow(fetched)


@settings(max_examples=100, deadline=None)
@given(st.lists(batches(), min_size=2, max_size=4))
def test_one_gather_across_batches_of_changing_schemas(seq):
    """The schema a Gather remembers is reused only when the next batch's headers match it."""
    gather = columns.Gather(cat_axis)
    for samples in seq:
        fetched = fetched_of(samples)
        got = gather(fetched.buf, fetched.offsets, fetched.nbytes)
        want = columns.gather_columns(fetched.buf, fetched.offsets, fetched.nbytes, cat_axis)
        assert (got is None) == (want is None)
        if got is not None:
            assert list(got.arrays) == list(want.arrays) == list(samples[0])
            for k in got.arrays:
                assert got.arrays[k].dtype == want.arrays[k].dtype
                assert got.arrays[k].tobytes() == want.arrays[k].tobytes()
                assert got.sizes[k].tolist() == want.sizes[k].tolist()


def test_samples_without_arrays_batch_like_pyg():
    fetched = fetched_of([{}, {}, {}])
    got = ColumnCollate(pyg_sample, pyg_collate)(fetched)
    assert got is not None and batch_diff(got, slow(fetched)) == "" and got.num_graphs == 3
