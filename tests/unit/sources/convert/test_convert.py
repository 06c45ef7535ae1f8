"""Converters: ASE db/aselmdb, OC20 LMDB, extxyz, PyG .pt and g2 round-trip values exactly."""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pytest

from mdloader_plugin.core.errors import DataError
from mdloader_plugin.sources import convert
from mdloader_plugin.sources.adios import GraphFile
from mdloader_plugin.sources.graph import radius_graph


def slabs(n: int = 5):
    """Small periodic Pt slabs with an O adsorbate: tags, FixAtoms, energy, forces."""
    from ase.build import add_adsorbate, fcc111
    from ase.calculators.singlepoint import SinglePointCalculator
    from ase.constraints import FixAtoms

    rng = np.random.default_rng(3)
    out = []
    for i in range(n):
        a = fcc111("Pt", (2 + i % 2, 2, 3), vacuum=6.0)
        add_adsorbate(a, "O", 1.8, "fcc")
        a.positions += rng.normal(0, 0.02, a.positions.shape)
        k = len(a) - 1
        a.set_tags([0] * (k // 3) + [1] * (k - k // 3) + [2])
        a.set_constraint(FixAtoms(indices=range(k // 3)))
        a.calc = SinglePointCalculator(a, energy=-10.0 - i * 0.37,
                                       forces=rng.normal(size=(len(a), 3)))
        out.append(a)
    return out


def read_all(path, label="trainset"):
    with GraphFile(path) as f:
        return list(f.read_block(label, 0, f.info(label).ndata))


def check_atoms(graph, atoms, radius=6.0, max_neighbours=50):
    f32 = np.float32
    assert np.array_equal(graph["pos"], atoms.positions.astype(f32))
    assert np.array_equal(graph["atomic_numbers"], atoms.numbers)
    assert np.array_equal(graph["cell"], atoms.cell.array.astype(f32)[None])
    assert np.array_equal(graph["pbc"], atoms.pbc[None].astype(np.uint8))
    assert np.array_equal(graph["natoms"], [len(atoms)])
    assert np.array_equal(graph["tags"], atoms.get_tags())
    fixed = np.zeros(len(atoms), int)
    fixed[atoms.constraints[0].get_indices()] = 1
    assert np.array_equal(graph["fixed"], fixed)
    assert np.array_equal(graph["energy"], [f32(atoms.get_potential_energy())])
    assert np.array_equal(graph["forces"], atoms.get_forces(apply_constraint=False).astype(f32))
    ei, offs, _ = radius_graph(atoms.positions.astype(f32), radius, atoms.cell.array.astype(f32),
                               atoms.pbc, max_neighbours)
    assert np.array_equal(graph["edge_index"], ei)
    assert np.array_equal(graph["cell_offsets"], offs.astype(f32))


@pytest.mark.parametrize("ext", [".db", ".aselmdb"])
def test_asedb_roundtrip(tmp_path, ext):
    import ase.db

    structures = slabs()
    src = tmp_path / f"in{ext}"
    with ase.db.connect(str(src)) as db:
        for i, a in enumerate(structures):
            db.write(a, sid=100 + i, data={"ref": np.arange(3.0) + i})
    out = tmp_path / "out.bp"
    counts = convert.convert(str(src), str(out))
    assert counts == {"trainset": 5}
    graphs = read_all(out)
    for i, (g, a) in enumerate(zip(graphs, structures)):
        check_atoms(g, a)
        assert np.array_equal(g["sid"], [100 + i])
        assert np.array_equal(g["ref"], (np.arange(3.0) + i).astype(np.float32)[None])


def test_extxyz_roundtrip(tmp_path):
    from ase.io import write

    structures = slabs(4)
    src = tmp_path / "traj.extxyz"
    write(str(src), structures, format="extxyz")
    assert convert.detect(str(src)).count(str(src)) == 4
    out = tmp_path / "out.bp"
    convert.convert(str(src), str(out), radius=4.0, max_neighbours=12)
    from ase.io import read

    back = read(str(src), index=":")  # extxyz rounds positions in text; compare to the file
    for g, a, orig in zip(read_all(out), back, structures):
        a.set_constraint(orig.constraints)  # extxyz keeps FixAtoms as a move_mask column
        g = {k: v for k, v in g.items()}
        check_atoms(g, a, 4.0, 12)


def test_neighbours_beyond_the_cap_are_counted_or_refused(tmp_path, capsys):
    """Never silently: every neighbour --max-neighbours leaves out is counted (ASE's neighbour
    list is the independent count) and reported once; ``error`` refuses the structure."""
    from ase.io import write
    from ase.neighborlist import neighbor_list

    structures = slabs(3)
    src = tmp_path / "traj.extxyz"
    write(str(src), structures, format="extxyz")
    cap, radius = 12, 4.0
    degrees = [np.bincount(neighbor_list("i", a, radius), minlength=len(a)) for a in structures]
    beyond = [int(np.maximum(d - cap, 0).sum()) for d in degrees]
    assert sum(beyond) > 0  # the data must overflow for this test to mean anything
    convert.convert(str(src), str(tmp_path / "a.bp"), radius=radius, max_neighbours=cap)
    err = capsys.readouterr().err
    assert (f"{sum(beyond)} neighbours within {radius} A in {sum(b > 0 for b in beyond)} "
            f"structures were beyond --max-neighbours {cap} and left out") in err, err
    convert.convert(str(src), str(tmp_path / "b.bp"), radius=radius, max_neighbours=200)
    assert "beyond --max-neighbours" not in capsys.readouterr().err
    first = next(i for i, b in enumerate(beyond) if b)
    with pytest.raises(DataError) as exc:
        convert.convert(str(src), str(tmp_path / "c.bp"), radius=radius, max_neighbours=cap,
                        neighbour_overflow="error")
    most = int(degrees[first].max())
    assert (f"structure {first}: atom {int(np.argmax(degrees[first]))} has {most} neighbours "
            f"within {radius} A, above --max-neighbours {cap}") in str(exc.value)
    assert not (tmp_path / "c.bp").exists()


def lmdb_file(path, datas):
    import lmdb

    env = lmdb.open(str(path), subdir=False, map_size=1 << 26)
    with env.begin(write=True) as txn:
        for i, d in enumerate(datas):
            txn.put(str(i).encode(), pickle.dumps(d))
        txn.put(b"length", pickle.dumps(len(datas)))
    env.close()


def oc20_datas(n=6):
    import torch
    from torch_geometric.data import Data

    out = []
    for i, a in enumerate(slabs(n)):
        ei, offs, _ = radius_graph(a.positions, 5.0, a.cell.array, a.pbc, 20)
        out.append(Data(pos=torch.tensor(a.positions, dtype=torch.float32),
                        atomic_numbers=torch.tensor(a.numbers, dtype=torch.long),
                        cell=torch.tensor(a.cell.array, dtype=torch.float32)[None],
                        natoms=len(a), tags=torch.tensor(a.get_tags()),
                        fixed=torch.tensor(a.get_tags() == 0, dtype=torch.float32),
                        y=float(a.get_potential_energy()),
                        force=torch.tensor(a.get_forces(), dtype=torch.float32),
                        edge_index=torch.tensor(ei), cell_offsets=torch.tensor(offs),
                        sid=1000 + i, note="a string field"))
    return out


def test_oc20_lmdb_roundtrip(tmp_path):
    datas = oc20_datas()
    src = tmp_path / "data.lmdb"
    lmdb_file(src, datas)
    out = tmp_path / "out.bp"
    counts = convert.convert(str(src), str(out), split=(0.5, 0.5, 0.0), seed=4)
    assert counts == {"trainset": 3, "valset": 3}
    labels = convert.assign_labels(6, (0.5, 0.5, 0.0), 4)
    got = {"trainset": read_all(out, "trainset"), "valset": read_all(out, "valset")}
    seen = {"trainset": 0, "valset": 0}
    for i, d in enumerate(datas):  # graphs keep source order inside their label
        lab = ("trainset", "valset")[labels[i]]
        g = got[lab][seen[lab]]
        seen[lab] += 1
        assert np.array_equal(g["pos"], d.pos.numpy())
        assert np.array_equal(g["edge_index"], d.edge_index.numpy())  # present edges are kept
        assert np.array_equal(g["cell_offsets"], d.cell_offsets.numpy())
        assert np.array_equal(g["energy"], [np.float32(d.y)])  # y -> energy
        assert np.array_equal(g["forces"], d.force.numpy())  # force -> forces
        assert np.array_equal(g["fixed"], d.fixed.numpy())
        assert np.array_equal(g["sid"], [1000 + i]) and "note" not in g


def test_pyg_inmemory_roundtrip(tmp_path):
    import torch
    from torch_geometric.data import Data, InMemoryDataset

    rng = np.random.default_rng(0)
    datas = []
    for n in (3, 1, 7, 4):
        e = rng.integers(0, n, size=(2, 2 * n))
        datas.append(Data(x=torch.tensor(rng.normal(size=(n, 2)), dtype=torch.float32),
                          pos=torch.tensor(rng.normal(size=(n, 3)), dtype=torch.float32),
                          edge_index=torch.tensor(e), y=torch.tensor([[float(n)]])))
    src = tmp_path / "ds.pt"
    InMemoryDataset.save(datas, str(src))
    out = tmp_path / "out.bp"
    convert.convert(str(src), str(out))
    for g, d in zip(read_all(out), datas):
        assert np.array_equal(g["x"], d.x.numpy())
        assert np.array_equal(g["pos"], d.pos.numpy())
        assert np.array_equal(g["edge_index"], d.edge_index.numpy())  # local numbering kept
        assert np.array_equal(g["y"], d.y.numpy())  # PyG names are kept
        assert np.array_equal(g["natoms"], [len(d.x)])


class NotAllowed:
    """A class torch.load(weights_only=True) must refuse to build."""


def test_pyg_refuses_unsafe_pickle(tmp_path):
    import torch

    src = tmp_path / "bad.pt"
    torch.save((NotAllowed(), None), str(src))
    with pytest.raises(DataError, match="weights_only"):
        convert.convert(str(src), str(tmp_path / "o.bp"))


def test_g2_real_data(tmp_path):
    out = tmp_path / "g2.bp"
    counts = convert.convert("g2", str(out), split=(0.8, 0.1, 0.1), seed=0)
    assert counts == {"trainset": 130, "valset": 16, "testset": 16}
    from ase.collections import g2

    graphs = read_all(out, "valset")
    names = [n for n, lab in zip(g2.names, convert.assign_labels(162, (0.8, 0.1, 0.1), 0))
             if lab == 1]
    ch4 = graphs[names.index("CH4")] if "CH4" in names else None
    for g, name in zip(graphs, names):
        assert np.array_equal(g["atomic_numbers"], g2[name].numbers)
    if ch4 is not None:
        assert np.isclose(ch4["energy"][0], -17.9 * 0.0433641, rtol=1e-6)


def test_splits_deterministic():
    a = convert.assign_labels(1000, (0.8, 0.1, 0.1), 7)
    assert np.array_equal(a, convert.assign_labels(1000, (0.8, 0.1, 0.1), 7))
    assert not np.array_equal(a, convert.assign_labels(1000, (0.8, 0.1, 0.1), 8))
    assert np.bincount(a).tolist() == [800, 100, 100]


def test_radius_graph_matches_ase():
    from ase.neighborlist import neighbor_list

    for a in slabs(3):
        i, j, s = neighbor_list("ijS", a, 5.5)
        ei, offs, _ = radius_graph(a.positions, 5.5, a.cell.array, a.pbc)
        assert sorted(zip(i, j, *s.T)) == sorted(zip(ei[1], ei[0], *offs.T))


def test_inconsistent_fields_error(tmp_path):
    from ase.io import write

    structures = slabs(3)
    structures[2].calc = None  # no energy/forces on the third frame
    src = tmp_path / "t.xyz"
    write(str(src), structures, format="extxyz")
    with pytest.raises(DataError, match=r"structure 2 lacks .*energy"):
        convert.convert(str(src), str(tmp_path / "o.bp"))


@pytest.mark.mpi
def test_cli_lmdb_warns_and_g2(tmp_path, env):
    src = tmp_path / "d.lmdb"
    lmdb_file(src, oc20_datas(2))
    r = subprocess.run([sys.executable, "-m", "mdloader_plugin", "convert", str(src), "--out",
                        str(tmp_path / "o.bp"), "--quiet"], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "unpickles" in r.stderr and "wrote" in r.stdout
    r = subprocess.run([sys.executable, "-m", "mdloader_plugin", "convert", "--help"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert "WARNING: unpickling" in r.stdout

