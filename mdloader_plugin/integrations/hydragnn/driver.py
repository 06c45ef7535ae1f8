"""``mdloader train hydragnn``: HydraGNN's own training loop with the loader the config selects.

Order (each step a HydraGNN function, looked up in :mod:`.compat`): rank 0 reads the config,
checks it against the installed HydraGNN (3.0, 5.0, main or main527, :func:`.compat.check_config`:
the named-schema form for main527, :mod:`.schema`, the positional form for the others) and
broadcasts it (a bad config is one line from rank 0 and the same exit code on every rank, before
any collective); torch.distributed on a free port, then ``setup_ddp``; ``setup_log``; the three
loaders; ``update_config`` on :class:`.graphs.ConfigView` stand-ins (its graph-size scan must not
drive the real loaders, see :mod:`.graphs`); the default dtype of ``Training.precision`` (as
upstream's ``run_training``); ``create_model_config``; ``get_distributed_model``;
``select_optimizer``; ReduceLROnPlateau; ``Training.continue`` (:mod:`.resume`);
``train_validate_test`` with the train loader wrapped in :class:`.epochs.TimedLoader` (and, on
5.0, ``compute_grad_energy``/``precision``; on main527 the whole config); ``save_model``;
``print_timers``. Any exception on any rank aborts the whole job.
"""

from __future__ import annotations

import argparse
import os

from ...core.errors import DataError
from ...mpi.agree import everywhere
from ...mpi.world import World, abort_on_error, report_error
from . import compat, config, epochs, graphs, loaders, resume, schema


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``mdloader train hydragnn``'s arguments (``--config``, ``--set KEY=VALUE``) to ``p``."""
    p.add_argument("--config", required=True,
                   help="HydraGNN config (YAML or JSON) with a top-level `loader:` key")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key by dotted path, e.g. --set loader=hydragnn "
                        "--set mdloader.backend=collective --set mdloader.order=feistel "
                        "(repeatable)")


def main(args: argparse.Namespace) -> int:
    """Train HydraGNN on every MPI rank with the config's loader; returns the exit code."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    cfg, code = _config_on_root(comm, args)
    if cfg is None:
        return code
    with abort_on_error(comm):
        train(cfg, comm)
    return 0


def _config_on_root(comm, args) -> tuple[dict | None, int]:
    """Rank 0 loads the config; all ranks get it, or the same exit code (rank 0 prints)."""
    payload = None
    if comm.Get_rank() == 0:
        try:
            cfg = config.load(args.config, args.set)
            compat.check_config(cfg, compat.require_hydragnn())
            for path in graphs.files_of(cfg["Dataset"]["path"]):
                _check_data(path)
            if schema.named(cfg):
                schema.check_keys(cfg, graphs.files_of(cfg["Dataset"]["path"]))
            payload = ("ok", cfg)
        except BaseException as exc:  # noqa: BLE001 - every rank must leave with the same code
            payload = ("error", report_error(exc))
    kind, value = comm.bcast(payload, root=0)
    return (value, 0) if kind == "ok" else (None, value)


def _check_data(path: str) -> None:
    if not os.path.exists(path):
        raise DataError(f"Dataset.path {path}: no such file or directory (relative paths start "
                        f"at {os.getcwd()}); make one with `mdloader synth --kind hydragnn "
                        f"--split 0.8,0.1,0.1 --num-graphs N --out {path}`")


def train(cfg: dict, comm) -> list[dict]:
    """Run one training job (collective); returns rank-0-identical epoch records."""
    import torch

    ver = compat.require_hydragnn()
    compat.check_config(cfg, ver)
    cfg = compat.upstream_config(cfg, ver)
    world = World.detect(comm)
    compat.init_distributed(comm, single_node=world.num_nodes == 1)
    name = config.run_name(cfg)
    verbosity = int(cfg["Verbosity"]["level"])
    compat.setup_log(name)
    dtype = compat.param_dtype(cfg)
    to_sample = _to_sample(cfg, dtype)
    train_l, val_l, test_l = loaders.build(cfg, world, to_sample)
    default_dtype = torch.get_default_dtype()
    try:
        cfg = compat.get("update_config")(cfg, *_config_views(cfg, comm, to_sample))
        torch.set_default_dtype(dtype)  # as upstream's run_training: fp64 models are built fp64
        torch.manual_seed(int(cfg["seed"]))
        model = compat.get("create_model_config")(config=cfg["NeuralNetwork"],
                                                  verbosity=verbosity)
        model = compat.get("get_distributed_model")(model, verbosity,
                                                     **compat.ddp_kwargs(cfg))
        optimizer = compat.get("select_optimizer")(model,
                                                   cfg["NeuralNetwork"]["Training"]["Optimizer"])
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer, mode="min", factor=0.5, patience=5, min_lr=0.00001)
        writer = compat.get("get_summary_writer")(name)
        compat.get("save_config")(cfg, name)
        timed = epochs.TimedLoader(train_l, world.comm, run=name, loader_name=cfg["loader"],
                                   max_batches=everywhere(world.comm, compat.max_batches, ver),
                                   keep_state=True)
        resume.load(cfg, model, optimizer, timed)
        model = model.to(dtype=dtype)
        compat.get("train_validate_test")(
            model, optimizer, timed, val_l, test_l, writer, scheduler,
            compat.train_config(cfg, ver), name, verbosity, False, False, False,
            **compat.train_kwargs(cfg, ver))
        compat.get("save_model")(model, optimizer, name)
        resume.save(train_l, name, world.rank)
        compat.get("print_timers")(verbosity)
    finally:
        torch.set_default_dtype(default_dtype)
        loaders.close((train_l, val_l, test_l))
        world.close()
    return timed.records


def _to_sample(cfg: dict, dtype=None):
    import numpy as np
    import torch

    if schema.named(cfg):  # HydraGNN main527: upstream's prepare_data_from_schema
        return schema.NamedSample(cfg["Variables"],
                                  np.float64 if dtype == torch.float64 else np.float32)
    voi = cfg["NeuralNetwork"]["Variables_of_interest"]
    train_path = graphs.split_path(cfg["Dataset"]["path"], loaders.LABELS[0])
    ymm = graphs.y_minmax(train_path) if cfg["Dataset"].get("normalize_y") else None
    return graphs.make_to_sample(voi.get("input_node_features"), ymm,
                                 graphs.heads_from_config(cfg),
                                 np.float64 if dtype == torch.float64 else np.float32)


def _config_views(cfg: dict, comm, to_sample) -> list[graphs.ConfigView]:
    paths = [graphs.split_path(cfg["Dataset"]["path"], label) for label in loaders.LABELS]
    stats = graphs.arch_stats(cfg["NeuralNetwork"]["Architecture"]["mpnn_type"], paths[0], comm,
                              loaders.LABELS[0])
    views = []
    for i, (path, label) in enumerate(zip(paths, loaders.LABELS)):
        sample0, n = graphs.first_sample(path, label, to_sample)
        views.append(graphs.ConfigView(path, label, sample0, n,
                                       **(stats if i == 0 else {})))
    return views


def run_file(path: str, overrides: list[str] | None = None) -> int:
    """``python -m mdloader_plugin.integrations.hydragnn.driver CONFIG [KEY=VALUE ...]``."""
    return main(argparse.Namespace(config=path, set=list(overrides or [])))


if __name__ == "__main__":
    import sys

    if len(sys.argv) < 2:
        sys.exit("usage: python -m mdloader_plugin.integrations.hydragnn.driver CONFIG "
                 "[KEY=VALUE ...]")
    sys.exit(run_file(sys.argv[1], sys.argv[2:]))
