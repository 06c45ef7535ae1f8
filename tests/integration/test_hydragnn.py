"""HydraGNN integration, single process: config switch, samples, update_config stand-ins,
the per-sample baseline dataset and the epoch lines (multi-rank training: test_hydragnn_mpi.py)."""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from mdloader_plugin.core.epochlog import parse_epoch_lines
from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.integrations.hydragnn import baseline, config, epochs, graphs
from mdloader_plugin.sources import synth
from mdloader_plugin.sources.adios import GraphFile, write_graphs

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "recipes" / "hydragnn" / "demo.yaml"


@pytest.fixture(scope="module")
def small_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("hyd") / "small.bp"
    g = list(synth.generate("hydragnn", 3, 0, 60))
    write_graphs(path, {"trainset": g[:40], "valset": g[40:50], "testset": g[50:]})
    return str(path)


# -- config -------------------------------------------------------------------------------------
def test_demo_recipe_loads_with_defaults():
    cfg = config.load(DEMO)
    assert cfg["loader"] == "mdloader"
    assert cfg["mdloader"]["backend"] == "auto" and cfg["mdloader"]["seed"] == cfg["seed"]
    assert cfg["hydragnn_loader"] == {"preload": False}


def test_overrides_parse_yaml_values_and_create_sections():
    cfg = config.load(DEMO, ["loader=hydragnn", "hydragnn_loader.preload=true",
                             "NeuralNetwork.Training.num_epoch=7", "mdloader.backend=collective",
                             "new.section.key=[1, 2]"])
    assert cfg["loader"] == "hydragnn" and cfg["hydragnn_loader"]["preload"] is True
    assert cfg["NeuralNetwork"]["Training"]["num_epoch"] == 7
    assert cfg["mdloader"]["backend"] == "collective" and cfg["new"]["section"]["key"] == [1, 2]


@pytest.mark.parametrize("opts,want", [
    ({}, None), ({"group_size": "auto"}, "auto"), ({"width": 4}, 4),
    ({"group_size": 2, "width": 2}, 2), ({"group_size": "all"}, None),
])
def test_group_size_and_its_ddstore_alias(opts, want):
    cfg = config.load(DEMO, [f"mdloader.{k}={v}" for k, v in opts.items()])
    assert cfg["mdloader"]["group_size"] == want


@pytest.mark.parametrize("override,words", [
    ("mdloader.group_size=-1", "mdloader.group_size must be >= 1"),
    ("mdloader.width=many", "mdloader.width: expected auto, all or a number of ranks"),
])
def test_bad_group_size_is_one_line(override, words):
    with pytest.raises(ConfigError) as err:
        config.load(DEMO, [override])
    assert "\n" not in str(err.value) and words in str(err.value)


def test_json_config_as_hydragnn_writes_it(tmp_path):
    cfg = config.read_file(DEMO)
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    assert config.load(path, ["loader=hydragnn"])["loader"] == "hydragnn"


@pytest.mark.parametrize("override, words", [
    ("loader=torch", ["loader: 'torch' is unknown", "mdloader, hydragnn"]),
    ("mdloader.backend=rdma", ["mdloader.backend: 'rdma'", "auto, onesided, collective"]),
    ("Dataset.path=3", ["Dataset.path must be a str or list or dict"]),
    ("noequals", ["expected KEY=VALUE"]),
    ("loader.x=1", ["'loader' is a value, not a section"]),
])
def test_bad_config_is_one_line_naming_the_key(override, words):
    with pytest.raises(ConfigError) as err:
        config.load(DEMO, [override])
    msg = str(err.value)
    assert "\n" not in msg and all(w in msg for w in words), msg


def test_dataset_path_as_hydragnns_mapping_of_split_files():
    """HydraGNN's own form, one file a split under its keys train/validate/test, is read as the
    file of each split; ``total`` alone is the one file of all three."""
    cfg = config.load(DEMO, ["Dataset.path={train: a.bp, validate: $HOME/b.bp, test: c.bp}"])
    home = str(Path.home())
    assert cfg["Dataset"]["path"] == {"trainset": "a.bp", "valset": f"{home}/b.bp",
                                      "testset": "c.bp"}
    assert [graphs.split_path(cfg["Dataset"]["path"], lab)
            for lab in ("trainset", "valset", "testset")] == ["a.bp", f"{home}/b.bp", "c.bp"]
    assert graphs.files_of(cfg["Dataset"]["path"]) == ["a.bp", f"{home}/b.bp", "c.bp"]
    assert config.load(DEMO, ["Dataset.path={total: x.bp}"])["Dataset"]["path"] == "x.bp"
    for bad in ("{train: a.bp, test: c.bp}", "{train: a.bp, validate: b.bp, test: [c.bp]}",
                "{total: x.bp, train: a.bp}"):
        with pytest.raises(ConfigError) as err:
            config.load(DEMO, [f"Dataset.path={bad}"])
        msg = str(err.value)
        assert "\n" not in msg and "Dataset.path: a mapping needs the files of train, " \
            "validate and test" in msg, msg


