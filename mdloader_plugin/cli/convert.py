"""``mdloader convert``: ASE databases, OC20 LMDBs, extxyz, PyG data -> HydraGNN ADIOS2 layout."""

from __future__ import annotations

import argparse
import sys
import time

from ..core.errors import ConfigError

EPILOG = """\
sources (guessed from the name, or --from):
  asedb    ASE database: .db (SQLite) or .aselmdb (ase-db-backends, installed with fairchem)
  lmdb     OC20-style LMDB of pickled PyG Data (.lmdb file or a folder of them).
           WARNING: unpickling runs code chosen by whoever wrote the file; only trusted data.
  extxyz   extended XYZ trajectory (.xyz, .extxyz), streamed frame by frame
  pyg      PyG InMemoryDataset file (.pt), loaded with torch.load(weights_only=True)
  g2       ASE's bundled G2 molecule set (162 molecules; give `g2` as SRC)

examples:
  mdloader convert g2 --out data/g2.bp --split 0.8,0.1,0.1
  mdloader convert train.aselmdb --out data/oc.bp --radius 6 --max-neighbours 50
  mdloader convert traj.extxyz --out data/md.bp --split 0.9,0.1,0 --seed 1
  mpiexec -n 4 mdloader convert train=data/oc20/train val=data/oc20/val --out data/oc20/oc20.bp
      (two folders of .aselmdb shards, converted by 4 ranks, into one file's trainset and valset:
      the path recipes/fairchem reads; add --x atomic_numbers,forces --y energy for HydraGNN's
      x and y columns: node-level targets such as forces are columns of x)

parallel: under mpiexec/srun the ranks share the work (files and ranges of structures) and
rank 0 writes the one output file while they convert; it is the same file one process writes.
Past about 25 ranks one writer limits the rate: --writers W (about one for every 16 ranks)
has W ranks write side by side, OUT then a folder of W files that MDLoader reads as one data
set (the same graphs, byte for byte; HydraGNN's own AdiosDataset needs --writers 1).
Without MPI, --jobs K runs K processes on this machine the same way. An interrupted run
leaves OUT.parts/: the same command again converts only what is missing (parts of another
MDLoader version are converted again). A second conversion into an OUT that one is writing
stops with one line; a rank that dies ends the job with one line naming it
(MDLOADER_CONVERT_TIMEOUT seconds of silence, default 600)."""


