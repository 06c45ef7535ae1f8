"""``mdloader run hydragnn SCRIPT [ARGS]``: an upstream HydraGNN script under the launcher
(:mod:`mdloader_plugin.integrations.hydragnn.upstream.launcher`), the same as
``python -m mdloader_plugin.hydragnn SCRIPT [ARGS]``."""

from __future__ import annotations

import argparse


def register(sub) -> None:
    p = sub.add_parser(
        "run", help="run an upstream HydraGNN training script with MDLoader serving its data",
        description="Run an upstream training script unmodified under MPI; with --ddstore, "
                    "HYDRAGNN_USE_ddstore=1 or MDLOADER_REPLACE=all MDLoader serves its data "
                    "(docs/hydragnn-upstream-scripts.md).",
        epilog="example:\n  mpiexec -n 4 mdloader run hydragnn HydraGNN/examples/multibranch/"
               "train.py --inputfile cfg.json --multi --ddstore --ddstore_width 2 "
               "--multi_model_list a.bp,b.bp",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("framework", choices=["hydragnn"], help="whose script (hydragnn)")
    p.add_argument("script", help="the training script (e.g. examples/multibranch/train.py)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..integrations.hydragnn.upstream.launcher import main

    return main([args.script, *args.args])
