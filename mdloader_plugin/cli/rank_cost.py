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
                    "sample a rank holds, for each P of --ranks. Records come from a pool of 64 "
                    "real encoded molecules (record i is pool record i mod 64); with --sizes the "
                    "index, grouping, packing and copies use the file's sizes (each record's "
                    "bytes copied as the file says) while the batch is still built from the "
                    "pool record i mod 64, so the batch phase is the pool molecules' cost.",
        epilog="examples:\n"
               "  mdloader rank-cost --ranks 64,8192 --num-samples 1e8 --backend collective\n"
               "  mdloader rank-cost --ranks 64,512,2048,8192 --num-samples 1e8 --batch-size 32 "
               "\\\n      --backend collective --steps 40 --profile local --profile-out fit.json\n"
               "  mdloader estimate --profile fit.json --ranks 8192 --batch-size 32 "
               "--sample-bytes 4000",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", required=True, help="comma list of world sizes P, e.g. 64,8192")
    p.add_argument("--ranks-per-node", type=int, default=8, help="ranks a node (default 8)")
    p.add_argument("--num-samples", type=float, default=None,
                   help="samples N in the data set (1e8 is accepted; required without --sizes, "
                        "default with it: the file's count)")
    p.add_argument("--datasets", type=int, default=1,
                   help="data sets mixed (temperature sampling; default 1)")
    p.add_argument("--fairchem", action="store_true",
                   help="with --datasets: mix them as the fairchem loader does (temperature 2 "
                        "and each data set's fixed seeded permutation)")
    p.add_argument("--batch-size", type=int, default=32, help="samples a rank a step (32)")
    p.add_argument("--backend", default="onesided", choices=("onesided", "collective"))
    p.add_argument("--group-size", type=int, default=None,
                   help="replica group size W (must divide each P; default: all ranks)")
    p.add_argument("--weights", default=None, metavar="atoms|FILE.npy",
                   help="balance steps by weight: atoms of each record, or a .npy of N weights")
    p.add_argument("--sizes", nargs="+", default=None, metavar="FILE",
                   help="record sizes in bytes from a file instead of the pool's: HydraGNN-layout "
                        ".bp file(s) (metadata only, as `mdloader plan`; several: one store), a "
                        ".npy of integers, or text with one integer a line. The index, grouping, "
                        "packing and copied bytes follow them; the batch (and --weights atoms) "
                        "are still the pool's records (see the description). Fewer sizes than "
                        "--num-samples are tiled (sample i has size i mod count), more are cut "
                        "to the first N; either is printed once")
    p.add_argument("--label", default=None, metavar="SPLIT",
                   help="split of a .bp --sizes (default: trainset, else the file's first)")
    p.add_argument("--steps", type=int, default=50, help="steps measured a P (default 50)")
    p.add_argument("--drop-last", action="store_true", help="drop the uneven tail")
    p.add_argument("--legacy", action="store_true",
                   help="run the code before per-rank plans (the whole [P, b] table a step)")
    p.add_argument("--json", default=None, metavar="PATH", help='write {"rows": [...]} here')
    p.add_argument("--profile-out", default=None, metavar="PATH.json",
                   help="fit the collective model's per-rank CPU constants from the rows "
                        "(plan + group_pack = a + b P over --ranks: coll.t_plan_id = a / B, "
                        "coll.t_count = b; needs --backend collective and two or more P) and "
                        "write --profile with them, sourced, as a profile `mdloader estimate "
                        "--profile PATH` reads (may be --profile's own file)")
    p.add_argument("--profile", default=None, metavar="NAME|PATH",
                   help="the profile --profile-out starts from: a shipped name or a `mdloader "
                        "calibrate` file (default: $MDLOADER_PROFILE or local)")
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
    sizes = read_sizes(args.sizes, args.label) if args.sizes else None
    if args.num_samples is None and sizes is None:
        raise ConfigError("--num-samples is required without --sizes; give the data set's "
                          "samples, e.g. --num-samples 1e8")
    n = int(args.num_samples) if args.num_samples is not None else sizes.size
    if sizes is not None and sizes.size != n:
        how = (f"tiled: sample i has size i mod {sizes.size}" if sizes.size < n
               else f"the first {n} used")
        print(f"rank-cost: {' '.join(args.sizes)} holds {sizes.size} sizes for --num-samples "
              f"{n}: {how}", flush=True)
    weights = args.weights
    if weights is not None and weights != "atoms":
        try:
            weights = np.load(weights)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"--weights {args.weights}: not a readable .npy ({exc}); give "
                              "atoms or a .npy of one weight a sample") from None
    jobs = [Job(p, n, args.batch_size, args.backend, args.datasets, args.group_size,
                args.ranks_per_node, weights, args.steps, args.drop_last, legacy=args.legacy,
                sizes=sizes, fairchem=args.fairchem)
            for p in ranks]
    for j in jobs:  # every P checked before any work starts
        check_job(j)
    fitted = _profile_target(args, ranks)
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
    if fitted:
        _write_profile(args, *fitted, rows)
    return 0


