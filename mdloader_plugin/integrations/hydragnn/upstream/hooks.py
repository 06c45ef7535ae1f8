"""The hooks the launcher installs in upstream HydraGNN, and what each upstream flag becomes.

:func:`install` imports the HydraGNN on the path (5.0 or main) and replaces, in every loaded
``hydragnn`` module that holds them, upstream's ``AdiosDataset`` and ``adios2_open`` (MDLoader's
serial reader, :mod:`.reader`, where the installed ADIOS2 has no MPI or
``MDLOADER_READER=mdloader``), ``DistDataset`` and ``create_dataloaders`` (:mod:`.data`).
A script that imports those names after the hooks are in gets the replacements; nothing else of
upstream's changes (models, training loop, checkpoints, logs). Whoever serves the loaders
(MDLoader, or upstream's own with ``MDLOADER_REPLACE=none`` or without ``--ddstore``), the train
loader is timed (:func:`.timing.time_upstream`): one ``MDLOADER-EPOCH`` line an epoch in the
script's run.log, so ``mdloader compare-logs`` compares the two runs of a script.

:data:`FLAGS` is the table of upstream's data flags and ``HYDRAGNN_*`` variables with what
MDLoader does with each (docs/hydragnn-upstream-scripts.md prints it); :func:`flag_notes` picks
those a command line uses for the launcher's log line, and :func:`refuse` stops a combination
MDLoader cannot honour before anything starts (one line, every rank alike).
"""

from __future__ import annotations

import functools
import os
import sys

from ....core.errors import ConfigError
from ....core.options import env

#: ``(flag or variable, what MDLoader does)``; the first word says how: honoured, mapped,
#: ignored (with a warning) or refused.
FLAGS: tuple[tuple[str, str], ...] = (
    ("--ddstore", "mapped: DistDataset and create_dataloaders return MDLoader's store and "
                  "loaders (upstream's DDStore is not needed)"),
    ("--ddstore_width W", "mapped: replica groups of W ranks, each holding the whole store; "
                          "batches as with one DDStore group; W must divide the ranks of the "
                          "DDStore communicator; DistDataset.ddstore_comm is upstream's group "
                          "(rank // W), and create_dataloaders(group=ddstore_comm) deals the "
                          "epoch over the whole communicator"),
    ("--multi", "honoured: the script's per-rank subsets of its files, joined in rank order, "
                "are the data set"),
    ("--multi_model_list A,B,...", "mapped: one store over the files; each graph carries the "
                                   "dataset_name id upstream's dataset gives it (its "
                                   "dataset_name_dict), so it reaches its branch; ranks split "
                                   "among the files as the script computes (proportional)"),
    ("--task_parallel", "mapped: a store and a sampler per branch communicator (the script's "
                        "local_comm and branch group)"),
    ("--use_devicemesh", "refused without CUDA (upstream's init_device_mesh('cuda')); use "
                         "--task_parallel alone"),
    ("--oversampling", "honoured: each rank draws num_samples of the data set without "
                       "replacement (whole permutations, then a head), from seed + epoch "
                       "instead of torch's global generator"),
    ("--oversampling_num_samples K", "honoured: K draws a rank (the script passes it)"),
    ("--num_samples N", "honoured: the script's subsets keep N graphs a rank; the store still "
                        "loads the files' whole labels"),
    ("--shmem", "ignored with a warning: MDLoader's reader keeps the graphs in each process"),
    ("--batch_size, --num_epoch, --precision, --everyone, --nosync, --log, --inputfile",
     "honoured by the script (not data flags)"),
    ("--adios, --pickle", "--adios: honoured (MDLoader's reader where ADIOS2 is serial); "
                          "--pickle with --ddstore: refused (MDLoader serves ADIOS2 files)"),
    ("HYDRAGNN_USE_ddstore=1", "mapped: MDLoader serves create_dataloaders, as with --ddstore; "
                               "the per-batch epoch_begin/epoch_end fences are accepted"),
    ("HYDRAGNN_DDSTORE_METHOD", "ignored: MDLoader picks its backend (MDLOADER_BACKEND)"),
    ("HYDRAGNN_MAX_NUM_BATCH=N", "honoured: upstream stops each epoch after N batches; "
                                 "MDLoader fetches no step past N"),
    ("HYDRAGNN_EVALONLY=1", "honoured: upstream only evaluates; loaders serve as usual"),
    ("HYDRAGNN_VALTEST=0", "honoured: upstream skips validation and test; their loaders "
                           "are never iterated"),
    ("HYDRAGNN_AGGR_BACKEND", "honoured: upstream's graph-size scan iterates the loaders, "
                              "which may stop at any batch; --ddstore sets it to mpi, whose "
                              "loss reductions differ from torch's in the last digits"),
    ("HYDRAGNN_NUM_WORKERS, HYDRAGNN_CUSTOM_DATALOADER", "ignored where MDLoader serves: "
                                                         "its producer thread prefetches"),
    ("Training.Batching (main)", "mapped: mode node_budget gives upstream's cost-aware "
                                 "batches (DistributedCostAwareBatchSampler), fetched by "
                                 "MDLoader; with --oversampling refused, as upstream"),
    ("MDLOADER_REPLACE=all|none", "all: MDLoader serves every create_dataloaders call, DDStore "
                                  "or not; none: only the reader is MDLoader's, DDStore and "
                                  "loaders stay upstream's"),
    ("MDLOADER_READER=mdloader|upstream", "whose ADIOS2 reader serves AdiosDataset "
                                          "(default: MDLoader's where ADIOS2 has no MPI)"),
)


