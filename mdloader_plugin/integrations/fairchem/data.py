"""fairchem ``AtomicData`` <-> MDLoader samples (dicts of numpy arrays in the ADIOS2 file).

A sample has the fields ``mdloader convert`` writes for ASE databases and OC20 LMDBs
(:func:`mdloader_plugin.sources.convert.atoms.atoms_to_graph`): ``pos [N,3]``,
``atomic_numbers [N]``, ``cell [1,3,3]``, ``pbc [1,3]``, ``tags [N]``, ``fixed [N]``, optional
``energy [1]``, ``forces [N,3]``, ``stress [1,6|9|3x3]``, ``sid [1]`` (a number), ``charge``,
``spin``; other keys (``natoms``, ``edge_index``, ...) are ignored. `ToAtomicData` then does
what fairchem's ``ase_db`` dataset does to a row, in the same order and precision:
``apply_one_tags`` (all-zero tags become 1), ``AtomicData.from_ase(r_edges=False)`` (positions
wrapped into the cell in float64 with ``eps=0``, then float32; Voigt stress to 3x3; charge and
spin 0 unless stored), then fairchem's own ``DataTransforms`` (``common_transform`` sets
``dataset``) and ``rename_data_object_keys`` (``key_mapping``, e.g. ``energy: oc20_energy``), and
sets ``dataset_name`` to ``<name>.<split>`` as ``create_concat_dataset`` does. So a sample served
by MDLoader equals, tensor for tensor, the one fairchem's loader makes from the same row (the tests
check it), without an ASE round trip (~30 us a structure). Edges are not built: UMA/eSCN-MD models
make the radius graph on the fly (``otf_graph: True``), as fairchem's OC20/OMat configs do.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ...core.errors import DataError

REQUIRED = ("pos", "atomic_numbers", "cell", "pbc", "fixed", "tags")
OPTIONAL = ("natoms", "energy", "forces", "stress", "sid", "charge", "spin")


def atoms_to_sample(atoms, index: int) -> dict[str, np.ndarray]:
    """The sample for one ASE structure, as ``mdloader convert`` writes it (the fields fairchem
    reads only), with ``sid`` = ``atoms.info['sid']`` when numeric, else `index`."""
    from ...sources.convert.atoms import atoms_to_graph

    info_sid = atoms.info.get("sid")
    sid = int(info_sid) if str(info_sid).lstrip("-").isdigit() else index
    g = atoms_to_graph(atoms, extra={"sid": sid})
    g["sid"] = np.array([sid], dtype=np.int64)
    return {k: v for k, v in g.items() if k in REQUIRED or k in OPTIONAL}


class ToAtomicData:
    """``to_sample`` for MDLoader: a sample dict -> fairchem ``AtomicData`` (picklable).

    Args:
        dataset_name: what ``common_transform`` writes into ``data.dataset`` (task routing).
        key_mapping: fairchem's ``key_mapping`` (e.g. ``{energy: oc20_energy}``).
        transforms: fairchem's dataset ``transforms``; default ``common_transform`` only.
        split: the split name; ``data.dataset_name`` becomes ``<dataset_name>.<split>`` as
            fairchem's ``create_concat_dataset`` names it (None: leave it unset).
    """

    def __init__(self, dataset_name: str = "oc20", key_mapping: Mapping[str, Any] | None = None,
                 transforms: Mapping[str, Any] | None = None, split: str | None = "train"):
        from fairchem.core.modules.transforms import DataTransforms

        self.concat_name = f"{dataset_name}.{split}" if split else None
        self.key_mapping = dict(key_mapping or {})
        tf = dict(transforms) if transforms else {"common_transform": {}}
        if "common_transform" in tf:
            tf["common_transform"] = {"dataset_name": dataset_name,
                                      **dict(tf["common_transform"] or {})}
        self.transforms = DataTransforms(tf)

    def __call__(self, sample: Mapping[str, np.ndarray]):
        from fairchem.core.datasets._utils import rename_data_object_keys

        data = self.build(sample)
        data = self.transforms(data)
        if self.concat_name is not None:
            data.dataset_name = self.concat_name
        return rename_data_object_keys(data, self.key_mapping) if self.key_mapping else data

    @staticmethod
    def build(sample: Mapping[str, np.ndarray], dtype=None):
        """``AtomicData.from_ase(r_edges=False)`` on a sample, without making an ``Atoms``."""
        import torch
        from ase.geometry import wrap_positions
        from fairchem.core.datasets.atomic_data import AtomicData

        missing = [k for k in REQUIRED if k not in sample]
        if missing:
            raise DataError(f"sample has no {missing} (has {sorted(sample)}); convert the data "
                            "with `mdloader convert` or integrations.fairchem.data")
        dtype = dtype or torch.float32
        cell = np.asarray(sample["cell"], dtype=np.float64).reshape(3, 3)
        pbc = np.asarray(sample["pbc"]).reshape(3).astype(bool)
        pos = wrap_positions(np.asarray(sample["pos"], dtype=np.float64), cell, pbc=pbc, eps=0)
        tags = np.asarray(sample["tags"], dtype=np.int64)
        n = pos.shape[0]
        fields = dict(
            pos=torch.from_numpy(pos).to(dtype),
            atomic_numbers=torch.from_numpy(np.asarray(sample["atomic_numbers"], np.int64)),
            cell=torch.from_numpy(cell).to(dtype).view(1, 3, 3),
            pbc=torch.from_numpy(pbc).view(1, 3), natoms=torch.tensor([n], dtype=torch.long),
            edge_index=torch.empty((2, 0), dtype=torch.long),
            cell_offsets=torch.empty((0, 3), dtype=dtype),
            nedges=torch.tensor([0], dtype=torch.long),
            charge=torch.tensor([int(np.ravel(sample.get("charge", [0]))[0])]),
            spin=torch.tensor([int(np.ravel(sample.get("spin", [0]))[0])]),
            fixed=torch.from_numpy(np.asarray(sample["fixed"], dtype=np.int64)),
            tags=torch.from_numpy(np.ones(n, np.int64) if not tags.any() else tags.copy()),
            sid=[str(int(np.ravel(sample["sid"])[0]))] if "sid" in sample else None)
        if "energy" in sample:
            fields["energy"] = torch.tensor([float(np.ravel(sample["energy"])[0])], dtype=dtype)
        if "forces" in sample:
            fields["forces"] = torch.tensor(np.asarray(sample["forces"]), dtype=dtype).view(-1, 3)
        if "stress" in sample:
            fields["stress"] = _stress(np.asarray(sample["stress"], dtype=np.float64), dtype)
        return AtomicData(**fields)


class ToAtomicDataByDataset:
    """``to_sample`` over several data sets: each sample goes through its own data set's
    :class:`ToAtomicData` (picked by the sample's ``dataset_name`` id), so ``data.dataset`` (what
    fairchem's tasks filter on) and ``data.dataset_name`` (``<name>.<split>``) name its data set.

    Args:
        configs: per data set, in id order, ``(name, key_mapping, transforms)``.
    """

    def __init__(self, configs, split: str | None = "train"):
        self.by_id = [ToAtomicData(name, km, tf, split) for name, km, tf in configs]

    def __call__(self, sample: Mapping[str, np.ndarray]):
        return self.by_id[int(np.ravel(sample["dataset_name"])[0])](sample)


def _stress(stress: np.ndarray, dtype):
    import torch
    from ase.stress import voigt_6_to_full_3x3_stress  # what fairchem's AtomicData.from_ase uses

    if stress.size == 6:
        stress = voigt_6_to_full_3x3_stress(stress.reshape(6))
    elif stress.size != 9:
        raise DataError(f"stress has {stress.size} values; expected 6 (Voigt) or 9")
    return torch.tensor(stress, dtype=dtype).view(1, 3, 3)


def write_oc20_like(out_dir: str, num_train: int, num_val: int, seed: int = 0) -> dict[str, str]:
    """Generate synthetic OC20-like slabs and write them twice: ``train/data.aselmdb`` and
    ``val/data.aselmdb`` for fairchem's loader, and ``oc20.bp`` (labels ``trainset``,
    ``valset``) for MDLoader. Returns the paths."""
    import os

    from ...sources.adios import write_graphs
    from . import synth

    paths = {"train": os.path.join(out_dir, "train", "data.aselmdb"),
             "val": os.path.join(out_dir, "val", "data.aselmdb"),
             "bp": os.path.join(out_dir, "oc20.bp")}
    graphs = {}
    for split, label, (a, b) in (("train", "trainset", (0, num_train)),
                                 ("val", "valset", (num_train, num_train + num_val))):
        structures = list(synth.slabs(seed, a, b))
        os.makedirs(os.path.dirname(paths[split]), exist_ok=True)
        synth.write_aselmdb(paths[split], structures)
        graphs[label] = [atoms_to_sample(s, a + i) for i, s in enumerate(structures)]
    write_graphs(paths["bp"], graphs, attributes={"dataset_name": "oc20-synthetic"})
    return paths


def main(argv: list[str] | None = None) -> int:
    """``python -m mdloader_plugin.integrations.fairchem.data --out DIR --train N --val M``."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m mdloader_plugin.integrations.fairchem.data",
                                description="Write synthetic OC20-like slabs (EMT labels) as "
                                            "ASE-LMDB (fairchem) and ADIOS2 (MDLoader).")
    p.add_argument("--out", required=True, help="output folder (the config's data_dir)")
    p.add_argument("--train", type=int, default=256, help="training structures (default 256)")
    p.add_argument("--val", type=int, default=32, help="validation structures (default 32)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.train <= 0 or args.val <= 0:
        p.error("--train and --val must be positive")
    for name, path in write_oc20_like(args.out, args.train, args.val, args.seed).items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