def _profile_target(args, ranks: list[int]):
    """``(base profile, path)`` for --profile-out, checked before any work (None without)."""
    if args.profile_out is None:
        return None
    from ..estimator.rank_cost_fit import check_rows_fit
    from ..estimator.profile import get_profile
    from .calibrate import profile_path

    check_rows_fit(args.backend, ranks, args.legacy)
    return get_profile(args.profile), profile_path(args.profile_out, "--profile-out")


def _write_profile(args, base, out, rows) -> None:
    from ..estimator.rank_cost_fit import profile_from_rows

    job = {k: getattr(args, k) for k in ("ranks", "ranks_per_node", "num_samples", "datasets",
                                         "batch_size", "backend", "group_size", "weights",
                                         "steps", "sizes", "label")}
    prof = profile_from_rows(base, rows, job)
    prof.write(out)
    print(f"wrote {out}: profile {base.name!r} with coll.t_plan_id "
          f"{prof.params['coll.t_plan_id']:.3g} s and coll.t_count "
          f"{prof.params['coll.t_count']:.3g} s ({prof.sources['coll.t_count']})", flush=True)


def read_sizes(paths: list[str], label: str | None = None):
    """Record sizes (int64, every one >= 1) from HydraGNN-layout .bp file(s) (their metadata and
    count arrays only, as `mdloader plan`), a .npy of integers or a text file of one integer a
    line; bad input is one line naming the file and the fix (a DataError)."""
    import os

    import numpy as np

    from ..core.errors import DataError

    fix = ("give HydraGNN-layout .bp file(s), a .npy of integers or a text file of one integer "
           "a line")
    for path in paths:
        if not os.path.exists(path):
            raise DataError(f"--sizes {path}: no such file; {fix}")
    if all(str(p).rstrip("/").endswith(".bp") for p in paths):
        sizes = _bp_sizes(paths, label)
    elif len(paths) > 1:
        raise DataError(f"--sizes {' '.join(paths)}: several files must all be .bp; {fix}")
    else:
        sizes = _plain_sizes(paths[0], fix)
    where = " ".join(paths)
    if sizes.size == 0:
        raise DataError(f"--sizes {where}: holds no sizes; {fix}")
    bad = np.flatnonzero(sizes <= 0)
    if bad.size:
        raise DataError(f"--sizes {where}: size {int(sizes[bad[0]])} at entry {int(bad[0])} is "
                        "not positive; a record size is a number of bytes >= 1")
    return sizes


def _bp_sizes(paths: list[str], label: str | None):
    from ..loader.open import _record_sizes
    from .plan import _labels

    have = _labels(paths, [label] if label else None)
    split = label or ("trainset" if "trainset" in have else have[0])
    return _record_sizes(paths if len(paths) > 1 else paths[0], split, None, ())


def _plain_sizes(path: str, fix: str):
    import numpy as np

    from ..core.errors import DataError

    try:
        if path.endswith(".npy"):
            raw = np.load(path, allow_pickle=False)
        else:
            raw = np.loadtxt(path, dtype=np.float64, ndmin=1)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataError(f"--sizes {path}: not readable ({why}); {fix}") from None
    raw = np.asarray(raw).reshape(-1)
    if raw.dtype.kind == "f" and np.all(np.isfinite(raw)) and np.all(raw == np.round(raw)):
        raw = raw.astype(np.int64)
    if raw.dtype.kind not in "iu":
        raise DataError(f"--sizes {path}: holds {raw.dtype} values, not integers; {fix}")
    return raw.astype(np.int64)