def flag_notes(argv: list[str]) -> list[str]:
    """``FLAG -> what`` for the data flags and variables in effect (for the log line)."""
    used = {a.split("=", 1)[0] for a in argv if a.startswith("--")}
    out = []
    for flag, what in FLAGS:
        if what.startswith("honoured by the script"):
            continue
        names = [f.split()[0] for f in flag.split(", ")]
        if any(n in used for n in names) or any(
                n.startswith(("HYDRAGNN_", "MDLOADER_")) and n.split("=")[0] in os.environ
                for n in names):
            out.append(f"{flag.split(',')[0].split()[0].split('=')[0]} -> "
                       f"{what.split(':')[0]}")
    return out


def refuse(argv: list[str]) -> None:
    """One-line errors for flag combinations MDLoader cannot honour (rank-local: the launcher
    runs it through :func:`~mdloader_plugin.mpi.agree.everywhere`, one line on every rank)."""
    used = {a.split("=", 1)[0] for a in argv}
    if "--use_devicemesh" in used:
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("--use_devicemesh needs CUDA devices (upstream calls "
                              "init_device_mesh('cuda')); drop it: --task_parallel alone splits "
                              "the ranks by branch")
    if "--ddstore" in used and "--shmem" in used:
        raise ConfigError("--ddstore with --shmem: upstream refuses the pair too; keep "
                          "--ddstore (MDLoader serves it) and drop --shmem")
    if "--pickle" in used and ("--ddstore" in used or _replacing()):
        raise ConfigError("--pickle with --ddstore: MDLoader serves data sets read from ADIOS2 "
                          "files; use --adios/--multi, or drop --ddstore to run upstream's own "
                          "loader")


def check_inputfile(script: str, argv: list[str]) -> None:
    """The script's ``--inputfile`` JSON (resolved as upstream's scripts do: against the
    script's folder, which an absolute path overrides) in the variable form the installed
    HydraGNN reads (:func:`..compat.check_form`); rank-local (the launcher agrees it)."""
    import json

    from .. import compat

    path = None
    for i, a in enumerate(argv):
        if a == "--inputfile" and i + 1 < len(argv):
            path = argv[i + 1]
        elif a.startswith("--inputfile="):
            path = a.split("=", 1)[1]
    if path is None:
        return
    path = os.path.join(os.path.dirname(os.path.abspath(script)), path)
    try:
        with open(path) as f:
            cfg = json.load(f)
    except (OSError, ValueError):
        return  # the script reports its own file errors
    if isinstance(cfg, dict) and isinstance(cfg.get("NeuralNetwork"), dict):
        try:
            compat.check_form(cfg, compat.version())
        except ConfigError as exc:
            raise ConfigError(f"--inputfile {path}: {exc}")


def _replacing() -> bool:
    return (env("MDLOADER_REPLACE") or "").lower() == "all"


def reader_wanted() -> bool:
    """MDLoader's reader serves AdiosDataset: ADIOS2 without MPI, unless MDLOADER_READER says."""
    choice = (env("MDLOADER_READER") or "").lower()
    if choice in ("mdloader", "upstream"):
        return choice == "mdloader"
    if choice:
        raise ConfigError(f"MDLOADER_READER={choice!r}: choose mdloader or upstream")
    try:
        import adios2
    except ImportError:
        return True
    return not getattr(adios2, "is_built_with_mpi", False)


#: Sub-packages upstream's scripts reach by attribute (``hydragnn.utils.input_config_parsing.
#: update_config``) that ``import hydragnn`` does not load (``hydragnn/utils`` has no
#: ``__init__.py``): imported before the script runs, so those paths resolve.
ATTRIBUTE_PATHS = ("hydragnn.utils.input_config_parsing", "hydragnn.utils.model",
                   "hydragnn.utils.print", "hydragnn.utils.distributed",
                   "hydragnn.utils.profiling_and_tracing", "hydragnn.utils.optimizer",
                   "hydragnn.utils.datasets")


