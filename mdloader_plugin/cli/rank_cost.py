"""``mdloader rank-cost``: one rank's real per-step loader work for a job of P ranks, without P
processes (:mod:`mdloader_plugin.estimator.rankcost`). How to size a job before submitting it."""

from __future__ import annotations

import argparse
import json


def register(sub) -> None:
    p = sub.add_parser(
        "rank-cost", help="CPU a rank spends a step at P ranks, measured in one process: size a "
                          "job before submitting it",
        description="Size a job before submitting it: runs ONE rank's real per-step loader work "
                    "(sampler and order, the rank's plans, a real compact index of N samples, "
                    "grouping by owner, packing, the counts Alltoallv needs, the PyG batch) for "
                    "a job of P ranks in this one process; only the network transfer is replaced "
                    "by local copies of the same bytes. Prints thread-CPU milliseconds a step "
                    "(median, p95, by phase), the epoch start and the N-proportional bytes a "
                    "sample a rank holds, for each P of --ranks.",
        epilog="example:\n  mdloader rank-cost --ranks 64,512,8192 --num-samples 100000000 "
               "--batch-size 32 --backend collective --json out.json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", required=True, help="comma list of world sizes P, e.g. 64,8192")
    p.add_argument("--ranks-per-node", type=int, default=8, help="ranks a node (default 8)")
    p.add_argument("--num-samples", type=float, required=True,
                   help="samples N in the data set (1e8 is accepted)")
    p.add_argument("--datasets", type=int, default=1,
                   help="data sets mixed (temperature sampling; default 1)")
    p.add_argument("--batch-size", type=int, default=32, help="samples a rank a step (32)")
    p.add_argument("--backend", default="onesided", choices=("onesided", "collective"))
    p.add_argument("--group-size", type=int, default=None,
                   help="replica group size W (must divide each P; default: all ranks)")
    p.add_argument("--weights", default=None, metavar="atoms|FILE.npy",
                   help="balance steps by weight: atoms of each record, or a .npy of N weights")
    p.add_argument("--steps", type=int, default=50, help="steps measured a P (default 50)")
    p.add_argument("--drop-last", action="store_true", help="drop the uneven tail")
    p.add_argument("--legacy", action="store_true",
                   help="run the code before per-rank plans (the whole [P, b] table a step)")
    p.add_argument("--json", default=None, metavar="PATH", help='write {"rows": [...]} here')
    p.set_defaults(func=run)


def parse_ranks(text: str) -> list[int]:
    from ..core.errors import ConfigError

    try:
        out = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--ranks {text!r}: give a comma list of positive integers, e.g. "
                          "64,8192") from None
    bad = [r for r in out if r <= 0]
    if not out or bad:
        raise ConfigError(f"--ranks {bad[0] if bad else text!r}: a job needs at least 1 rank; "
                          "give positive numbers, e.g. --ranks 64,8192")
    return out


def run(args) -> int:
    import numpy as np

    from ..core.errors import ConfigError
    from ..estimator.rankcost import Job, RankCost, check_job

    ranks = parse_ranks(args.ranks)
    n = int(args.num_samples)
    weights = args.weights
    if weights is not None and weights != "atoms":
        try:
            weights = np.load(weights)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"--weights {args.weights}: not a readable .npy ({exc}); give "
                              "atoms or a .npy of one weight a sample") from None
    jobs = [Job(p, n, args.batch_size, args.backend, args.datasets, args.group_size,
                args.ranks_per_node, weights, args.steps, args.drop_last, legacy=args.legacy)
            for p in ranks]
    for j in jobs:  # every P checked before any work starts
        check_job(j)
    rows = []
    for j in jobs:
        row = RankCost(j).run()
        rows.append(row)
        ph = " ".join(f"{k} {v:.3f}" for k, v in row["phases_ms"].items())
        print(f"P={row['ranks']} {row['backend']}: step {row['step_cpu_ms_median']:.3f} ms "
              f"(p95 {row['step_cpu_ms_p95']:.3f}; {ph}), epoch start "
              f"{row['epoch_start_s']:.3f} s, {row['bytes_per_sample']:.2f} B a sample",
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows}, f, indent=1)
    return 0
