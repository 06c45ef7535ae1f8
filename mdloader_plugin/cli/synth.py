"""``mdloader synth``: write a synthetic data set in HydraGNN's ADIOS2 layout."""

from __future__ import annotations

import argparse
import time

from ..errors import ConfigError


def register(sub) -> None:
    p = sub.add_parser(
        "synth", help="write a synthetic graph data set (HydraGNN ADIOS2 layout)",
        description="Write a synthetic data set in the ADIOS2 layout HydraGNN writes. The same "
                    "--seed always gives the same bytes.",
        epilog="example: mdloader synth --kind hydragnn --num-graphs 3001 --out data/mols.bp",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kind", default="hydragnn", help="data set kind (default: hydragnn)")
    p.add_argument("--num-graphs", type=int, required=True, help="number of graphs in all")
    p.add_argument("--out", required=True, help="output .bp path")
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
    from tqdm import tqdm

    from ..sources import synth
    from ..sources.adios import LABELS, write_graphs

    if args.num_graphs <= 0:
        raise ConfigError(f"--num-graphs must be a positive number, got {args.num_graphs}")
    if args.kind not in synth.KINDS:
        raise ConfigError(f"--kind {args.kind!r} is unknown; choose one of {sorted(synth.KINDS)}")
    counts = synth.split_counts(args.num_graphs, parse_split(args.split))
    t0 = time.perf_counter()
    graphs = list(tqdm(synth.generate(args.kind, args.seed, 0, args.num_graphs),
                       total=args.num_graphs, desc="synth", disable=args.quiet, unit="graph"))
    sets, lo = {}, 0
    for label, n in zip(LABELS, counts):
        if n or label == "trainset":
            sets[label] = graphs[lo:lo + n]
        lo += n
    write_graphs(args.out, sets, {"dataset_name": f"synthetic-{args.kind}"})
    print(f"wrote {args.out}: {args.num_graphs} graphs "
          f"({', '.join(f'{k} {len(v)}' for k, v in sets.items())}) in "
          f"{time.perf_counter() - t0:.1f} s")
    return 0
