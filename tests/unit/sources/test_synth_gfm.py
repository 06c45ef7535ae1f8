"""``mdloader synth --kind gfm``: files in upstream HydraGNN's multi-data-set layout."""

import numpy as np
import pytest

from mdloader_plugin.cli import main
from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.sources.adios import GraphFile

KEYS = {"x", "edge_index", "edge_attr", "pos", "energy", "energy_per_atom", "forces", "y",
        "natoms", "cell", "pbc", "edge_shifts", "chemical_composition", "graph_attr"}


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
                assert np.isclose(s["y"][0], s["energy"][0] / n)
                assert (s["x"][:, 0].max() > 10) == metal  # molecules, then bulk crystals


def test_names_must_match_the_counts(tmp_path):
    import argparse

    from mdloader_plugin.cli.synth import run_gfm

    args = argparse.Namespace(kind="gfm", num_graphs="4,4", names="a", split="1,0,0", seed=0,
                              out=str(tmp_path))
    with pytest.raises(ConfigError, match="give 2 distinct names"):
        run_gfm(args)
