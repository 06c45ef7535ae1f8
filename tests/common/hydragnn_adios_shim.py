"""Run HydraGNN 3.0's own ``AdiosWriter.save`` and ``AdiosDataset.get`` on today's ADIOS2.

HydraGNN 3.0 calls the pre-2.10 ADIOS2 Python API (``adios2.ADIOS``, ``adios2.open``) and passes
an MPI communicator to ``Open``. That low-level API still exists as ``adios2.bindings`` (serial
build: ``Open`` takes no communicator), and ``adios2.open`` maps onto ``FileReader``. This shim
supplies exactly those names and nothing else, so HydraGNN's own code does the writing and
reading on one rank. PyG 2.4 turned ``Data.keys`` into a method; HydraGNN 3.0 reads it as a list,
so the writer is fed tiny objects with a ``keys`` list, as PyG < 2.4 ``Data`` had.

Usage: python hydragnn_adios_shim.py OUT_HYDRA.bp OURS.bp   (prints OK or fails)
"""

from __future__ import annotations

import sys
import types

import adios2
import numpy as np
import torch
from adios2 import bindings
from checks import check


class _IO:
    def __init__(self, io):
        self._io = io

    def __getattr__(self, name):
        return getattr(self._io, name)

    def Open(self, name, mode, comm=None):  # noqa: N802 - HydraGNN's spelling
        return self._io.Open(name, mode)


class _ADIOS:
    def __init__(self):
        self._adios = bindings.ADIOS()

    def DeclareIO(self, name):  # noqa: N802
        return _IO(self._adios.DeclareIO(name))


class _File:
    def __init__(self, path, mode="r", comm=None):
        self._r = adios2.FileReader(path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._r.close()

    def __next__(self):
        return self

    def __getattr__(self, name):
        return getattr(self._r, name)


class LegacyData:
    """What HydraGNN 3.0's writer expects of a graph: ``.keys`` list and ``[key]`` tensors."""

    def __init__(self, **tensors):
        self.__dict__.update(tensors)
        self.keys = list(tensors)

    def __getitem__(self, key):
        return self.__dict__[key]


def graphs():
    rng = np.random.default_rng(0)
    out = []
    for n in (3, 1, 6, 2, 4):
        e = 0 if n == 1 else 2 * n
        out.append({"x": rng.normal(size=(n, 2)).astype(np.float32),
                    "pos": rng.normal(size=(n, 3)),
                    "edge_index": rng.integers(0, n, size=(2, e)),
                    "edge_attr": rng.normal(size=(e, 1)).astype(np.float32),
                    "cell": rng.normal(size=(3, 3)).astype(np.float32),
                    "natoms": np.array([n], dtype=np.int32),
                    # a per-graph (3, 3) key and integer species, as upstream's newest data
                    # (UMA's stress, the species encoding's long [N] atomic_numbers)
                    "stress": rng.normal(size=(3, 3)).astype(np.float32),
                    "atomic_numbers": rng.integers(1, 90, size=n).astype(np.int64),
                    "y": np.array([float(n)])})
    return out


def main(hydra_path: str, ours_path: str) -> None:
    from mpi4py import MPI

    import hydragnn.utils.adiosdataset as had
    from mdloader_plugin.sources.adios import GraphFile
    from mdloader_plugin.sources.writer import write_graphs

    had.ad2 = types.SimpleNamespace(ADIOS=_ADIOS, Mode=bindings.Mode,
                                    ConstantDims=bindings.ConstantDims, open=_File)
    gs = graphs()
    # 1. HydraGNN writes, MDLoader reads.
    w = had.AdiosWriter(hydra_path, MPI.COMM_SELF)
    w.add("trainset", [LegacyData(**{k: torch.from_numpy(v) for k, v in g.items()}) for g in gs])
    w.add_global("pna_deg", np.array([0, 4, 2]))
    w.save()
    with GraphFile(hydra_path) as f:
        for g, got in zip(gs, f.read_block("trainset", 0, len(gs))):
            for k in g:
                check(got[k].dtype == g[k].dtype and np.array_equal(got[k], g[k]), k)
        check(np.array_equal(f.global_attributes()["pna_deg"], [0, 4, 2]), "pna_deg read back")
    # 2. MDLoader writes, HydraGNN reads (its per-sample path, no preload).
    write_graphs(ours_path, {"trainset": gs}, {"pna_deg": np.array([0, 4, 2])})
    ds = had.AdiosDataset(ours_path, "trainset", MPI.COMM_SELF)
    check(ds.len() == len(gs) and np.array_equal(ds.pna_deg, [0, 4, 2]),
          f"HydraGNN read {ds.len()} samples, pna_deg {ds.pna_deg}")
    for i, g in enumerate(gs):
        if any(v.size == 0 for v in g.values()):
            # HydraGNN's get() asks ADIOS2 for an empty box here, which today's adios2 Python
            # read() cannot do (NaN step count) whoever wrote the file; MDLoader reads it.
            continue
        data = ds.get(i)
        for k in g:
            check(np.array_equal(data[k].numpy(), g[k]), (i, k))
    # 3. Every key HydraGNN's reader gives a graph reaches MDLoader's batch under its name, with
    # its values, dtype and shape (batched by PyG as HydraGNN's DataLoader batches them).
    _same_batches(ours_path, ds, [i for i, g in enumerate(gs)
                                  if not any(v.size == 0 for v in g.values())])
    print("OK")


def _same_batches(path: str, ds, ids: list[int]) -> None:
    from mpi4py import MPI
    from torch_geometric.data import Batch

    from mdloader_plugin import MDLoader, ShardStore, World

    world = World.detect(MPI.COMM_SELF)
    store = ShardStore.from_file(world, path, "trainset")
    with MDLoader(store, batch_size=ds.len(), shuffle=False) as loader:
        (ours,) = list(loader)
    store.close()
    want = Batch.from_data_list([ds.get(i) for i in ids])
    got = Batch.from_data_list(ours.index_select(ids))
    check(set(want.keys()) <= set(got.keys()), f"keys {sorted(want.keys())} {sorted(got.keys())}")
    for k in want.keys():
        w, g = want[k], got[k]
        check(w.dtype == g.dtype and w.shape == g.shape and torch.equal(w, g),
              f"{k}: HydraGNN {w.dtype} {tuple(w.shape)}, MDLoader {g.dtype} {tuple(g.shape)}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
