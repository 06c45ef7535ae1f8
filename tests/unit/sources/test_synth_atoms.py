"""sources/synth_atoms: the three structure kinds as documented (sizes, periodicity, OC20 tags
and the fixed bottom layer), a function of (seed, index) only, and the records both front ends
read (HydraGNN's and upstream's multi-data-set layout), written to one file a kind."""

from __future__ import annotations

import numpy as np
import pytest

from mdloader_plugin.sources import synth_atoms as sa
from mdloader_plugin.sources.adios import GraphFile


def test_a_structure_is_a_function_of_seed_and_index_only():
    a, b = sa.slab(3, 5), sa.slab(3, 5)
    assert np.array_equal(a.positions, b.positions) and a.info["sid"] == "5"
    assert a.get_potential_energy() == b.get_potential_energy()
    assert not np.array_equal(sa.molecule(3, 5).positions, sa.molecule(3, 6).positions)
    assert not np.array_equal(sa.bulk(3, 5).positions, sa.bulk(4, 5).positions)


@pytest.mark.parametrize("i", range(4))
def test_slabs_are_oc20_like(i):
    a = sa.slab(0, i)
    tags, n = a.get_tags(), len(a)
    assert 13 <= n <= 20 and a.pbc.tolist() == [True, True, False]
    assert set(tags.tolist()) == {0, 1, 2} and tags[-1] == 2  # the adsorbate comes last
    surface = int((tags == 1).sum())
    assert surface in (4, 6) and int((tags == 0).sum()) == 2 * surface  # 3 layers deep
    fixed = a.constraints[0].get_indices()
    assert len(fixed) == surface and (tags[fixed] == 0).all()  # the bottom layer
    assert a.get_forces().shape == (n, 3)


@pytest.mark.parametrize("i", range(4))
def test_molecules_and_bulk_crystals(i):
    m, b = sa.molecule(0, i), sa.bulk(0, i)
    assert 2 <= len(m) <= 10 and not m.pbc.any() and m.cell.volume == 0
    assert set(m.get_chemical_symbols()) <= {"H", "C", "N", "O"}
    assert len(b) in (4, 8, 16) and b.pbc.all()
    assert len(set(b.get_chemical_symbols())) == 1 and b.get_chemical_symbols()[0] in sa.METALS


def test_an_unknown_kind_names_the_choices():
    with pytest.raises(ValueError) as e:
        sa.structures("crystals", 0, 0, 1)
    assert str(e.value) == "unknown structure kind 'crystals'; choose one of molecules, slabs, bulk"
    assert [a.info["sid"] for a in sa.structures("bulk", 0, 2, 5)] == ["2", "3", "4"]


def test_record_holds_fairchem_s_and_hydragnn_s_fields():
    a = sa.slab(1, 0)
    g = sa.record(a, 7)
    n = len(a)
    assert g["sid"].tolist() == [7] and g["natoms"].tolist() == [n]
    assert g["x"].dtype == np.float32 and g["x"][:, 0].tolist() == a.numbers.tolist()
    assert g["y"][0] == pytest.approx(a.get_potential_energy() / n, rel=1e-6)
    assert g["tags"].tolist() == a.get_tags().tolist() and g["fixed"].sum() == len(
        a.constraints[0].get_indices())
    assert g["edge_index"].shape[0] == 2 and g["cell_offsets"].shape == (g["edge_index"].shape[1],
                                                                          3)
    assert g["y_loc"].tolist() == [[0, 1]]


def test_gfm_record_is_upstream_s_layout():
    m = sa.molecule(0, 1)
    g = sa.gfm_record(m)
    n, pos = len(m), m.get_positions().astype(np.float32)
    assert g["x"].shape == (n, 7) and np.array_equal(g["x"][:, 1:4], pos)
    assert np.array_equal(g["x"][:, 4:], g["forces"]) and np.array_equal(g["pos"], pos)
    assert g["chemical_composition"].sum() == n and g["chemical_composition"].shape == (118, 1)
    assert g["chemical_composition"][0, 0] == (m.numbers == 1).sum()  # hydrogens in row 0
    assert g["graph_attr"].tolist() == [0.0, 1.0] and g["pbc"].tolist() == [0, 0, 0]
    assert not g["cell"].any() and not g["edge_shifts"].any()  # no cell: no image shifts
    assert g["energy_per_atom"][0, 0] == pytest.approx(g["energy"][0, 0] / n)
    assert g["atomic_numbers"].shape == (n, 1) and g["atomic_numbers"].dtype == np.float32


def test_write_set_splits_and_numbers_the_structures_on(tmp_path):
    path = sa.write_set(str(tmp_path), "molecules", (3, 2, 0), seed=4)
    assert path == str(tmp_path / "molecules.bp")
    with GraphFile(path) as f:
        assert f.global_attributes()["dataset_name"] == "molecules"
        assert sorted(f.labels()) == ["trainset", "valset"]  # the empty testset left out
        train = list(f.read_block("trainset", 0, 3))
        val = list(f.read_block("valset", 0, 2))
    assert [int(s["sid"][0]) for s in train] + [int(s["sid"][0]) for s in val] == [0, 1, 2, 3, 4]
    want = sa.record(sa.molecule(4, 3), 3)
    assert all(np.array_equal(val[0][k], want[k]) for k in want)