def install() -> dict:
    """Replace upstream's names (see the module docstring); returns what was replaced."""
    import importlib

    import hydragnn  # noqa: F401 - loads the package's modules

    for name in ATTRIBUTE_PATHS:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    import hydragnn.preprocess as pre
    import hydragnn.preprocess.load_data as load_data
    import hydragnn.utils.datasets.adiosdataset as adios_mod
    import hydragnn.utils.datasets.distdataset as dist_mod

    from . import data, reader, timing

    replace = (env("MDLOADER_REPLACE") or "").lower()
    if replace not in ("", "all", "none"):
        raise ConfigError(f"MDLOADER_REPLACE={replace!r}: choose all (MDLoader serves every "
                          "create_dataloaders call) or none (only the reader; DDStore and loaders "
                          "stay upstream's)")
    swaps = {} if replace == "none" else {dist_mod.DistDataset: data.DistDataset}
    original = load_data.create_dataloaders

    @functools.wraps(original)
    def create_dataloaders(*args, **kwargs):
        if replace == "none":
            loaders = original(*args, **kwargs)
        else:
            loaders = data.create_dataloaders(*args, _upstream=original, **kwargs)
        announce(log_line())
        return timing.time_upstream(loaders, data.REPORT.get("run", "upstream"))

    swaps[original] = create_dataloaders
    serial = reader_wanted()
    if serial:
        swaps[adios_mod.AdiosDataset] = reader.AdiosDataset
        swaps[adios_mod.adios2_open] = reader.adios2_open
    for name, mod in list(sys.modules.items()):
        if name == "hydragnn" or name.startswith("hydragnn."):
            for attr, value in list(vars(mod).items()):
                try:
                    new = swaps.get(value)
                except TypeError:  # unhashable
                    continue
                if new is not None:
                    setattr(mod, attr, new)
    pre.create_dataloaders = load_data.create_dataloaders = create_dataloaders
    data.REPORT["reader"] = "MDLoader's serial reader" if serial else "upstream's"
    return {"reader": serial}


_ANNOUNCED: list = []


def announce(served: str | None) -> None:
    """Rank 0's one line: what was replaced and how the flags in use were mapped."""
    from mpi4py import MPI

    from . import data

    if _ANNOUNCED or MPI.COMM_WORLD.Get_rank() != 0:
        return
    _ANNOUNCED.append(True)
    parts = [f"AdiosDataset/adios2_open -> {data.REPORT.get('reader', '?')}"]
    parts.append(served or "create_dataloaders -> upstream's (no --ddstore, "
                           "HYDRAGNN_USE_ddstore=1 or MDLOADER_REPLACE=all)")
    notes = flag_notes(data.REPORT.get("argv", []))
    if notes:
        parts.append("flags: " + ", ".join(notes))
    print("mdloader: launcher: " + "; ".join(parts), file=sys.stderr, flush=True)


def log_line() -> str | None:
    """The launcher's one line on what MDLoader served (None if it served nothing)."""
    from . import data

    if "loaders" not in data.REPORT:
        return None
    ld, parts = data.REPORT["loaders"], []
    stores = data.REPORT.get("stores", [])
    if stores:
        _, nfiles, size, group = stores[0]
        w = group.size if group is not None else size
        parts.append(f"DistDataset -> MDLoader store ({nfiles} file{'s' * (nfiles > 1)}, "
                     f"{size} ranks, replica groups of {w})")
    parts.append(f"create_dataloaders -> MDLoader (backend {ld['backend']}, "
                 f"batch {ld['batch_size']}, shuffle train/val/test "
                 f"{'/'.join('yes' if s else 'no' for s in ld['shuffle'])}"
                 f", sampler over {ld['group']} of {ld['world']} ranks)")
    if "ddstore_group" in data.REPORT:
        w, size = data.REPORT["ddstore_group"]
        parts.append(f"group=ddstore_comm ({w} ranks) -> sampler over the {size} ranks of the "
                     "DistDataset (each replica group holds the whole store)")
    if ld["oversampling"]:
        parts.append(f"oversampling -> {ld['oversampling']} draws a rank (train/val/test)")
    if ld["node_budget"]:
        parts.append(f"Batching -> node budget {ld['node_budget']}")
    if ld["cap"] is not None:
        parts.append(f"HYDRAGNN_MAX_NUM_BATCH -> {ld['cap']} steps an epoch")
    return "; ".join(parts)