def register(sub) -> None:
    p = sub.add_parser(
        "convert", help="convert ASE db / OC20 LMDB / extxyz / PyG data into the ADIOS2 layout",
        description="Stream structures from SRC into an ADIOS2 file in HydraGNN's layout, with "
                    "deterministic train/val/test splits and a radius graph (periodic images "
                    "when a cell is present) for structures without edges. Memory stays "
                    "bounded: one structure plus a 64 MB write block. Runs on any number of "
                    "MPI ranks (mpiexec -n P mdloader convert ...) with the same output.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src", metavar="SRC", nargs="+",
                   help="input path (or `g2`); or labelled inputs train=PATH val=PATH "
                        "[test=PATH], each input one split of the output")
    p.add_argument("--out", required=True, help="output .bp path")
    p.add_argument("--from", dest="kind", default=None,
                   help="source format (asedb, lmdb, extxyz, pyg, g2); default: from the name")
    p.add_argument("--split", default="1,0,0",
                   help="fractions for trainset,valset,testset (default: 1,0,0)")
    p.add_argument("--seed", type=int, default=0, help="seed of the split (default: 0)")
    p.add_argument("--radius", type=float, default=6.0,
                   help="cutoff in A for graphs without edge_index; 0 = no edges (default: 6)")
    p.add_argument("--max-neighbours", type=int, default=50,
                   help="keep at most K nearest neighbours per atom; 0 = no limit (default: 50)")
    p.add_argument("--neighbour-overflow", choices=("truncate", "error"), default="truncate",
                   help="an atom with more than --max-neighbours neighbours within --radius: "
                        "truncate keeps its nearest (the neighbours left out are counted and "
                        "reported at the end), error refuses the structure (default: truncate)")
    p.add_argument("--float64", action="store_true",
                   help="keep float64 values (default: store floats as float32)")
    p.add_argument("--x", default="", metavar="KEY[,KEY...]",
                   help="HydraGNN's node features x: these per-atom fields side by side (e.g. "
                        "atomic_numbers,forces); node-level targets are columns of x too")
    p.add_argument("--y", default="", metavar="KEY[,KEY...]",
                   help="HydraGNN's graph targets y: these per-structure fields (e.g. energy)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace OUT if it exists (and an unfinished OUT.parts of other inputs)")
    p.add_argument("--part-size", type=int, default=None, metavar="N",
                   help="structures a part, the unit ranks share and a resume keeps (default: "
                        "about 16 parts a rank, at most 4096 structures)")
    p.add_argument("--jobs", type=int, default=1, metavar="K",
                   help="processes on this machine without MPI (K - 1 forked workers beside "
                        "this one; the same file); under mpiexec the ranks share the work")
    p.add_argument("--writers", type=int, default=1, metavar="W",
                   help="ranks that write, side by side (default: 1, one ADIOS2 file, what "
                        "HydraGNN's own reader opens). One writer keeps up with about 25 "
                        "converting ranks; with more ranks give about one writer for "
                        "every 16: OUT is then a folder of W files that MDLoader reads as "
                        "one data set, the same graphs byte for byte")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args) -> int:
    from mpi4py import MPI

    from ..sources import convert
    from .synth import parse_split

    split = parse_split(args.split)
    if args.radius < 0 or args.max_neighbours < 0:
        raise ConfigError("--radius and --max-neighbours must be >= 0")
    if args.part_size is not None and args.part_size < 1:
        raise ConfigError("--part-size must be >= 1")
    if args.jobs < 1:
        raise ConfigError("--jobs must be >= 1")
    src = _sources(args.src)
    x = [k for k in args.x.split(",") if k.strip()]
    y = [k for k in args.y.split(",") if k.strip()]
    world = MPI.COMM_WORLD
    comm = world if world.Get_size() > 1 else None
    for one in (src.values() if isinstance(src, dict) else [src]):
        mod = convert.detect(one, args.kind)  # on every rank: an error is every rank's
        if mod.NAME == "lmdb" and world.Get_rank() == 0:
            print(mod.WARNING, file=sys.stderr, flush=True)
            break
    t0 = time.perf_counter()
    bar = []

    procs = max(world.Get_size(), args.jobs)
    what = f"{procs} rank{'s' * (procs > 1)}" if args.jobs == 1 else f"{args.jobs} jobs"

    def progress(total, done):
        from tqdm import tqdm

        bar.append(tqdm(total=total, initial=done, unit="structure", disable=args.quiet,
                        desc=f"convert ({what})",
                        smoothing=0.1, mininterval=1.0))
        return bar[0].update

    beat = _heartbeat(comm)
    try:
        counts = convert.convert(src, args.out, kind=args.kind, split=split, seed=args.seed,
                                 radius=args.radius, max_neighbours=args.max_neighbours or None,
                                 neighbour_overflow=args.neighbour_overflow,
                                 float64=args.float64, progress=progress, x=x, y=y, comm=comm,
                                 overwrite=args.overwrite, part_size=args.part_size,
                                 jobs=args.jobs, writers=args.writers)
    except BaseException as exc:
        if beat is not None:  # an agreed error is every rank's: they close together
            beat.close() if getattr(exc, "agreed", False) else beat.leave()
        raise
    finally:
        for b in bar:
            b.close()
    if beat is not None:
        beat.close()
    if world.Get_rank() != 0:
        return 0
    dt = time.perf_counter() - t0
    n = sum(counts.values())
    from ..sources.joined import files_of

    files = files_of(args.out)
    into = f" ({len(files)} files read as one)" if len(files) > 1 else ""
    print(f"wrote {args.out}{into}: {n} graphs "
          f"({', '.join(f'{k} {v}' for k, v in counts.items())}) in {dt:.1f} s "
          f"({n / max(dt, 1e-9):.0f} structures/s on {what})")
    if x or y:
        _print_config(args.out, x, y)
    return 0


def _heartbeat(comm):
    """Every rank's heartbeat (:mod:`..mpi.heartbeat`): a rank that dies while the others wait
    for its parts ends the job with one line naming it (None: one process, or no watch)."""
    if comm is None:
        return None
    from ..mpi import heartbeat

    name = "MDLOADER_CONVERT_TIMEOUT"
    timeout = heartbeat.timeout_of(comm, name)
    return heartbeat.start(comm, timeout, "aborting the conversion (the parts finished are "
                           "kept: run the same command again to resume; raise "
                           f"{name} if a rank can legitimately be stopped this long)")


def _sources(items: list[str]):
    """One input path, or ``{label: path}`` from ``train=PATH val=PATH ...``."""
    from ..sources.convert import LABEL_NAMES

    if len(items) == 1 and "=" not in items[0]:
        return items[0]
    out = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or name not in LABEL_NAMES:
            raise ConfigError(f"{item!r}: with several inputs each is SPLIT=PATH, SPLIT one of "
                              "train, val, test")
        if LABEL_NAMES[name] in out:
            raise ConfigError(f"{item!r}: split {name} given twice")
        out[LABEL_NAMES[name]] = path
    return out


def _print_config(path: str, x: list[str], y: list[str]) -> None:
    """The HydraGNN ``Dataset`` entries that name the columns just written."""
    from ..sources.adios import GraphFile
    from ..sources.convert import column_config

    with GraphFile(path) as f:
        label = f.labels()[0]
        info = f.info(label)
        g = f.read_block(label, 0, 1, keys=[*x, *y], info=info).sample(0)
    cfg = column_config(g, x, y)
    import yaml

    print("HydraGNN config for these columns (Dataset):")
    for kind in ("node_features", "graph_features"):
        if cfg[kind]["name"]:
            print(f"  {kind}: {yaml.safe_dump(cfg[kind], default_flow_style=True).strip()}")
    print(f"  ({info.ndata} graphs in {label}; Variables_of_interest.input_node_features picks "
          "the x columns the model reads)")
