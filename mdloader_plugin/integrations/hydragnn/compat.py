"""The one place that knows where HydraGNN keeps things (3.0 on PyPI vs newer git versions).

HydraGNN 3.0 has flat modules (``hydragnn.utils.config_utils``, ``hydragnn.utils.distributed``,
``hydragnn.utils.tracer``, ...); later versions moved them into sub-packages
(``hydragnn.utils.input_config_parsing``, ``hydragnn.utils.distributed``,
``hydragnn.utils.print``, ``hydragnn.utils.datasets``, ``hydragnn.utils.profiling_and_tracing``).
Every HydraGNN function the integration calls is looked up here by name in a list of candidate
modules, first hit wins, so a version change means editing one table, not the driver.

It also owns the two things HydraGNN 3.0 gets wrong under a plain ``mpiexec``, and the
communicator of a ``create_dataloaders(group=...)`` (:func:`comm_of`, for the drop-in and the
launcher alike):

* ranks come only from ``OMPI_COMM_WORLD_*`` or ``SLURM_*`` (MPICH ranks all think they are 0):
  :func:`export_rank_env` sets the Open MPI names from MPI when neither is present;
* ``setup_ddp`` binds the fixed port 8889 (two jobs on a node collide): :func:`init_distributed`
  initialises ``torch.distributed`` on a free port chosen by rank 0 and broadcast over MPI, so
  ``setup_ddp`` finds it initialised and only records the environment.

Supported: HydraGNN 3.0 (PyPI) and 5.0 (GitHub tag v5.0, installed from a checkout with
``pip install -e`` or put on ``PYTHONPATH``). :func:`version` tells them apart by what the
package contains (a 5.0 tree on PYTHONPATH still reports 3.0's pip metadata). What differs and
lives here: the architecture key (``model_type`` in 3.0, ``mpnn_type`` in 5.0;
:func:`upstream_config`), ``train_validate_test``'s ``compute_grad_energy``/``precision``
(5.0 only; :func:`train_kwargs`), the per-epoch batch cap ``HYDRAGNN_MAX_NUM_BATCH`` (5.0 only;
:func:`max_batches`), 5.0's multibranch heads (several ``branch-K`` output heads: refused under
3.0; DDP told that a batch may leave a branch unused, :func:`ddp_kwargs`), and which options each
version can honour (:func:`check_config`).
"""

from __future__ import annotations

import atexit
import importlib
import os
from typing import Any, Callable

from ...core.errors import ConfigError

# name -> modules to try, newest layout first.
_WHERE: dict[str, tuple[str, ...]] = {
    "setup_ddp": ("hydragnn.utils.distributed", "hydragnn.utils.distributed.distributed"),
    "get_distributed_model": ("hydragnn.utils.distributed",
                              "hydragnn.utils.distributed.distributed"),
    "get_device": ("hydragnn.utils.distributed", "hydragnn.utils.distributed.distributed"),
    "setup_log": ("hydragnn.utils.print", "hydragnn.utils.print.print_utils",
                  "hydragnn.utils.print_utils"),
    "update_config": ("hydragnn.utils.input_config_parsing",
                      "hydragnn.utils.input_config_parsing.config_utils",
                      "hydragnn.utils.config_utils"),
    "save_config": ("hydragnn.utils.input_config_parsing",
                    "hydragnn.utils.input_config_parsing.config_utils",
                    "hydragnn.utils.config_utils"),
    "get_log_name_config": ("hydragnn.utils.input_config_parsing",
                            "hydragnn.utils.input_config_parsing.config_utils",
                            "hydragnn.utils.config_utils"),
    "select_optimizer": ("hydragnn.utils.optimizer", "hydragnn.utils.optimizer.optimizer"),
    "save_model": ("hydragnn.utils.model", "hydragnn.utils.model.model"),
    "get_summary_writer": ("hydragnn.utils.model", "hydragnn.utils.model.model"),
    "print_timers": ("hydragnn.utils.profiling_and_tracing.time_utils",
                     "hydragnn.utils.time_utils"),
    "create_model_config": ("hydragnn.models.create", "hydragnn.models"),
    "train_validate_test": ("hydragnn.train.train_validate_test", "hydragnn.train"),
    "create_dataloaders": ("hydragnn.preprocess.load_data", "hydragnn.preprocess"),
    "check_if_graph_size_variable": ("hydragnn.preprocess",),
    "load_existing_model": ("hydragnn.utils.model", "hydragnn.utils.model.model"),
}

