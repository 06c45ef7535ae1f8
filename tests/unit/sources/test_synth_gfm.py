"""``mdloader synth --kind gfm``: files in upstream HydraGNN's multi-data-set layout."""

import numpy as np
import pytest

from mdloader_plugin.cli import main
from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.sources.adios import GraphFile

KEYS = {"x", "edge_index", "edge_attr", "pos", "energy", "energy_per_atom", "forces", "y",
        "natoms", "cell", "pbc", "edge_shifts", "chemical_composition", "graph_attr",
        "atomic_numbers"}
#: What upstream's preprocessing writes (examples/*/train.py of HydraGNN main): key -> (dtype,
#: shape with n for the atoms); every key the SC26 scripts read (common_variable_names).
UPSTREAM = {"atomic_numbers": (np.float32, ("n", 1)), "energy": (np.float32, (1, 1)),
            "energy_per_atom": (np.float32, (1, 1)), "natoms": (np.int32, (1,)),
            "pos": (np.float32, ("n", 3)), "forces": (np.float32, ("n", 3)),
            "pbc": (np.int32, (3,)), "cell": (np.float32, (3, 3)),
            "chemical_composition": (np.float32, (118, 1)), "graph_attr": (np.float32, (2,))}
SC26_KEYS = {"pbc", "edge_attr", "energy_per_atom", "forces", "pos", "edge_index", "cell",
             "edge_shifts", "y", "chemical_composition", "natoms", "x", "energy", "graph_attr",
             "atomic_numbers"}


def test_gfm_files_hold_what_upstreams_scripts_read(tmp_path):
    assert main(["synth", "--kind", "gfm", "--num-graphs", "10,6", "--split", "0.8,0.1,0.1",
                 "--out", str(tmp_path)]) == 0
    for name, metal in (("ani1x", False), ("qm7x", True)):  # upstream's ids 0 and 1
        with GraphFile(tmp_path / f"{name}.bp") as f:
            attrs = f.global_attributes()
            assert attrs["dataset_name"] == name and np.asarray(attrs["pna_deg"]).sum() > 0
            info = f.info("trainset")
            assert set(info.keys) == KEYS and info.keys["edge_index"].vdim == 1
            g = f.read_block("trainset", 0, info.ndata)
            for s in g:
                n = s["x"].shape[0]
                assert s["x"].shape == (n, 7) and s["x"].dtype == np.float32
                assert np.allclose(s["x"][:, 1:4], s["pos"]) and np.allclose(s["x"][:, 4:],
                                                                            s["forces"])
                assert np.isclose(s["y"][0], s["energy"][0, 0] / n)
                assert np.array_equal(s["atomic_numbers"][:, 0], s["x"][:, 0])
                for key, (dtype, shape) in UPSTREAM.items():
                    want = tuple(n if d == "n" else d for d in shape)
                    assert s[key].dtype == dtype and s[key].shape == want, key
                assert (s["x"][:, 0].max() > 10) == metal  # molecules, then bulk crystals


def test_every_key_the_sc26_scripts_read_is_written():
    assert SC26_KEYS <= KEYS


def test_variables_compile_x_y_y_loc_as_upstreams_schema(tmp_path, capfd):
    """--variables CONFIG: x/y/y_loc as upstream's prepare_data_from_schema compiles them."""
    import json

    cfg = tmp_path / "named.json"
    cfg.write_text(json.dumps({"Variables": {
        "inputs": [{"name": "atomic_numbers", "level": "node", "dim": 1},
                   {"name": "pos", "level": "node", "dim": 3, "role": "position"}],
        "outputs": [{"name": "energy", "level": "graph", "dim": 1},
                    {"name": "forces", "level": "node", "dim": 3}]}}))
    assert main(["synth", "--kind", "gfm", "--num-graphs", "6", "--out", str(tmp_path / "d"),
                 "--variables", str(cfg)]) == 0
    with GraphFile(tmp_path / "d" / "ani1x.bp") as f:
        for s in f.read_block("trainset", 0, 6):
            n = len(s["pos"])
            assert s["x"].shape == (n, 1) and np.array_equal(s["x"], s["atomic_numbers"])
            assert s["y"].shape == (1 + 3 * n, 1) and s["y"][0, 0] == s["energy"][0, 0]
            assert np.array_equal(s["y"][1:, 0], s["forces"].reshape(-1))
            assert s["y_loc"].tolist() == [[0, 1, 1 + 3 * n]]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"Variables": {"inputs": [], "outputs": [
        {"name": "force", "level": "node", "dim": 3}]}}))
    assert main(["synth", "--kind", "gfm", "--num-graphs", "2", "--out", str(tmp_path / "e"),
                 "--variables", str(bad)]) == 2
    assert "'force' is not a key of the gfm layout" in capfd.readouterr().err


def test_names_must_match_the_counts(tmp_path):
    import argparse

    from mdloader_plugin.cli.synth import run_gfm

    args = argparse.Namespace(kind="gfm", num_graphs="4,4", names="a", split="1,0,0", seed=0,
                              out=str(tmp_path))
    with pytest.raises(ConfigError, match="give 2 distinct names"):
        run_gfm(args)
