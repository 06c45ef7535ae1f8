"""Builds loaders the way each integration does, with whatever ``MDLOADER_*`` variables the
caller set, and prints (rank 0) the settings the loaders ended up with as one JSON line.

    mpiexec -n 2 python -m mpi4py env_settings.py {hydragnn|fairchem|dropin} SPLIT_FILE.bp

hydragnn: ``recipes/hydragnn/demo.yaml`` normalised as ``mdloader train hydragnn`` does, then its
``loader: mdloader`` builder; fairchem: ``build_loader`` with the values of the shipped loader
group (``mdloader_plugin/integrations/fairchem/conf/loader/mdloader.yaml``), as Hydra passes
them; dropin: HydraGNN's ``create_dataloaders`` signature with its defaults.
"""

import json
import logging
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def settings(loader) -> dict:
    prof = loader.decision.get("profile")
    return {"backend": loader.decision["backend"], "profile": prof.name if prof else None,
            "prefetch_bytes": loader.prefetch_bytes, "producer": loader.producer,
            "log_level": logging.getLevelName(loader.log.getEffectiveLevel())}


def hydragnn(path):
    from mdloader_plugin.integrations.hydragnn import config, graphs, loaders
    from mdloader_plugin.mpi.world import World

    cfg = yaml.safe_load((ROOT / "recipes/hydragnn/demo.yaml").read_text())
    cfg["Dataset"]["path"] = path
    cfg = config.normalise(cfg, "demo.yaml")
    made = loaders.build_mdloader(cfg, World.detect(), graphs.make_to_sample(None, None))
    out = [settings(ld) for ld in made]
    for ld in made:
        ld.close()
    return out


def fairchem(path):
    from mdloader_plugin.integrations.fairchem import loader as fl

    group = yaml.safe_load((ROOT / "mdloader_plugin" / "integrations" / "fairchem" / "conf"
                            / "loader" / "mdloader.yaml").read_text())
    keys = ("backend", "prefetch", "profile", "order", "index", "index_share",
            "max_memory_per_rank", "group_size", "replicate")
    made = fl.build_loader(path=path, collate_fn=list, label="trainset", split="train",
                           batch_size=group["batch_size"], **{k: group[k] for k in keys})
    out = [settings(made.loader if hasattr(made, "loader") else made)]
    fl.close_all()
    return out


def dropin(path):
    from mdloader_plugin.integrations.hydragnn import dropin as d

    sets = [d.AdiosDataset(path, label) for label in ("trainset", "valset", "testset")]
    made = d.create_dataloaders(*sets, batch_size=4)
    out = [settings(ld) for ld in made]
    d.close_dataloaders()
    return out


if __name__ == "__main__":
    from mpi4py import MPI

    from mdloader_plugin.mpi.world import report_error

    which, path = sys.argv[1], sys.argv[2]
    try:
        result = {"hydragnn": hydragnn, "fairchem": fairchem, "dropin": dropin}[which](path)
    except Exception as exc:  # noqa: BLE001 - a user error ends the job, as the CLI does
        sys.exit(report_error(exc))
    if MPI.COMM_WORLD.rank == 0:
        print("SETTINGS " + json.dumps(result), flush=True)
