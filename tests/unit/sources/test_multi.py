"""sources/multi: data-set specs as users write them, several files as one source (global ids
across files, each sample tagged with its data set's id, names), and files that cannot share a
model. (One store over several files and the pna_deg merge: tests/unit/sampling/mixes/.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mdloader_plugin.core.errors import ConfigError, DataError
from mdloader_plugin.sources import synth
from mdloader_plugin.sources.adios import GraphFile, write_graphs
from mdloader_plugin.sources.multi import ID_KEY, DatasetSpec, MultiSource, parse_specs


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """a.bp (5 graphs, dataset_name 'alpha'), b.bp (3 graphs, no attribute), wide.bp (x with 6
    columns instead of 3)."""
    d = tmp_path_factory.mktemp("multi_src")
    graphs = list(synth.generate("hydragnn", 1, 0, 8))
    write_graphs(d / "a.bp", {"trainset": graphs[:5]}, attributes={"dataset_name": "alpha"})
    write_graphs(d / "b.bp", {"trainset": graphs[5:]})
    write_graphs(d / "wide.bp", {"trainset": [{**g, "x": np.hstack([g["x"], g["x"]])}
                                              for g in graphs[:2]]})
    return {k: str(d / f"{k}.bp") for k in ("a", "b", "wide")}, graphs


def test_specs_from_strings_and_mappings(monkeypatch):
    monkeypatch.setenv("DATA", "/scratch")
    assert parse_specs(["qm=$DATA/qm.bp", "/x/oc.bp", {"path": "~/mp.bp", "weight": 2.0},
                        DatasetSpec("s.bp", "s")]) == [
        DatasetSpec("/scratch/qm.bp", "qm"), DatasetSpec("/x/oc.bp"),
        DatasetSpec(str(Path.home() / "mp.bp"), None, 2.0),
        DatasetSpec("s.bp", "s")]


@pytest.mark.parametrize("items,msg", [
    ([], "no data set given; list at least one file"),
    ([{"name": "qm"}], "data set {'name': 'qm'} has no 'path'; give {name, path}"),
    ([{"path": "a.bp", "ratio": 1}], "data set {'path': 'a.bp', 'ratio': 1}: unknown key "
                                     "'ratio' (keys: path, name, weight)"),
])
def test_bad_specs_are_one_line(items, msg):
    with pytest.raises(ConfigError) as e:
        parse_specs(items)
    assert str(e.value) == msg


def test_two_files_are_one_source_with_global_ids(files):
    paths, graphs = files
    with GraphFile(paths["a"]) as f:
        keys = list(f.info("trainset").keys)
    with MultiSource(parse_specs([paths["a"], f"bee={paths['b']}"])) as src:
        assert src.names == ["alpha", "bee"]  # the file's attribute, then the given name
        assert src.num_samples == 8 and src.starts.tolist() == [0, 5, 8]
        assert src.sizes.tolist() == [5, 3] and src.dropped == {}
        assert src.keys == keys
        assert src.pieces(3, 7) == [(0, 3, 5), (1, 0, 2)]
        assert src.pieces(5, 8) == [(1, 0, 3)] and src.pieces(2, 2) == []
        samples, nread = src.read_range(3, 7)
        attrs = src.attributes()
    assert nread > 0 and [s[ID_KEY].tolist() for s in samples] == [[[0]], [[0]], [[1]], [[1]]]
    assert all(s[ID_KEY].dtype == np.int64 for s in samples)
    for got, want in zip(samples, graphs[3:7]):
        assert all(np.array_equal(got[k], want[k]) for k in want)
    assert attrs == {"dataset_names": ["alpha", "bee"], "dataset_sizes": [5, 3],
                     "total_ndata": 8}  # no pna_deg: the files have none


def test_a_file_without_a_name_is_named_by_its_stem(files):
    paths, _ = files
    with MultiSource([DatasetSpec(paths["b"]), DatasetSpec(paths["a"], "other")]) as src:
        assert src.names == ["b", "other"]


def test_a_key_of_another_per_graph_shape_cannot_be_combined(files):
    paths, _ = files
    with pytest.raises(DataError) as e:
        MultiSource([DatasetSpec(paths["a"]), DatasetSpec(paths["wide"])])
    assert str(e.value) == (f"key 'x' has per-graph shape [*, 3] in {paths['a']} but [*, 6] in "
                            f"{paths['wide']}; the files cannot share a model")


def test_only_the_keys_asked_for_are_read(files):
    paths, graphs = files
    with MultiSource(parse_specs([paths["a"], paths["b"]]), keys=["y", "x"]) as src:
        assert src.keys == ["y", "x"]
        (s,), _ = src.read_range(6, 7)
    assert set(s) == {"y", "x", ID_KEY} and np.array_equal(s["y"], graphs[6]["y"])
