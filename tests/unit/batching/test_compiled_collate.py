"""Batches built by the compiled kernels (records/_kernels.c) against the numpy path and PyG
itself (the kernel module's own checks: tests/unit/records/test_kernels.py).

Batches of one schema in a row (the first is built the checked way, the later ones by the
one-call path), random schemas of every record dtype, empty and one-node graphs, the two
synthetic data sets: the compiled path, the numpy fallback (``MDLOADER_KERNELS=off``) and
``Batch.from_data_list`` give the same bytes. Records the compiled path cannot take fall back
or fail with one line."""

import logging
import os

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mdloader_plugin.records import codec
from mdloader_plugin.batching.pyg import ColumnCollate, pyg_collate, pyg_sample
from mdloader_plugin.loader.step import BatchBuilder
from mdloader_plugin.records import kernels
from mdloader_plugin.sources import synth
from pyg_equal import batch_diff
from test_pyg import KEYS, fetched_of, slow

needs_kernels = pytest.mark.skipif(kernels.get() is None,
                                   reason=f"compiled kernels not built: {kernels.why_not()}")
ALL_DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
              np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128]


@pytest.fixture(autouse=True)
def _propagate(monkeypatch):
    """caplog listens on the root logger; MDLoader's own logger does not propagate."""
    from mdloader_plugin.core.log import get_logger

    monkeypatch.setattr(get_logger(), "propagate", True)


class _NumpyPath:
    """``with numpy_path:`` runs a block with the kernels off (the numpy fallback)."""

    def __enter__(self):
        os.environ["MDLOADER_KERNELS"] = "off"
        kernels.reset()

    def __exit__(self, *exc):
        os.environ.pop("MDLOADER_KERNELS", None)
        kernels.reset()


numpy_path = _NumpyPath()


def same_bytes(a, b) -> str:
    """'' when every tensor of the two batches has the same dtype, shape and bytes."""
    d = batch_diff(a, b) if a.keys() and all(
        not torch.is_floating_point(a[k]) or not torch.isnan(a[k]).any() for k in a.keys()) else ""
    if d:
        return d
    for k in a.keys():
        x, y = a[k], b[k]
        if x.dtype != y.dtype or x.shape != y.shape or \
                x.numpy().tobytes() != y.numpy().tobytes():
            return f"{k}: bytes differ"
    return ""


@st.composite
def runs(draw):
    """Three batches of one random schema (any record dtype in the extra key)."""
    names = draw(st.lists(st.sampled_from(sorted(KEYS)), min_size=1, max_size=7, unique=True))
    dtypes = {k: draw(st.sampled_from(KEYS[k][0])) for k in names}
    extra = draw(st.sampled_from(ALL_DTYPES))
    k = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    out = []
    for _ in range(3):
        batch = []
        for _ in range(draw(st.integers(1, 7))):
            n, e = draw(st.integers(0, 3)), draw(st.integers(0, 6))  # empty and one-node graphs
            s = {}
            for name in names:
                shape = KEYS[name][1](n, e, k)
                arr = rng.integers(0, max(n, 1), size=shape) if "index" in name or \
                    name == "face" else rng.normal(size=shape) * 50
                s[name] = np.asarray(arr).astype(dtypes[name])
            s["z_extra"] = (rng.normal(size=(n, 2)) * 100).astype(extra)
            batch.append(s)
        out.append(batch)
    return out


@needs_kernels
@settings(max_examples=150, deadline=None)
@given(runs())
def test_compiled_and_numpy_paths_give_pyg_s_bytes(run):
    fetched = [fetched_of(b, gap) for b, gap in zip(run, (0, 8, 16))]
    compiled = ColumnCollate(pyg_sample, pyg_collate)
    got = [compiled(f) for f in fetched]
    fused = compiled._fused is not None
    with numpy_path:
        plain = ColumnCollate(pyg_sample, pyg_collate)
        ref = [plain(f) for f in fetched]
    for g, r, f in zip(got, ref, fetched):
        assert (g is None) == (r is None)
        if g is None:
            continue
        assert same_bytes(g, r) == ""
        assert same_bytes(g, slow(f)) == ""
    if got[0] is not None and "x" in run[0][0]:
        assert fused, "a batch with a node key did not set up the one-call path"


