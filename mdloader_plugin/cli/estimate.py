"""``mdloader estimate``: predicted per-step time of each backend, and the choice."""

from __future__ import annotations

import argparse
import json


def register(sub) -> None:
    p = sub.add_parser(
        "estimate", help="predict each backend's per-step time and pick one (no MPI needed)",
        description="Evaluate the cost model of every backend for a job (ranks, batch size, "
                    "record sizes) on a machine profile and print the predicted seconds per "
                    "step and the backend `backend: auto` would start with.",
        epilog="example: mdloader estimate --profile perlmutter --ranks 2048 --batch-size 32 "
               "--sample-bytes 12000 --json",
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
    p.add_argument("--json", action="store_true",
                   help='print only {"choice": ..., "predicted_s": {backend: seconds}}')
    p.set_defaults(func=run)


def _decide(args):
    from ..estimator import Workload, choose, get_profile

    prof = get_profile(args.profile)
    rpn = args.ranks_per_node or int(prof.provenance.get("ranks_per_node", 1))
    w = Workload(args.ranks, args.batch_size, args.sample_bytes, args.sample_std, rpn)
    return prof, w, choose(w, prof)


def run(args) -> int:
    from ..estimator import get_model
    from ..world import World, _world_size_env, agree

    # started by mpiexec on several ranks: one answer (or one error), rank 0's
    world = World.detect() if _world_size_env() > 1 else None

    prof, w, d = agree(world, _decide, args)
    if world is not None and world.rank != 0:
        return 0
    if args.json:
        print(json.dumps({"choice": d.backend, "predicted_s": d.predicted_s}))
        return 0
    print(f"profile {prof.name}: P={w.world_size} ranks ({w.rpn} per node), B={w.batch_size}, "
          f"records {w.mean_bytes:.0f} +- {w.std_bytes:.0f} B")
    for name, seconds in sorted(d.predicted_s.items(), key=lambda kv: kv[1]):
        terms = get_model(name).terms(w, prof.params)
        top = ", ".join(f"{k} {v * 1e6:.1f}" for k, v in
                        sorted(terms.items(), key=lambda kv: -kv[1])[:3])
        print(f"  {name:<11s} {seconds * 1e3:9.3f} ms/step   (largest terms, us: {top})")
    print(f"choice: {d.backend} ({d.reason})")
    return 0
