"""fairchem ``AtomicData`` <-> MDLoader samples (dicts of numpy arrays in the ADIOS2 file).

A sample holds what fairchem's ``AtomicData.from_ase(..., r_edges=False)`` computes from an ASE
row (positions already wrapped into the cell and cast to float32), so decoding is a handful of
``torch.from_numpy`` calls, not an ASE round trip:

====================  =========  ==========  ==========================================
key                   shape      dtype       AtomicData field
====================  =========  ==========  ==========================================
``pos``               [N, 3]     float32     pos
``atomic_numbers``    [N]        int64       atomic_numbers
``cell``              [1, 3, 3]  float32     cell
``pbc``               [1, 3]     int8        pbc (bool)
``fixed``             [N]        int8        fixed (long; 1 = FixAtoms)
``tags``              [N]        int8        tags (long; OC20: 0 sub-surface, 1 surface, 2 ads)
``sid``               [1]        int64       sid (``str`` of the number)
``energy``            [1]        float32     energy (optional)
``forces``            [N, 3]     float32     forces (optional)
``stress``            [1, 3, 3]  float32     stress (optional)
``charge``/``spin``   [1]        int64       charge / spin (optional, default 0)
====================  =========  ==========  ==========================================

After building the ``AtomicData`` the decoder runs fairchem's own ``DataTransforms`` and
``rename_data_object_keys`` with the same settings the ``ase_db`` dataset takes
(``transforms: {common_transform: {dataset_name: oc20}}``, ``key_mapping: {energy: oc20_energy}``),
so a sample served by MDLoader equals, tensor for tensor, the one fairchem's dataset makes from
the same row; the tests check that. Edges are not stored: UMA/eSCN-MD models build the radius
graph on the fly (``otf_graph: True``), as fairchem's OC20/OMat configs do.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ...errors import DataError

REQUIRED = ("pos", "atomic_numbers", "cell", "pbc", "fixed", "tags")
TARGETS = ("energy", "forces", "stress")


def atoms_to_sample(atoms, index: int) -> dict[str, np.ndarray]:
    """The sample for one ASE structure, via fairchem's own ``from_ase`` (and its default
    ``apply_one_tags`` atoms transform), so both loaders see identical numbers."""
    from fairchem.core.datasets.ase_datasets import apply_one_tags
    from fairchem.core.datasets.atomic_data import AtomicData

    atoms = apply_one_tags(atoms.copy() if atoms.calc is None else _with_calc(atoms))
    d = AtomicData.from_ase(atoms, r_edges=False)
    out = {"pos": d.pos.numpy(), "atomic_numbers": d.atomic_numbers.numpy(),
           "cell": d.cell.numpy(), "pbc": d.pbc.numpy().astype(np.int8),
           "fixed": d.fixed.numpy().astype(np.int8), "tags": d.tags.numpy().astype(np.int8),
           "sid": np.array([int(atoms.info.get("sid", index))], dtype=np.int64)}
    for key in TARGETS:
        if key in d:
            out[key] = getattr(d, key).numpy()
    return out


def _with_calc(atoms):
    copy = atoms.copy()
    copy.calc = atoms.calc
    return copy


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
    def build(sample: Mapping[str, np.ndarray]):
        import torch
        from fairchem.core.datasets.atomic_data import AtomicData

        missing = [k for k in REQUIRED if k not in sample]
        if missing:
            raise DataError(f"sample has no {missing} (has {sorted(sample)}); write the ADIOS2 "
                            "file with mdloader_plugin.integrations.fairchem.data.atoms_to_sample")
        t = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in sample.items()}
        n = t["pos"].shape[0]
        fields = dict(
            pos=t["pos"], atomic_numbers=t["atomic_numbers"].long(), cell=t["cell"].view(1, 3, 3),
            pbc=t["pbc"].view(1, 3).bool(), natoms=torch.tensor([n], dtype=torch.long),
            edge_index=torch.empty((2, 0), dtype=torch.long),
            cell_offsets=torch.empty((0, 3), dtype=t["pos"].dtype),
            nedges=torch.tensor([0], dtype=torch.long),
            charge=t["charge"].long().view(1) if "charge" in t else torch.tensor([0]),
            spin=t["spin"].long().view(1) if "spin" in t else torch.tensor([0]),
            fixed=t["fixed"].long(), tags=t["tags"].long(),
            sid=[str(int(sample["sid"][0]))] if "sid" in sample else None)
        for key in TARGETS:
            if key in t:
                fields[key] = t[key].view(1, 3, 3) if key == "stress" else t[key]
        return AtomicData(**fields)


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