@needs_kernels
@pytest.mark.parametrize("kind,batch", [("hydragnn", 32), ("oc20", 8), ("hydragnn", 1)])
def test_synthetic_data_sets_batch_for_batch(kind, batch):
    samples = list(synth.generate(kind, 3, 0, 4 * batch))
    fetched = [fetched_of(samples[i:i + batch]) for i in range(0, 4 * batch, batch)]
    compiled = ColumnCollate(pyg_sample, pyg_collate)
    got = [compiled(f) for f in fetched]
    assert compiled._fused is not None
    with numpy_path:
        plain = ColumnCollate(pyg_sample, pyg_collate)
        ref = [plain(f) for f in fetched]
        assert plain._fused is None
    for g, r, f in zip(got, ref, fetched):
        assert same_bytes(g, r) == "" and same_bytes(g, slow(f)) == ""


@needs_kernels
def test_a_key_missing_from_one_record_falls_back_with_one_line(caplog):
    rng = np.random.default_rng(1)
    good = [{"x": rng.normal(size=(3, 2)).astype(np.float32),
             "edge_index": np.array([[0, 1], [1, 2]])} for _ in range(4)]
    odd = [dict(s) for s in good]
    del odd[2]["edge_index"]  # one record without the key
    build = BatchBuilder(pyg_sample, pyg_collate, logging.getLogger("mdloader"), "t")

    class Buffers:
        def give(self, buf):
            pass
    backend = type("B", (), {"buffers": Buffers()})()
    first = build(fetched_of(good), backend)
    assert build.columns._fused is not None
    with caplog.at_level(logging.INFO, logger="mdloader"):
        with pytest.raises(Exception):  # PyG itself cannot batch mixed key sets
            build(fetched_of(odd), backend)
    lines = [r.message for r in caplog.records if "column-wise" in r.message]
    assert len(lines) == 1 and "sample by sample" in lines[0]
    assert same_bytes(first, slow(fetched_of(good))) == ""


def test_an_unknown_dtype_code_fails_naming_the_record():
    recs = [{"x": np.ones((2, 2), np.float32)} for _ in range(3)]
    f = fetched_of(recs)
    off = int(f.offsets[1])
    f.buf[off + 16 + 1] = 200  # record 1, first entry's dtype code
    build = BatchBuilder(pyg_sample, pyg_collate)
    backend = type("B", (), {"buffers": type("P", (), {"give": lambda s, b: None})()})()
    with pytest.raises(codec.CodecError, match=r"array 'x': unknown dtype code 200"):
        build(f, backend)
    assert not build.columns.enabled


def test_unavailable_kernels_warn_once_and_batches_stay_the_same(monkeypatch, caplog):
    f = fetched_of(list(synth.generate("hydragnn", 3, 0, 8)))
    want = ColumnCollate(pyg_sample, pyg_collate)(f)
    monkeypatch.setattr(kernels, "_load", lambda: (None, "ImportError: no _kernels built"))
    kernels.reset()
    try:
        with caplog.at_level(logging.WARNING, logger="mdloader"):
            BatchBuilder(pyg_sample, pyg_collate)
            build = BatchBuilder(pyg_sample, pyg_collate)
        warned = [r.message for r in caplog.records if "compiled batch kernels" in r.message]
        assert len(warned) == 1 and "ImportError: no _kernels built" in warned[0]
        assert "\n" not in warned[0]
        got = build.columns(f)
        assert same_bytes(got, want) == "" and build.columns._fused is None
    finally:
        kernels.reset()