GITHUB_ROUTE = ("HydraGNN 5.0: `git clone --branch v5.0 https://github.com/ORNL/HydraGNN && "
                "pip install --no-deps -e HydraGNN` (or put the checkout first on PYTHONPATH) plus "
                "`MAX_JOBS=2 pip install --no-build-isolation torch-scatter==2.1.2 vesin==0.4.2`; "
                "or HydraGNN 3.0: `pip install --no-deps hydragnn==3.0` plus matplotlib tqdm "
                "tensorboard ase scikit-learn psutil; see docs/hydragnn-5.md")
ARCH_KEY = {"3.0": "model_type", "5.0": "mpnn_type", "main": "mpnn_type",
            "main527": "mpnn_type"}
#: The versions that read the named data schema (a top-level ``Variables`` section).
NAMED = ("main527",)

LOGGER_NAME = "hydragnn"  # the logger setup_log() attaches run.log and the console to


def hydragnn_version() -> str:
    """The installed HydraGNN's version string, or ``unknown``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("HydraGNN")
    except PackageNotFoundError:
        return "unknown"


def require_hydragnn() -> str:
    """Import HydraGNN (3.0 or 5.0) and return :func:`version`, or fail with one line saying
    how to install a supported one."""
    try:
        importlib.import_module("hydragnn")
    except ImportError as exc:
        raise ConfigError(f"cannot import hydragnn ({exc}); install {GITHUB_ROUTE}") from None
    return version()


def _has(module: str, name: str | None = None) -> bool:
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return False
    return name is None or hasattr(mod, name)


def version() -> str:
    """``"main527"``, ``"main"``, ``"5.0"`` or ``"3.0"``: the layout of the imported hydragnn
    package (main: 5.0's layout plus ``hydragnn.preprocess.batch_sampler``, upstream's cost-aware
    batching; main527: main plus ``input_config_parsing.variable_schema``, the named data
    schema); anything else is refused with one line (the integration is tested against those)."""
    import hydragnn

    if _has("hydragnn.train.train_validate_test", "resolve_precision") and \
            _has("hydragnn.utils.input_config_parsing", "update_config"):
        if _has("hydragnn.utils.input_config_parsing.variable_schema", "parse_variable_schema"):
            return "main527"
        return "main" if _has("hydragnn.preprocess.batch_sampler") else "5.0"
    if _has("hydragnn.utils.config_utils", "update_config") and \
            not _has("hydragnn.utils.input_config_parsing"):
        return "3.0"
    where = os.path.dirname(getattr(hydragnn, "__file__", "") or "?")
    raise ConfigError(f"HydraGNN at {where} ({hydragnn_version()} by its metadata) is none of "
                      f"3.0, 5.0, main and main527, the versions MDLoader supports; install "
                      f"{GITHUB_ROUTE}")


def check_config(cfg: dict, ver: str) -> None:
    """Refuse, in one line naming the key, an option HydraGNN `ver` or MDLoader cannot honour."""
    check_form(cfg, ver)
    nn = cfg["NeuralNetwork"]
    precision = nn["Training"].get("precision", "fp32")
    if ver == "3.0" and precision != "fp32":
        raise ConfigError(f"NeuralNetwork.Training.precision: {precision} needs HydraGNN 5.0 "
                          f"(3.0 trains fp32 only); install {GITHUB_ROUTE}")
    if ver == "3.0" and nn["Architecture"].get("enable_interatomic_potential"):
        raise ConfigError("NeuralNetwork.Architecture.enable_interatomic_potential (energy + "
                          f"forces) needs HydraGNN 5.0; install {GITHUB_ROUTE}")
    if ver == "3.0" and num_branches(cfg) > 1:
        raise ConfigError("NeuralNetwork.Architecture.output_heads with several branches "
                          f"(multibranch) needs HydraGNN 5.0; install {GITHUB_ROUTE}")
    batching = nn["Training"].get("Batching") or {}
    if batching.get("mode", "fixed") != "fixed" and ver not in ("main", "main527"):
        raise ConfigError(f"NeuralNetwork.Training.Batching mode {batching.get('mode')!r} "
                          f"(cost-aware batches) needs HydraGNN main; {ver} batches a fixed "
                          "number of graphs (drop Batching or install main, docs/hydragnn-5.md)")
    if (nn.get("Variables_of_interest") or {}).get("denormalize_output"):
        raise ConfigError("NeuralNetwork.Variables_of_interest.denormalize_output: true reads "
                          "HydraGNN's serialized pickle min/max files, which an ADIOS2 run has "
                          "not got; set it to false (Dataset.normalize_y scales y instead)")
    if nn["Training"].get("continue") and not nn["Training"].get("startfrom"):
        raise ConfigError("NeuralNetwork.Training.continue is set but startfrom (the run name "
                          "under logs/ to load) is missing")
    if nn["Training"].get("continue"):
        from .resume import check_startfrom

        check_startfrom(nn["Training"]["startfrom"])


def check_form(cfg: dict, ver: str) -> None:
    """The config's variable form against HydraGNN `ver`: the named data schema (a top-level
    ``Variables`` section) for main527, ``NeuralNetwork.Variables_of_interest`` (positional
    columns) for the older versions; the wrong one is refused in one line naming the version,
    the key and what to change."""
    named = "Variables" in cfg
    old = "Variables_of_interest" in (cfg.get("NeuralNetwork") or {})
    if ver in NAMED and old:
        raise ConfigError(f"NeuralNetwork.Variables_of_interest: HydraGNN {ver} (main with the "
                          "named data schema) reads a top-level Variables section instead "
                          "(inputs/outputs by name, level and dim); replace the section with "
                          "Variables, or install HydraGNN main d251f81 or 5.0 "
                          "(docs/hydragnn-5.md)")
    if ver in NAMED and not named:
        raise ConfigError(f"Variables: HydraGNN {ver} (main with the named data schema) needs a "
                          "top-level Variables section (inputs/outputs by name, level and dim); "
                          "add one (docs/hydragnn-5.md)")
    if ver not in NAMED and named:
        raise ConfigError(f"Variables: the top-level Variables section (the named data schema) "
                          f"needs HydraGNN main with it (main527); HydraGNN {ver} reads "
                          "NeuralNetwork.Variables_of_interest (input_node_features, type, "
                          "output_index, ...): write that section instead, or install main527 "
                          "(docs/hydragnn-5.md)")
    if named and (cfg.get("Dataset") or {}).get("normalize_y"):
        raise ConfigError("Dataset.normalize_y: with the named data schema the targets are the "
                          "file's named keys as written (upstream scales none); set it to false")


def upstream_config(cfg: dict, ver: str) -> dict:
    """`cfg` (MDLoader's vocabulary: ``mpnn_type``) in the vocabulary HydraGNN `ver` reads."""
    arch = cfg["NeuralNetwork"]["Architecture"]
    arch[ARCH_KEY[ver]] = arch.get("mpnn_type", arch.get("model_type"))
    return cfg


def num_branches(cfg: dict) -> int:
    """How many output branches ``Architecture.output_heads`` configures: the length of its
    longest list of ``{type: branch-K, architecture: ...}`` entries (5.0's multibranch form;
    a head given as a plain dict is one branch)."""
    heads = cfg["NeuralNetwork"]["Architecture"].get("output_heads") or {}
    return max([len(v) for v in heads.values() if isinstance(v, list)] or [1])


def ddp_kwargs(cfg: dict) -> dict:
    """Keyword arguments of ``get_distributed_model``: with several branches a batch (or a whole
    rank, under upstream's oversampling split) may hold no graph of some branch, whose parameters
    then get no gradient; DDP is told so (``find_unused_parameters``), or it stops at the next
    step."""
    return {"find_unused_parameters": True} if num_branches(cfg) > 1 else {}


def param_dtype(cfg: dict):
    """The model's parameter dtype for ``Training.precision`` (bf16 keeps fp32 parameters and
    autocasts, as upstream)."""
    import torch

    return torch.float64 if cfg["NeuralNetwork"]["Training"].get("precision") == "fp64" \
        else torch.float32


def train_kwargs(cfg: dict, ver: str) -> dict:
    """Keyword arguments of ``train_validate_test`` beyond 3.0's, as upstream's scripts pass
    them: ``compute_grad_energy`` from ``Architecture.enable_interatomic_potential`` and
    ``precision`` from ``Training.precision``."""
    if ver == "3.0":
        return {}
    nn = cfg["NeuralNetwork"]
    return {"compute_grad_energy": bool(nn["Architecture"].get("enable_interatomic_potential",
                                                               False)),
            "precision": nn["Training"].get("precision", "fp32")}


def train_config(cfg: dict, ver: str) -> dict:
    """What ``train_validate_test`` takes as its config: the whole config on main527 (it reads
    ``Variables`` and ``NeuralNetwork``), ``NeuralNetwork`` on the older versions."""
    return cfg if ver in NAMED else cfg["NeuralNetwork"]


def max_batches(ver: str = "5.0") -> int | None:
    """HydraGNN 5.0 and later end every epoch after ``HYDRAGNN_MAX_NUM_BATCH`` batches (3.0
    ignores it); a value that is not an integer is a :class:`ConfigError`. Rank-local: callers
    read it through :func:`~mdloader_plugin.mpi.agree.everywhere` (one line on every rank), and
    every MDLoader's construction agrees the variable itself across ranks."""
    cap = os.getenv("HYDRAGNN_MAX_NUM_BATCH")
    if ver == "3.0" or cap is None:
        return None
    try:
        return max(int(cap), 0)
    except ValueError:
        raise ConfigError(f"HYDRAGNN_MAX_NUM_BATCH={cap!r} is not an integer") from None


def get(name: str) -> Callable[..., Any]:
    """HydraGNN's function `name`, from whichever module this version keeps it in."""
    tried = []
    for mod_name in _WHERE[name]:
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            tried.append(mod_name)
            continue
        fn = getattr(mod, name, None)
        if fn is not None:
            return fn
        tried.append(mod_name)
    raise ConfigError(f"HydraGNN {hydragnn_version()} has no {name} in any of "
                      f"{', '.join(tried)}; MDLoader supports HydraGNN 3.0, 5.0, main and main527")


def setup_log(name: str) -> None:
    """HydraGNN's setup_log (logs/<name>/run.log + console), without the handlers an earlier run
    in this process attached (setup_log only ever adds them)."""
    import logging

    logger = logging.getLogger(LOGGER_NAME)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    get("setup_log")(name)


def export_rank_env(rank: int, size: int) -> None:
    """Let HydraGNN 3.0 (which reads OMPI_COMM_WORLD_* or SLURM_*) see the MPI rank."""
    have_ompi = os.getenv("OMPI_COMM_WORLD_RANK") and os.getenv("OMPI_COMM_WORLD_SIZE")
    have_slurm = os.getenv("SLURM_NPROCS") and os.getenv("SLURM_PROCID")
    if have_ompi and int(os.environ["OMPI_COMM_WORLD_SIZE"]) == size:
        return
    if have_slurm and int(os.environ["SLURM_NPROCS"]) == size:
        return
    os.environ["OMPI_COMM_WORLD_RANK"] = str(rank)
    os.environ["OMPI_COMM_WORLD_SIZE"] = str(size)


def comm_of(group, default=None):
    """The mpi4py communicator of ``create_dataloaders(group=...)``: None is `default` (else the
    world), an mpi4py communicator is itself, torch's default group is the world, and a torch
    sub-group (upstream's ``--task_parallel`` branch group) is split from the world by its ranks
    (collective over the world: every rank passes its own group, as upstream's scripts do)."""
    from mpi4py import MPI

    if group is None:
        return default if default is not None else MPI.COMM_WORLD
    if isinstance(group, MPI.Comm):
        return group
    import torch.distributed as dist

    if not dist.is_initialized():
        raise ConfigError(f"create_dataloaders(group={group!r}): neither an mpi4py communicator "
                          "nor a torch process group (torch.distributed is not initialised); "
                          "pass the mpi4py communicator of the ranks")
    if group == dist.group.WORLD:
        return MPI.COMM_WORLD
    ranks = sorted(dist.get_process_group_ranks(group))
    return MPI.COMM_WORLD.Split(ranks[0], MPI.COMM_WORLD.Get_rank())


def _leave_distributed() -> None:
    """At exit: leave torch.distributed cleanly (NCCL warns of leaked resources otherwise)."""
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def init_distributed(comm, single_node: bool) -> None:
    """Initialise torch.distributed (gloo on CPU) on a port rank 0 picks, then HydraGNN's DDP.

    `comm` is an mpi4py communicator spanning the job (collective call).
    """
    import torch
    import torch.distributed as dist

    rank, size = comm.Get_rank(), comm.Get_size()
    export_rank_env(rank, size)
    if not dist.is_initialized():
        from ...mpi.world import rendezvous_env

        env = rendezvous_env(comm, single_node)
        addr, port = env["MASTER_ADDR"], env["MASTER_PORT"]
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(size))
        backend = os.getenv("HYDRAGNN_BACKEND") or (
            "nccl" if torch.cuda.is_available() else "gloo")
        dist.init_process_group(backend=backend, init_method=f"tcp://{addr}:{port}",
                                rank=rank, world_size=size)
        atexit.register(_leave_distributed)  # before MPI's own exit handler (registered earlier)
    get("setup_ddp")()  # finds the group initialised; records HydraGNN's environment only
