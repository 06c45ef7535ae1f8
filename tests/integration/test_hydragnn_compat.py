"""HydraGNN 3.0 and 5.0 side by side, single process: upstream's config vocabulary, precision,
targets rebuilt as upstream's reader does, PNA-family/MACE statistics from the file, string keys,
batch-capped epochs, the version checks (multi-rank training on both: test_hydragnn5_mpi.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from mdloader_plugin.batching.pyg import ColumnCollate
from mdloader_plugin.core.epochlog import parse_epoch_lines
from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.integrations.hydragnn import compat, config, epochs, graphs
from mdloader_plugin.sources import synth
from test_hydragnn import DEMO, _Loader, hydragnn_log, small_file  # noqa: F401 (fixture)


def _cfg(tmp_path, edit) -> str:
    cfg = config.read_file(DEMO)
    edit(cfg)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cfg))
    return path


def _arch(cfg):
    return cfg["NeuralNetwork"]["Architecture"]


# -- vocabulary -----------------------------------------------------------------------------------
def test_mpnn_type_is_accepted_and_model_type_renamed(tmp_path):
    assert config.load(DEMO)["NeuralNetwork"]["Architecture"]["mpnn_type"] == "GIN"
    old = config.load(_cfg(tmp_path, lambda c: _arch(c).update(model_type=_arch(c).pop(
        "mpnn_type"))))
    assert _arch(old)["mpnn_type"] == "GIN" and "model_type" not in _arch(old)
    same = config.load(_cfg(tmp_path, lambda c: _arch(c).update(model_type="GIN")))
    assert _arch(same)["mpnn_type"] == "GIN"


def test_inconsistent_vocabularies_are_one_line_naming_both_keys(tmp_path):
    with pytest.raises(ConfigError) as err:
        config.load(_cfg(tmp_path, lambda c: _arch(c).update(model_type="PNA")))
    msg = str(err.value)
    assert "\n" not in msg and "model_type: 'PNA'" in msg and "mpnn_type: 'GIN'" in msg
    with pytest.raises(ConfigError, match="Architecture.mpnn_type is missing"):
        config.load(_cfg(tmp_path, lambda c: _arch(c).pop("mpnn_type")))


@pytest.mark.parametrize("ver, key", [("3.0", "model_type"), ("5.0", "mpnn_type")])
def test_upstream_config_uses_the_versions_key(ver, key):
    cfg = compat.upstream_config(config.load(DEMO), ver)
    assert _arch(cfg)[key] == "GIN"


@pytest.mark.parametrize("given, want", [("fp64", "fp64"), ("double", "fp64"),
                                         ("bfloat16", "bf16"), ("FP32", "fp32")])
def test_precision_takes_upstreams_names(given, want):
    cfg = config.load(DEMO, [f"NeuralNetwork.Training.precision={given}"])
    assert cfg["NeuralNetwork"]["Training"]["precision"] == want


def test_unknown_precision_is_one_line():
    with pytest.raises(ConfigError, match="precision: 'fp16' is not one HydraGNN allows; "
                                          "choose fp32, fp64 or bf16"):
        config.load(DEMO, ["NeuralNetwork.Training.precision=fp16"])


# -- what each version can honour ------------------------------------------------------------------
def test_precision_and_grad_energy_pass_through_on_5_only():
    cfg = config.load(DEMO, ["NeuralNetwork.Training.precision=fp64",
                             "NeuralNetwork.Architecture.enable_interatomic_potential=true"])
    assert compat.train_kwargs(cfg, "5.0") == {"compute_grad_energy": True, "precision": "fp64"}
    assert compat.train_kwargs(config.load(DEMO), "5.0") == {"compute_grad_energy": False,
                                                              "precision": "fp32"}
    assert compat.train_kwargs(cfg, "3.0") == {}
    assert compat.param_dtype(cfg) == torch.float64
    compat.check_config(cfg, "5.0")
    with pytest.raises(ConfigError, match="precision: fp64 needs HydraGNN 5.0"):
        compat.check_config(cfg, "3.0")


def test_multibranch_heads_count_branches_and_tell_ddp_on_5_only():
    from mpirun import ROOT

    multi = config.load(ROOT / "recipes" / "hydragnn" / "multibranch.yaml")
    assert compat.num_branches(multi) == 2 and compat.num_branches(config.load(DEMO)) == 1
    assert compat.ddp_kwargs(multi) == {"find_unused_parameters": True}
    assert compat.ddp_kwargs(config.load(DEMO)) == {}
    compat.check_config(multi, "5.0")
    with pytest.raises(ConfigError, match="several branches .multibranch. needs HydraGNN 5.0"):
        compat.check_config(multi, "3.0")


@pytest.mark.parametrize("override, words", [
    ("NeuralNetwork.Architecture.enable_interatomic_potential=true", "needs HydraGNN 5.0"),
    ("NeuralNetwork.Variables_of_interest.denormalize_output=true", "denormalize_output"),
    ("NeuralNetwork.Training.continue=1", "startfrom"),
])
def test_options_that_cannot_be_honoured_are_one_line(override, words):
    with pytest.raises(ConfigError) as err:
        compat.check_config(config.load(DEMO, [override]), "3.0")
    assert words in str(err.value) and "\n" not in str(err.value)


def test_installed_version_is_recognised_and_install_message_gives_5_route(monkeypatch):
    assert compat.version() == "3.0"  # this process imports the venv's pip-installed 3.0
    import importlib

    real = importlib.import_module
    monkeypatch.setattr(importlib, "import_module", lambda n, *a: (_ for _ in ()).throw(
        ImportError("No module named 'hydragnn'")) if n == "hydragnn" else real(n, *a))
    with pytest.raises(ConfigError) as err:
        compat.require_hydragnn()
    assert "git clone --branch v5.0" in str(err.value) and "torch-scatter" in str(err.value)


def test_unsupported_layout_is_refused(monkeypatch):
    monkeypatch.setattr(compat, "_has", lambda module, name=None: False)
    with pytest.raises(ConfigError, match="none of 3.0, 5.0, main and main527"):
        compat.version()


def test_max_num_batch_applies_to_5_only(monkeypatch):
    monkeypatch.setenv("HYDRAGNN_MAX_NUM_BATCH", "2")
    assert compat.max_batches("5.0") == 2 and compat.max_batches("3.0") is None
    monkeypatch.delenv("HYDRAGNN_MAX_NUM_BATCH")
    assert compat.max_batches("5.0") is None


def test_capped_epoch_still_writes_its_line(tmp_path):
    from mpi4py import MPI

    with hydragnn_log(tmp_path / "run.log"):
        timed = epochs.TimedLoader(_Loader(), MPI.COMM_SELF, run="t", loader_name="mdloader",
                                   max_batches=2)
        for _ in range(2):
            assert [b.num_graphs for b in timed] == [4, 4]
    recs = parse_epoch_lines((tmp_path / "run.log").read_text().splitlines())
    assert [(r["epoch"], r["steps"], r["samples"]) for r in recs] == [(0, 2, 8), (1, 2, 8)]


# -- targets ------------------------------------------------------------------------------------
def _two_feature_graphs(n=6):
    out = []
    for g in synth.generate("hydragnn", 4, 0, n):
        g = dict(g)
        g["y"] = np.array([g["y"][0], 10.0 + g["y"][0]], dtype=np.float32)  # two graph features
        g["y_loc"] = np.array([[0, 2]], dtype=np.int64)
        out.append(g)
    return out


def test_graph_head_picks_its_feature_not_the_whole_y():
    g = _two_feature_graphs(1)[0]
    heads = graphs.Heads(["graph"], [1], [1, 1], [1, 1, 1])
    d = graphs.make_to_sample([0, 1, 2], None, heads)(g)
    assert d.y.tolist() == [[pytest.approx(float(g["y"][1]))]]
    assert d.y_loc.tolist() == [[0, 1]]


def test_node_head_rebuilds_y_and_y_loc_from_x():
    g = next(synth.generate("hydragnn", 4, 0, 1))
    heads = graphs.Heads(["graph", "node"], [0, 2], [1], [1, 1, 1])
    d = graphs.make_to_sample([0, 1], None, heads)(g)
    n = g["x"].shape[0]
    assert d.y_loc.tolist() == [[0, 1, 1 + n]]
    np.testing.assert_array_equal(d.y[1:, 0].numpy(), g["x"][:, 2])
    assert d.x.shape == (n, 2)  # input features selected after the targets were taken


def test_heads_from_config_reads_the_dataset_dims_and_upstream_var_config():
    cfg = config.load(DEMO)
    h = graphs.heads_from_config(cfg)
    assert h.spec == [("graph", 0, 1)] and h.graph_only
    cfg["NeuralNetwork"]["Variables_of_interest"]["type"] = ["node"]
    assert graphs.heads_from_config(cfg).spec == [("node", 0, 1)]


def test_column_wise_batch_equals_per_graph_batch_with_heads():
    from pyg_equal import batch_diff
    from unit.batching.test_pyg import fetched_of, slow

    from mdloader_plugin.batching.pyg import pyg_collate

    fetched = fetched_of(_two_feature_graphs(5))
    for heads in (graphs.Heads(["graph", "graph"], [1, 0], [1, 1], [1, 1, 1]),
                  graphs.Heads(["graph", "node"], [1, 0], [1, 1], [1, 1, 1])):
        t = graphs.make_to_sample([0, 2], (-3.0, 7.5), heads)
        cc = ColumnCollate(t, pyg_collate)
        got = cc(fetched)
        if heads.graph_only:
            assert got is not None and batch_diff(got, slow(fetched, t)) == ""
        else:
            assert got is None and not cc.enabled  # node heads: the per-graph path


def test_string_keys_come_back_as_str():
    g = dict(next(synth.generate("hydragnn", 4, 0, 1)))
    g["smiles"] = np.frombuffer("CCO".encode(), dtype=np.uint8)
    d = graphs.make_to_sample(None, None)(g)
    assert d.smiles == "CCO"


def test_fp64_runs_keep_float64():
    g = dict(next(synth.generate("hydragnn", 4, 0, 1)))
    g["pos"] = g["pos"].astype(np.float64) + 1e-9
    d = graphs.make_to_sample(None, None, dtype=np.float64)(g)
    assert d.pos.dtype == torch.float64 and d.x.dtype == torch.float64
    np.testing.assert_array_equal(d.pos.numpy(), g["pos"])
    assert graphs.make_to_sample(None, None)(g).pos.dtype == torch.float32


# -- statistics update_config needs ----------------------------------------------------------
@pytest.mark.parametrize("mpnn", ["PNA", "PNAPlus", "PNAEq"])
def test_pna_family_gets_the_whole_train_sets_histogram(small_file, mpnn):
    from mpi4py import MPI

    stats = graphs.arch_stats(mpnn, small_file, MPI.COMM_SELF)
    nodes = sum(g["x"].shape[0] for g in synth.generate("hydragnn", 3, 0, 40))
    assert sum(stats["pna_deg"]) == nodes  # every node of every train graph, not graph 0's


def test_mace_avg_num_neighbors_from_the_file(small_file):
    from mpi4py import MPI

    gs = list(synth.generate("hydragnn", 3, 0, 40))
    want = sum(g["edge_index"].shape[1] for g in gs) / sum(g["x"].shape[0] for g in gs)
    got = graphs.arch_stats("MACE", small_file, MPI.COMM_SELF)["avg_num_neighbors"]
    assert got == pytest.approx(want)
    assert graphs.arch_stats("GIN", small_file, MPI.COMM_SELF) == {}


def test_config_view_dataset_refuses_to_be_iterated(small_file):
    s0, n = graphs.first_sample(small_file, "trainset", graphs.make_to_sample(None, None))
    view = graphs.ConfigView(small_file, "trainset", s0, n, avg_num_neighbors=2.5)
    assert view.dataset.avg_num_neighbors == 2.5
    with pytest.raises(RuntimeError, match="did not supply"):
        list(view.dataset)


def test_mlip_synthetic_forces_are_minus_the_energy_gradient():
    g = next(synth.generate("mlip", 1, 0, 1))
    pos = g["pos"].astype(np.float64)
    s, d = g["edge_index"]

    def pair_energy(p):
        return 0.5 * np.exp(-np.linalg.norm(p[s] - p[d], axis=1)).sum()

    h, moved = 1e-6, pos.copy()
    moved[3, 2] += h
    assert (pair_energy(pos) - pair_energy(moved)) / h == pytest.approx(g["forces"][3, 2],
                                                                         rel=1e-3)
    assert g["energy"][0] == pytest.approx(pair_energy(pos), rel=1e-6)


# -- continue / startfrom --------------------------------------------------------------------
class _Sampler:
    def __init__(self):
        self.seen = []

    def set_epoch(self, epoch):
        self.seen.append(epoch)

    def __len__(self):
        return 3


def test_continued_run_shifts_the_train_loaders_epochs():
    from mpi4py import MPI

    loader = _Loader()
    loader.sampler = _Sampler()
    timed = epochs.TimedLoader(loader, MPI.COMM_SELF, run="t", loader_name="mdloader")
    timed.sampler.set_epoch(0)
    timed.epoch_offset = 4  # the earlier run finished its epochs 0..3
    timed.sampler.set_epoch(0)
    timed.sampler.set_epoch(1)
    assert loader.sampler.seen == [0, 4, 5] and len(timed.sampler) == 3


def test_continue_from_a_run_without_checkpoint_is_one_line(tmp_path, monkeypatch):
    from mdloader_plugin.integrations.hydragnn import resume

    monkeypatch.chdir(tmp_path)
    cfg = config.load(DEMO, ["NeuralNetwork.Training.continue=1",
                             "NeuralNetwork.Training.startfrom=old"])
    with pytest.raises(ConfigError, match="startfrom: 'old' has no checkpoint"):
        resume.load(cfg, None, None, None)
    resume.load(config.load(DEMO), None, None, None)  # no continue: nothing to do