def test_missing_required_key_and_unreadable_file(tmp_path):
    cfg = config.read_file(DEMO)
    del cfg["NeuralNetwork"]["Training"]["batch_size"]
    (tmp_path / "c.yaml").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match="NeuralNetwork.Training.batch_size is missing"):
        config.load(tmp_path / "c.yaml")
    with pytest.raises(ConfigError, match="cannot read"):
        config.load(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("a: [1,\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        config.load(tmp_path / "bad.yaml")


# -- samples ------------------------------------------------------------------------------------
def test_to_sample_selects_columns_and_scales_y():
    g = synth.molecule(0, 5)
    d = graphs.make_to_sample([0, 2], (-1000.0, 0.0))(g)
    assert d.x.shape == (g["x"].shape[0], 2) and d.x.dtype == torch.float32
    np.testing.assert_array_equal(d.x.numpy(), g["x"][:, [0, 2]])
    assert d.y.shape == (1, 1)
    assert d.y.item() == pytest.approx((float(g["y"][0]) + 1000.0) / 1000.0, rel=1e-6)
    assert d.edge_index.dtype == torch.int64 and d.num_nodes == g["x"].shape[0]
    assert torch.equal(d.y_loc, torch.tensor([[0, 1]]))


def test_config_view_yields_file_node_counts_and_can_be_abandoned(small_file):
    to_sample = graphs.make_to_sample(None, None)
    s0, n = graphs.first_sample(small_file, "trainset", to_sample)
    view = graphs.ConfigView(small_file, "trainset", s0, n)
    with GraphFile(small_file) as f:
        want = f.read_extents("trainset", "x", 0, 40)[0].tolist()
    assert [d.num_nodes for d in view] == want
    it = iter(view)
    next(it)
    del it  # abandoned: nothing to drain, no collective involved
    assert view.dataset[0].num_nodes == want[0] and len(view) == 40
    assert not hasattr(view.dataset, "pna_deg")
    assert graphs.ConfigView(small_file, "trainset", s0, n, [1, 2]).dataset.pna_deg == [1, 2]


def test_degree_histogram_matches_torch_geometric(small_file):
    from mpi4py import MPI
    from torch_geometric.utils import degree

    want = np.zeros(64, dtype=np.int64)
    for g in synth.generate("hydragnn", 3, 0, 40):
        d = degree(torch.from_numpy(g["edge_index"][1]), num_nodes=g["x"].shape[0],
                   dtype=torch.long)
        h = np.bincount(d.numpy())
        want[:len(h)] += h
    got = graphs.pna_degree(small_file, MPI.COMM_SELF)
    assert got == want[:len(got)].tolist() and want[len(got):].sum() == 0


def test_y_minmax(small_file):
    ys = [float(g["y"][0]) for g in synth.generate("hydragnn", 3, 0, 40)]
    assert graphs.y_minmax(small_file) == pytest.approx((min(ys), max(ys)))


# -- baseline dataset ---------------------------------------------------------------------------
@pytest.mark.parametrize("preload", [False, True])
def test_baseline_dataset_reads_each_graph_like_the_file(small_file, preload):
    to_sample = graphs.make_to_sample(None, None)
    ds = baseline.AdiosGraphDataset(small_file, "valset", to_sample, preload=preload)
    with GraphFile(small_file) as f:
        block = f.read_block("valset", 0, 10)
    assert len(ds) == 10
    for i in (0, 3, 9):
        got, want = ds[i], block.sample(i)
        for key, arr in want.items():
            np.testing.assert_array_equal(getattr(got, key).numpy().reshape(arr.shape), arr)
    ds.close()


def test_baseline_missing_label_is_one_line(tmp_path):
    path = tmp_path / "only_train.bp"
    write_graphs(path, {"trainset": list(synth.generate("hydragnn", 0, 0, 5))})
    with pytest.raises(Exception) as err:
        baseline.AdiosGraphDataset(str(path), "valset", graphs.make_to_sample(None, None))
    assert "label 'valset' not found" in str(err.value)


# -- epoch lines --------------------------------------------------------------------------------
class _Batch:
    def __init__(self, n):
        self.num_graphs = n


class _Loader:
    dataset = ["first"]
    sampler = None
    backend_name = "collective"

    def __iter__(self):
        return iter([_Batch(4), _Batch(4), _Batch(2)])

    def __len__(self):
        return 3


@contextlib.contextmanager
def hydragnn_log(path):
    """HydraGNN's logger written to `path` for the duration."""
    log = logging.getLogger("hydragnn")
    handler = logging.FileHandler(path)
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        yield
    finally:
        log.removeHandler(handler)
        handler.close()


def test_timed_loader_logs_one_parsable_line_per_epoch(tmp_path):
    from mpi4py import MPI

    with hydragnn_log(tmp_path / "run.log"):
        timed = epochs.TimedLoader(_Loader(), MPI.COMM_SELF, run="t", loader_name="mdloader")
        assert timed.dataset[0] == "first" and timed.sampler is None and len(timed) == 3
        for _ in range(2):
            assert [b.num_graphs for b in timed] == [4, 4, 2]
    recs = parse_epoch_lines((tmp_path / "run.log").read_text().splitlines())
    assert [r["epoch"] for r in recs] == [0, 1]
    assert all(r["samples"] == 10 and r["steps"] == 3 and r["backend"] == "collective"
               and r["loader"] == "mdloader" and r["wall_s"] >= r["data_wait_s"] >= 0
               for r in recs)
