"""``mdloader estimate``: predicted per-step time of each backend, and the choice.

With ``--group-size auto|N`` it also weighs replica groups (:mod:`mdloader_plugin.mpi.groups`):
memory a rank from ``--num-samples`` and the mean record size (the runtime uses the exact
sizes), the budget from ``--max-memory-per-rank`` or the profile's node memory (``local``: this
machine's) with the estimator's safety share, every (backend, W) and the one auto would pick."""

from __future__ import annotations

import argparse
import dataclasses
import json


def register(sub) -> None:
    p = sub.add_parser(
        "estimate", help="predict each backend's per-step time and pick one (no MPI needed)",
        description="Evaluate the cost model of every backend for a job (ranks, batch size, "
                    "record sizes) on a machine profile and print the predicted seconds per "
                    "step and the backend `backend: auto` would start with.",
        epilog="examples:\n  mdloader estimate --profile perlmutter --ranks 2048 --batch-size 32 "
               "--sample-bytes 12000 --json\n  mdloader estimate --profile frontier --ranks 1024 "
               "--batch-size 32 --sample-bytes 30000 --num-samples 2000000 --group-size auto",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--profile", default=None,
                   help="shipped profile name (perlmutter, frontier, local) or a .json written "
                        "by `mdloader calibrate` (default: $MDLOADER_PROFILE or local)")
    p.add_argument("--ranks", type=int, required=True, help="world size P")
    p.add_argument("--batch-size", type=int, required=True, help="samples per rank per step B")
    p.add_argument("--sample-bytes", type=float, required=True, help="mean record size in bytes")
    p.add_argument("--sample-std", type=float, default=0.0,
                   help="standard deviation of record sizes in bytes (default: 0)")
    p.add_argument("--ranks-per-node", type=int, default=None,
                   help="ranks sharing a node (default: the profile's, else 1)")
    p.add_argument("--group-size", "--width", default=None, metavar="auto|W",
                   help="replica groups: weigh every valid W (auto) or W against all ranks; "
                        "needs --num-samples")
    p.add_argument("--num-samples", type=int, default=None,
                   help="samples in the data set (memory a rank for --group-size)")
    p.add_argument("--max-memory-per-rank", default=None, metavar="SIZE",
                   help="budget for --group-size (default: the profile's node memory, or this "
                        "machine's, times the safety share, over the ranks of a node)")
    p.add_argument("--json", action="store_true",
                   help='print only {"choice": ..., "predicted_s": {backend: seconds}}')
    from .check import add_scale_arguments

    add_scale_arguments(p)  # with --num-samples: the index and order a rank holds (scale page)
    p.set_defaults(func=run)


def _decide(args):
    from ..estimator import Workload, choose, get_profile
    from .check import scale_options

    scale_options(args)  # a bad --order/--index/--index-share is one line before any work
    prof = get_profile(args.profile)
    rpn = args.ranks_per_node or int(prof.provenance.get("ranks_per_node", 1))
    w = Workload(args.ranks, args.batch_size, args.sample_bytes, args.sample_std, rpn)
    return prof, w, choose(w, prof)


def _layout(args, prof, rpn):
    """LayoutDecision for --group-size, from mean record sizes
    (:func:`~mdloader_plugin.estimator.group_size.layout_from_mean`)."""
    from ..mpi import groups
    from ..core.units import parse_bytes
    from ..core.errors import ConfigError
    from ..estimator.group_size import layout_from_mean

    want = groups.parse(args.group_size, "--group-size")
    if not args.num_samples or args.num_samples <= 0:
        raise ConfigError("--group-size needs --num-samples (samples in the data set) to size "
                          "the memory a rank")
    budget = parse_bytes(args.max_memory_per_rank, "--max-memory-per-rank")
    grows = sum(_scale_bytes(args, rpn).values())  # index + order: the whole data set's
    dec = layout_from_mean(args.ranks, rpn, args.batch_size, args.sample_bytes, args.sample_std,
                           args.num_samples, prof, budget, want, fixed_bytes=grows)
    if budget is not None:
        dec = dataclasses.replace(dec, budget_source="--max-memory-per-rank")
    return dec


def _scale_bytes(args, rpn: int) -> dict:
    """Index and order bytes a rank for ``--num-samples`` with the scale options (bound)."""
    from ..store.budget import scale_bytes
    from .check import scale_options

    return scale_bytes(args.num_samples, ranks_per_node=rpn, **scale_options(args))


def run(args) -> int:
    from ..estimator import get_model
    from ..estimator.choose import node_params
    from ..mpi.world import World, _world_size_env, agree

    # started by mpiexec on several ranks: one answer (or one error), rank 0's
    world = World.detect() if _world_size_env() > 1 else None

    prof, w, d = agree(world, _decide, args)
    lay = None if args.group_size is None else agree(world, _layout, args, prof, w.rpn)
    if world is not None and world.rank != 0:
        return 0
    if lay is not None:
        return _print_layout(args, lay)
    grows = _scale_bytes(args, w.rpn) if args.num_samples else None
    if args.json:
        extra = {} if grows is None else {"scale_bytes": grows}
        print(json.dumps({"choice": d.backend, "predicted_s": d.predicted_s, **extra}))
        return 0
    print(f"profile {prof.name}: P={w.world_size} ranks ({w.rpn} per node), B={w.batch_size}, "
          f"records {w.mean_bytes:.0f} +- {w.std_bytes:.0f} B")
    for name, seconds in sorted(d.predicted_s.items(), key=lambda kv: kv[1]):
        terms = get_model(name).terms(w, node_params(prof, w.world_size, w.rpn))
        top = ", ".join(f"{k} {v * 1e6:.1f}" for k, v in
                        sorted(terms.items(), key=lambda kv: -kv[1])[:3])
        print(f"  {name:<11s} {seconds * 1e3:9.3f} ms/step   (largest terms, us: {top})")
    print(f"choice: {d.backend} ({d.reason})")
    if grows is not None:
        from ..core.units import human

        print(f"whole data set a rank ({args.num_samples} samples): index "
              f"{human(grows['index'])} ({args.index}, {args.index_share}), order "
              f"{human(grows['order'])} ({args.order}); bound, see docs/scale.md")
    return 0


def _print_layout(args, lay) -> int:
    from ..core.units import human

    if args.json:
        print(json.dumps({"choice": lay.backend, "group_size": lay.group_size,
                          "budget_bytes": lay.budget, "candidates": [
                              {"backend": c.backend, "group_size": c.group_size,
                               "predicted_s": c.predicted_s, "memory_bytes": c.memory_bytes,
                               "fits": c.fits} for c in lay.candidates]}))
        return 0
    print(f"P={args.ranks} ranks, B={args.batch_size}, {args.num_samples} samples of "
          f"{args.sample_bytes:.0f} B; budget {human(lay.budget) if lay.budget else 'none'} a "
          f"rank ({lay.budget_source})")
    print(f"  {'W':>6s} {'backend':<11s} {'ms/step':>10s} {'memory a rank':>14s}  fits")
    for c in lay.candidates:
        print(f"  {c.group_size:6d} {c.backend:<11s} {c.predicted_s * 1e3:10.3f} "
              f"{human(c.memory_bytes):>14s}  {'yes' if c.fits else 'no'}")
    print(f"choice: {lay.backend}, group_size {lay.group_size} ({lay.reason})")
    return 0
