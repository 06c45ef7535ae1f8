"""Documented settings: one table row (name, default, meaning) a setting, read by the code itself.

The configuration reference of the documentation is generated from these tables (and from the
integrations' own tables: ``integrations/hydragnn/config.py``, the fairchem ``loader`` group
``integrations/fairchem/conf/loader/mdloader.yaml``), so a setting and its documentation cannot
drift apart.
Code reads an environment variable through :func:`env`, which refuses a name that has no row
here; ``tests/integration/test_docs.py`` also checks that every ``MDLOADER_*`` name in the package
has one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from .errors import ConfigError


@dataclass(frozen=True)
class Option:
    """One setting: its name, the value used when it is not given, and what it does."""

    name: str
    default: Any
    meaning: str


def defaults(table: Iterable[Option]) -> dict:
    """``{name: default}`` of a table, in table order."""
    return {opt.name: opt.default for opt in table}


#: Data-set scale settings (docs/scale.md), the same three keys in every front end: the HydraGNN
#: config's ``mdloader:`` section, the fairchem ``loader`` group and ``build_loader``,
#: ``mdloader check`` (``--order``, ``--index``, ``--index-share``) and ``mdloader estimate``.
SCALE = (
    Option("order", "auto",
           "Epoch permutation: `torch` (DistributedSampler's, the frameworks' own order; a list "
           "of N ids a rank, 4 B a sample), `feistel` (a keyed bijection computed for the "
           "positions a step needs: no list, no epoch-start cost) or `auto` (torch up to "
           "4,194,304 samples, feistel above). Several data sets: `auto` or `torch`. See scale."),
    Option("index", "compact",
           "Global index: `compact` (record sizes as 1-2 B codes plus offsets: every offset kept "
           "up to 4,194,304 samples, 9-10 B a sample; one in 64 above, 1.1-2.1 B a sample) or "
           "`full` (int64 offset and length, 16 B a sample: the "
           "representation before the compact index). Same batches, byte for byte."),
    Option("index_share", "rank",
           "`rank`: every rank keeps its own copy of the index; `node`: one copy a node in an "
           "MPI shared-memory window (`index: compact` only), counted once a node."),
)


def check_scale(values: Mapping[str, Any], label: Callable[[str], str] = str) -> dict:
    """The :data:`SCALE` settings of `values` (missing ones at their defaults), validated.

    A bad value raises a one-line :class:`~mdloader_plugin.core.errors.ConfigError` naming the key
    as `label` spells it (``"cfg.yaml: mdloader.order"``, ``"--index-share"``) and the choices."""
    out = {opt.name: values.get(opt.name, opt.default) for opt in SCALE}
    for key, valid in scale_choices().items():
        if out[key] is None:
            out[key] = _SCALE_DEFAULTS[key]
        if out[key] not in valid:
            raise ConfigError(f"{label(key)}: {out[key]!r} is unknown; choose one of "
                              f"{', '.join(valid)}")
    if out["index"] == "full" and out["index_share"] == "node":
        raise ConfigError(f"{label('index_share')}: node needs the compact index (index "
                          "compact); the full index is private to each rank")
    return out


#: valid values of the :data:`SCALE` settings (the modules that implement them check that their
#: registries match: ``sampling/order.py``, ``store/index.py``)
ORDER_CHOICES = ("auto", "torch", "feistel")
INDEX_KINDS = ("compact", "full")
INDEX_SHARES = ("rank", "node")


def scale_choices() -> dict:
    """``{setting: valid values}`` of the :data:`SCALE` settings."""
    return {"order": ORDER_CHOICES, "index": INDEX_KINDS, "index_share": INDEX_SHARES}


#: Environment variables read by the ``mdloader_plugin`` package (the Slurm recipes' own
#: variables are listed on the Slurm page). ``None``: unset, the meaning says what happens then.
ENV = (
    Option("MDLOADER_PROFILE", None,
           "Machine profile (a name such as `perlmutter`, or a `mdloader calibrate` output file) "
           "for `backend: auto` when the loader or command is given none; unset: `local`."),
    Option("MDLOADER_PREFETCH_MIB", "32",
           "At most this many MiB of records wait in a loader's prefetch queue (one batch always "
           "may); the loader's `prefetch_mib` argument wins."),
    Option("MDLOADER_PRODUCER", "thread",
           "Who builds the batches when the loader's `producer` argument is not given: "
           "`thread` (the producer thread; its batch building releases the GIL). The former "
           "`process` (a helper process) is deprecated: accepted with a one-line warning, the "
           "thread runs."),
    Option("MDLOADER_KERNELS", "auto",
           "The compiled batch kernels (`mdloader_plugin/records/_kernels.c`, built by the "
           "install; they run with the GIL released): `auto` uses them when they load, `off` "
           "builds batches with numpy (the same bytes, more of the trainer's GIL a batch)."),
    Option("MDLOADER_FETCH_TIMEOUT", "600",
           "Seconds a rank may give no sign of life (its loader's heartbeat; a rank busy between "
           "steps still beats) before the rank watching it prints one line naming it and the "
           "ranks its own fetch waits for, and aborts the job; without MPI_THREAD_MULTIPLE, "
           "seconds a fetch may take. `0` turns the watchdog off."),
    Option("MDLOADER_CONVERT_TIMEOUT", "600",
           "Seconds a rank of `mdloader convert` may give no sign of life (one heartbeat thread "
           "a rank; a rank busy converting still beats) before the rank watching it prints one "
           "line naming it and aborts the job, also under a launcher that keeps a job alive "
           "after a rank died; the parts finished are kept for a resume. Every rank must have "
           "the same value; `0` turns the watch off."),
    Option("MDLOADER_READ_TIMEOUT", "600",
           "Seconds an ADIOS2 read may take before the job ends (a truncated file can make "
           "ADIOS2 wait forever); at least 1."),
    Option("MDLOADER_PROGRESS_THREAD", None,
           "`1`/`0`: force the one-sided backend's own progress thread on or off; unset: on "
           "whenever the ranks span several nodes."),
    Option("MDLOADER_COLL_PROGRESS_THREAD", None,
           "`1`/`0`: force the collective backend's progress thread on or off; unset: on "
           "whenever the ranks span several nodes (Alltoallv fragments are read while ranks "
           "pack and decode)."),
    Option("MDLOADER_LOG_LEVEL", None,
           "Level of the `mdloader` logger (`DEBUG`, `INFO`, `WARNING`, ...); unset: `INFO` on "
           "rank 0, `WARNING` on the other ranks."),
    Option("MDLOADER_LAUNCH_CHECK", "1",
           "`0` skips the check, made by every MPI command at start, that the MPI world size "
           "equals what the launcher started (`SLURM_NTASKS` under `srun`, the `mpiexec`'s own "
           "count otherwise); a mismatch stops every process with exit 2."),
    Option("MDLOADER_MPI_MAX_COUNT", str(2**31 - 1),
           "The most elements, and bytes, one MPI call carries: the index exchange, the "
           "node-shared index and replica copies, the fairchem atom counts, one-sided Gets and "
           "the collective exchange are cut into calls of at most this many (MPI-3.1 libraries, "
           "Cray MPICH 8.1 among them, take no count or displacement of `2**31` or more). "
           "Lower it only to test the cut paths (16 at least)."),
    Option("MDLOADER_CLUSTER_STATE", "/run/mdloader-cluster",
           "Folder where `mdloader cluster` keeps the state of emulated clusters."),
    Option("MDLOADER_REPLACE", None,
           "Upstream HydraGNN scripts under the launcher: `all`: MDLoader serves every "
           "`create_dataloaders` call, DDStore or not; `none`: only MDLoader's reader stands in, "
           "DDStore and the loaders stay upstream's; unset: MDLoader serves where the script asks "
           "for DDStore (`--ddstore`, `HYDRAGNN_USE_ddstore=1`)."),
    Option("MDLOADER_READER", None,
           "Upstream HydraGNN scripts under the launcher: whose reader serves `AdiosDataset` and "
           "`adios2_open`: `mdloader` or `upstream`; unset: MDLoader's where ADIOS2 has no MPI."),
    Option("MDLOADER_BACKEND", "auto",
           "Upstream HydraGNN scripts under the launcher: the loaders' backend (`auto`, "
           "`onesided`, `collective`)."),
)
_ENV = {opt.name: opt for opt in ENV}
_SCALE_DEFAULTS = defaults(SCALE)


def env(name: str) -> Any:
    """``$name`` if set (even to ""), else its default from :data:`ENV`.

    Raises ``KeyError`` for a variable without a row in :data:`ENV`: every variable the package
    reads is documented there."""
    return os.environ.get(name, env_default(name))


def env_default(name: str) -> Any:
    """The documented default of an environment variable (``KeyError`` if it has no row)."""
    return _ENV[name].default
