"""The ADIOS2 layout contract with HydraGNN, both ways.

Reading: files written here with plain ADIOS2 calls, the way HydraGNN 3.0's ``AdiosWriter.save``
does (keys in sorted order, HydraGNN's varying-dimension rule, int64 ``variable_count`` and
global ``variable_offset``, ``np.array`` attributes, blocks at per-rank offsets), never through
MDLoader's writer, read back exactly by ``GraphFile``. Writing: files from ``write_graphs`` /
``GraphWriter`` have exactly the names, dtypes, offsets and ``variable_dim`` HydraGNN's
``AdiosDataset`` reads (its Shape-string parsing and per-sample box reads are replayed here).
"""

from __future__ import annotations

import adios2
import numpy as np
import pytest

from mdloader_plugin.sources.adios import GraphFile
from mdloader_plugin.sources.writer import GraphWriter, write_graphs


def graphs_all_dtypes(n_graphs: int = 9, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """Every dtype HydraGNN's reader maps (float32, float64, int32, int64), a fixed-shape
    [3,3] cell, per-graph scalars, a graph with no edges and a single-node graph."""
    rng = np.random.default_rng(seed)
    out = []
    for g in range(n_graphs):
        n = {1: 1, 4: 6}.get(g, int(rng.integers(2, 9)))
        e = 0 if g in (1, 4) else int(rng.integers(1, 3 * n))
        out.append({
            "x": rng.normal(size=(n, 3)).astype(np.float32),
            "pos": rng.normal(size=(n, 3)),  # float64
            "atomic_numbers": rng.integers(1, 90, size=n).astype(np.int32),
            "edge_index": rng.integers(0, n, size=(2, e)).astype(np.int64),
            "edge_attr": rng.normal(size=(e, 1)).astype(np.float32),
            "cell": rng.normal(size=(3, 3)).astype(np.float32),
            "y": np.array([rng.normal()]),  # float64 per-graph scalar
            "y_loc": np.array([[0, 1]], dtype=np.int64),
            "natoms": np.array([n], dtype=np.int32),
        })
    return out


def hydragnn_vdim(arrs):
    m0, m1 = np.min([a.shape for a in arrs], axis=0), np.max([a.shape for a in arrs], axis=0)
    v = [i for i in range(len(m0)) if m0[i] != m1[i]]
    assert len(v) < 2
    return v[0] if v else 0


def write_like_hydragnn(path, datasets: dict, attributes: dict, ranks: int = 2) -> None:
    """HydraGNN's AdiosWriter.save as `ranks` writers would do it, with today's ADIOS2 API:
    each simulated rank writes its share of graphs as one block at its global offset."""
    with adios2.Stream(str(path), "w") as out:
        total = 0
        for label, graphs in datasets.items():
            shares = np.array_split(np.arange(len(graphs)), ranks)
            out.write_attribute(f"{label}/ndata", np.array(len(graphs)))
            out.write_attribute(f"{label}/keys", list(graphs[0]))
            total += len(graphs)
            for k in sorted(graphs[0]):
                arrs = [g[k] for g in graphs]
                vdim = hydragnn_vdim(arrs)
                gshape = list(np.concatenate(arrs, axis=vdim).shape)
                vcount = np.array([a.shape[vdim] for a in arrs])
                voff = np.concatenate([[0], np.cumsum(vcount)[:-1]])
                for share in shares:
                    val = np.ascontiguousarray(np.concatenate([arrs[i] for i in share], axis=vdim))
                    start = [0] * val.ndim
                    start[vdim] = int(voff[share[0]])
                    if val.shape[vdim]:
                        out.write(f"{label}/{k}", val, gshape, start, list(val.shape))
                    lo, m = int(share[0]), len(share)
                    out.write(f"{label}/{k}/variable_count", vcount[share], [len(graphs)], [lo],
                              [m])
                    out.write(f"{label}/{k}/variable_offset", voff[share], [len(graphs)], [lo],
                              [m])
                out.write_attribute(f"{label}/{k}/variable_dim", np.array(vdim))
        out.write_attribute("total_ndata", np.array(total))
        for name, val in attributes.items():
            out.write_attribute(name, val)


ATTRS = {"pna_deg": np.array([0, 3, 7, 2], dtype=np.int64),
         "minmax_node_feature": np.arange(6.0), "minmax_graph_feature": np.arange(2.0),
         "dataset_name": "layout-test"}


def assert_same(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want)
    for k in want:
        assert got[k].dtype == want[k].dtype, k
        assert got[k].shape == want[k].shape, k
        assert np.array_equal(got[k], want[k]), k


def test_reads_hydragnn_written_file(tmp_path):
    train, val = graphs_all_dtypes(9, 0), graphs_all_dtypes(4, 1)
    path = tmp_path / "hydra.bp"
    write_like_hydragnn(path, {"trainset": train, "valset": val}, ATTRS)
    with GraphFile(path) as f:
        assert f.labels() == ["trainset", "valset"]
        info = f.info("trainset")
        assert info.ndata == 9 and info.keys["edge_index"].vdim == 1
        assert info.keys["cell"].vdim == 0  # fixed [3,3]: HydraGNN concatenates along dim 0
        for lo, hi in ((0, 9), (0, 1), (1, 2), (3, 7), (8, 9)):
            block = f.read_block("trainset", lo, hi, info=info)
            for i, g in enumerate(block):
                assert_same(g, train[lo + i])
        for i, g in enumerate(f.read_block("valset", 0, 4)):
            assert_same(g, val[i])
        attrs = f.global_attributes()
    assert attrs["total_ndata"] == 13 and attrs["dataset_name"] == "layout-test"
    for name in ("pna_deg", "minmax_node_feature", "minmax_graph_feature"):
        assert np.array_equal(attrs[name], ATTRS[name])


def test_reads_a_subset_of_keys(tmp_path):
    train = graphs_all_dtypes(5)
    path = tmp_path / "hydra.bp"
    write_like_hydragnn(path, {"trainset": train}, {})
    with GraphFile(path) as f:
        block = f.read_block("trainset", 1, 4, keys=["edge_index", "cell"])
    for i, g in enumerate(block):
        assert_same(g, {k: train[1 + i][k] for k in ("edge_index", "cell")})


def hydragnn_get(reader, label: str, idx: int) -> dict:
    """HydraGNN 3.0 AdiosDataset.__init__ + get() for one sample, with today's FileReader."""
    variables = reader.available_variables()
    keys = reader.read_attribute_string(f"{label}/keys")
    out = {}
    for k in keys:
        count_all = reader.read(f"{label}/{k}/variable_count")
        offset_all = reader.read(f"{label}/{k}/variable_offset")
        vdim = reader.read_attribute(f"{label}/{k}/variable_dim").item()
        ishape = [int(x.strip(",")) for x in variables[f"{label}/{k}"]["Shape"].strip().split()]
        start, count = [0] * len(ishape), ishape
        start[vdim], count[vdim] = int(offset_all[idx]), int(count_all[idx])
        assert variables[f"{label}/{k}"]["Type"] in ("double", "float", "int32_t", "int64_t")
        out[k] = reader.read(f"{label}/{k}", start, count) if count[vdim] else None
    return out


@pytest.mark.parametrize("chunk_bytes", [64 << 20, 40])
def test_written_file_follows_hydragnn_layout(tmp_path, chunk_bytes):
    train, test = graphs_all_dtypes(9, 2), graphs_all_dtypes(3, 3)
    path = tmp_path / "ours.bp"
    with GraphWriter(path, ATTRS, chunk_bytes=chunk_bytes) as w:  # 40 B: many blocks a key
        for g in train:
            w.add("trainset", g)
        for g in test:
            w.add("testset", g)
    r = adios2.FileReader(str(path))
    attrs, variables = r.available_attributes(), r.available_variables()
    keys = list(train[0])
    expect_attrs = {"total_ndata", "trainset/ndata", "trainset/keys", "testset/ndata",
                    "testset/keys", *ATTRS}
    expect_attrs |= {f"{lab}/{k}/variable_dim" for lab in ("trainset", "testset") for k in keys}
    assert set(attrs) == expect_attrs
    assert set(variables) == {f"{lab}/{k}{s}" for lab in ("trainset", "testset") for k in keys
                              for s in ("", "/variable_count", "/variable_offset")}
    assert r.read_attribute("trainset/ndata").dtype == np.int64
    assert r.read_attribute("total_ndata").item() == 12
    assert r.read_attribute_string("trainset/keys") == keys
    for label, graphs in (("trainset", train), ("testset", test)):
        for k in keys:
            arrs = [g[k] for g in graphs]
            vdim = hydragnn_vdim(arrs)
            assert r.read_attribute(f"{label}/{k}/variable_dim").dtype == np.int64
            assert r.read_attribute(f"{label}/{k}/variable_dim").item() == vdim
            cnt = r.read(f"{label}/{k}/variable_count")
            off = r.read(f"{label}/{k}/variable_offset")
            assert cnt.dtype == off.dtype == np.int64
            assert np.array_equal(cnt, [a.shape[vdim] for a in arrs])
            assert np.array_equal(off, np.concatenate([[0], np.cumsum(cnt)[:-1]]))  # global
            whole = np.concatenate(arrs, axis=vdim)
            assert np.array_equal(r.read(f"{label}/{k}"), whole)
            assert r.read(f"{label}/{k}").dtype == whole.dtype
        for i, g in enumerate(graphs):
            got = hydragnn_get(r, label, i)
            for k in keys:
                if got[k] is not None:
                    assert np.array_equal(got[k], g[k]), (label, i, k)
                else:
                    assert g[k].size == 0
    r.close()


def test_write_graphs_matches_hydragnn_bytes(tmp_path):
    """The same graphs through our writer and through the HydraGNN-style writer read the same."""
    graphs = graphs_all_dtypes(7, 5)
    ours, theirs = tmp_path / "ours.bp", tmp_path / "theirs.bp"
    write_graphs(ours, {"trainset": graphs}, ATTRS)
    write_like_hydragnn(theirs, {"trainset": graphs}, ATTRS, ranks=3)
    a, b = adios2.FileReader(str(ours)), adios2.FileReader(str(theirs))
    for name, v in b.available_variables().items():
        assert a.available_variables()[name]["Shape"] == v["Shape"]
        assert a.available_variables()[name]["Type"] == v["Type"]
        assert np.array_equal(a.read(name), b.read(name)), name
    a.close()
    b.close()


def test_bool_and_scalar_values_are_stored(tmp_path):
    path = tmp_path / "b.bp"
    write_graphs(path, {"trainset": [{"pbc": np.array([[True, False, True]]), "e": np.float64(2)},
                                     {"pbc": np.array([[False, False, True]]), "e": 3.0}]})
    with GraphFile(path) as f:
        g = f.read_block("trainset", 0, 2).sample(1)
    assert g["pbc"].dtype == np.uint8 and g["pbc"].tolist() == [[0, 0, 1]]
    assert g["e"].tolist() == [3.0]


def test_hydragnn_own_writer_and_reader(tmp_path, env):
    """HydraGNN 3.0's AdiosWriter.save / AdiosDataset.get, run through a shim of the ADIOS2
    names they call (see tests/common/hydragnn_adios_shim.py), against MDLoader's reader and
    writer."""
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("hydragnn")
    shim = Path(__file__).resolve().parents[3] / "tests" / "common" / "hydragnn_adios_shim.py"
    r = subprocess.run([sys.executable, str(shim), str(tmp_path / "hydra.bp"),
                        str(tmp_path / "ours.bp")], capture_output=True, text=True, timeout=180,
                       env=env)
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-3000:]
