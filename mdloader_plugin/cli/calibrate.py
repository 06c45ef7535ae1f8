"""``mdloader calibrate``: measure this machine's cost-model parameters into a profile file."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core.errors import ConfigError


def register(sub) -> None:
    p = sub.add_parser(
        "calibrate", help="measure network/memory costs and write a machine profile (MPI)",
        description="Run one-sided and Alltoallv micro-benchmarks on all ranks, fit the cost-model "
                    "parameters (least squares) and write them, with provenance, as a profile "
                    "that `mdloader estimate --profile FILE` and `backend: auto` can use "
                    "(export MDLOADER_PROFILE=FILE). Run it with the ranks per node of your "
                    "training jobs, on at least two nodes to measure inter-node costs.",
        epilog="example: mpiexec -n 4 mdloader calibrate --out my-machine.json\n"
               "(then `profile: my-machine.json` in a config, or MDLOADER_PROFILE)",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="profile file to write (.json)")
    p.add_argument("--quick", action="store_true",
                   help="fewer sizes and repetitions (a few seconds; noisier)")
    p.set_defaults(func=run)


def profile_path(path: str, flag: str) -> Path:
    """A profile file to write: ends in .json, its folder exists (else a ConfigError)."""
    out = Path(path)
    if out.suffix != ".json":
        raise ConfigError(f"{flag} {path!r}: a profile file must end in .json")
    if not out.parent.exists():
        raise ConfigError(f"{flag} {path!r}: folder {str(out.parent)!r} does not exist")
    return out


def run(args) -> int:
    from ..estimator.calibrate import CalibrationSetup
    from ..estimator.calibrate import run as calibrate
    from ..mpi.world import World, abort_on_error

    out = profile_path(args.out, "--out")
    with abort_on_error():
        world = World.detect()
        if world.size < 2:
            raise ConfigError("calibrate needs at least 2 ranks: run it as "
                              "`mpiexec -n 4 mdloader calibrate --out FILE.json`")
        profile = calibrate(world, CalibrationSetup.quick() if args.quick else CalibrationSetup())
        if world.rank == 0:
            profile.write(out)
            print(f"wrote {out}: profile {profile.name!r} "
                  f"({profile.provenance['ranks']} ranks, {profile.provenance['nodes']} node(s), "
                  f"{profile.provenance['seconds']} s)")
        world.comm.Barrier()
        world.close()
    return 0
