"""``mdloader synth``: write a synthetic data set in HydraGNN's ADIOS2 layout, or several.

``--kind molecules,slabs,bulk --num-graphs 60,40,30 --out DIR`` writes one file a kind
(``DIR/<kind>.bp``, ``dataset_name`` = the kind) in one shared schema that both HydraGNN and
fairchem read (:mod:`mdloader_plugin.sources.synth_atoms`); ``--aselmdb`` also writes each split
as ``DIR/<kind>/<train|val|test>/data.aselmdb`` for fairchem's own loader.
"""

from __future__ import annotations

import argparse
import time

from ..core.errors import ConfigError


def register(sub) -> None:
    p = sub.add_parser(
        "synth", help="write a synthetic graph data set (HydraGNN ADIOS2 layout)",
        description="Write a synthetic data set in the ADIOS2 layout HydraGNN writes. The same "
                    "--seed always gives the same bytes. Graphs are streamed to a spool beside "
                    "the output and written in 64 MB blocks, so memory does not grow with "
                    "--num-graphs.",
        epilog="examples:\n"
               "  mdloader synth --kind hydragnn --num-graphs 100000 --out data/mols.bp\n"
               "  mdloader synth --kind oc20 --num-graphs 2000 --split 0.8,0.1,0.1 "
               "--out data/slabs.bp\n"
               "  mdloader synth --kind molecules,slabs,bulk --num-graphs 60,40,30 "
               "--split 0.8,0.2,0 --out data/gfm   # several data sets",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kind", default="hydragnn",
                   help="hydragnn: molecules of 5-100 atoms with x, pos, edge_index, edge_attr, "
                        "y, y_loc (~4.5 KB each); oc20: periodic slabs with adsorbates of "
                        "30-220 atoms with pos, atomic_numbers, cell, pbc, natoms, tags, fixed, "
                        "energy, forces, edge_index, cell_offsets (25-200 KB each); mlip: "
                        "molecules with an energy and forces = -grad(energy) (MLIP recipes); "
                        "molecules, slabs, bulk (comma-separated, several data sets): small "
                        "EMT-labelled structures, one file each; gfm: several data sets in "
                        "upstream HydraGNN's multi-data-set layout (x = Z, pos, forces; "
                        "edge_index, edge_attr, pos, energy, energy_per_atom, forces, y and the "
                        "SC26 scripts' extra keys; dataset_name and pna_deg attributes), molecules "
                        "and bulk crystals in turn, one file a "
                        "number in --num-graphs (default: hydragnn)")
    p.add_argument("--num-graphs", required=True,
                   help="number of graphs in all (several kinds: one number a kind, e.g. 60,40)")
    p.add_argument("--out", required=True, help="output .bp path (several kinds: a folder)")
    p.add_argument("--names", default=None,
                   help="--kind gfm: data set names, one a file (default: upstream's first "
                        "names ani1x,qm7x,mptrj,... so its dataset_name_dict routes data set i "
                        "to branch-i)")
    p.add_argument("--variables", default=None, metavar="CONFIG",
                   help="--kind gfm: also write x, y, y_loc compiled from the top-level "
                        "Variables section (the named data schema of HydraGNN main527) of this "
                        "JSON/YAML config, as upstream's prepare_data_from_schema does; "
                        "main527's scripts read them as written")
    p.add_argument("--aselmdb", action="store_true",
                   help="several kinds: also write ASE-LMDB splits for fairchem's own loader")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p.add_argument("--split", default="1,0,0",
                   help="fractions for trainset,valset,testset (default: 1,0,0)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def parse_split(text: str) -> tuple[float, float, float]:
    try:
        parts = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise ConfigError(f"--split {text!r}: expected three numbers like 0.8,0.1,0.1") from None
    if len(parts) != 3 or min(parts) < 0 or abs(sum(parts) - 1) > 1e-6:
        raise ConfigError(f"--split {text!r}: need three non-negative fractions summing to 1")
    return parts


def run(args) -> int:
    import numpy as np
    from tqdm import tqdm

    from ..sources import synth
    from ..sources.adios import LABELS
    from ..sources.writer import GraphWriter

    if args.kind == "gfm":
        return run_gfm(args)
    if args.kind in synth.KINDS:
        args.num_graphs = _counts(args.num_graphs, 1)[0]
    else:
        return run_sets(args)
    if args.num_graphs <= 0:
        raise ConfigError(f"--num-graphs must be a positive number, got {args.num_graphs}")
    if args.kind not in synth.KINDS:
        raise ConfigError(f"--kind {args.kind!r} is unknown; choose one of {sorted(synth.KINDS)}")
    counts = synth.split_counts(args.num_graphs, parse_split(args.split))
    labels = [lab for lab, n in zip(LABELS, counts) if n or lab == "trainset"]
    t0 = time.perf_counter()
    graphs = tqdm(synth.generate(args.kind, args.seed, 0, args.num_graphs),
                  total=args.num_graphs, desc="synth", disable=args.quiet, unit="graph")
    bounds = np.cumsum(counts)
    with GraphWriter(args.out, {"dataset_name": f"synthetic-{args.kind}"},
                     labels=tuple(labels)) as out:
        for i, g in enumerate(graphs):  # streaming: one graph in memory at a time
            out.add(LABELS[int(np.searchsorted(bounds, i, side="right"))], g)
    sets = {lab: n for lab, n in out.counts.items()}
    print(f"wrote {args.out}: {args.num_graphs} graphs "
          f"({', '.join(f'{k} {v}' for k, v in sets.items())}) in "
          f"{time.perf_counter() - t0:.1f} s")
    return 0


def _counts(text, n: int) -> list[int]:
    try:
        counts = [int(x) for x in str(text).split(",")]
    except ValueError:
        counts = []
    if len(counts) != n or min(counts) <= 0:
        raise ConfigError(f"--num-graphs {text!r}: need {n} positive number(s), one a kind")
    return counts


def run_sets(args) -> int:
    """Several data sets: one ``<kind>.bp`` a kind (and ASE-LMDB splits with --aselmdb)."""
    import os

    from ..sources import synth, synth_atoms

    kinds = [k.strip() for k in args.kind.split(",") if k.strip()]
    bad = [k for k in kinds if k not in synth_atoms.KINDS]
    if bad or not kinds or len(set(kinds)) != len(kinds):
        raise ConfigError(f"--kind {args.kind!r}: choose {sorted(synth.KINDS)} or distinct "
                          f"kinds from {', '.join(synth_atoms.KINDS)} (comma-separated)")
    counts = _counts(args.num_graphs, len(kinds))
    split = parse_split(args.split)
    os.makedirs(args.out, exist_ok=True)
    for kind, n in zip(kinds, counts):
        path = synth_atoms.write_set(args.out, kind, synth.split_counts(n, split), args.seed,
                                     args.aselmdb)
        print(f"wrote {path}: {n} {kind} (dataset_name {kind!r})")
    return 0


def run_gfm(args) -> int:
    """``--kind gfm``: one ``<name>.bp`` a number in ``--num-graphs`` (upstream's layout)."""
    import os

    from ..sources import synth, synth_atoms

    counts = [int(x) for x in str(args.num_graphs).split(",") if x.strip().isdigit()]
    counts = _counts(args.num_graphs, max(len(counts), 1))
    names = (args.names.split(",") if args.names else list(synth_atoms.GFM_NAMES[:len(counts)]))
    names = [n.strip() for n in names]
    if len(names) != len(counts) or len(set(names)) != len(names) or not all(names):
        raise ConfigError(f"--names {args.names!r}: give {len(counts)} distinct names, one a "
                          "number in --num-graphs")
    split = parse_split(args.split)
    variables = _variables(getattr(args, "variables", None))
    os.makedirs(args.out, exist_ok=True)
    for i, (name, n) in enumerate(zip(names, counts)):
        kind = ("molecules", "bulk")[i % 2]
        try:
            path = synth_atoms.write_gfm_set(args.out, name, kind, synth.split_counts(n, split),
                                             args.seed + i, variables)
        except ValueError as exc:
            raise ConfigError(f"--variables {args.variables}: {exc}") from None
        print(f"wrote {path}: {n} {kind} (dataset_name {name!r})")
    return 0


def _variables(path: str | None) -> dict | None:
    """The top-level ``Variables`` section of the config at `path` (None: no path)."""
    if path is None:
        return None
    from ..integrations.hydragnn.config import read_file

    cfg = read_file(path)
    v = cfg.get("Variables")
    if not isinstance(v, dict) or not all(isinstance(v.get(g), list)
                                          for g in ("inputs", "outputs")):
        raise ConfigError(f"--variables {path}: no top-level Variables section with inputs and "
                          "outputs lists (HydraGNN main527's named data schema)")
    return v
