"""HydraGNN run configuration: HydraGNN's own JSON/YAML config plus MDLoader's top-level keys.

A config is what HydraGNN users already write (``Verbosity``, ``Dataset``, ``NeuralNetwork`` with
``Architecture``, ``Variables_of_interest``, ``Training``) plus these top-level keys::

    loader: mdloader              # or: hydragnn (HydraGNN's own DataLoader, the baseline)
    mdloader: {backend: auto, prefetch: 2, profile: local,   # used when loader: mdloader
               max_memory_per_rank: 4GiB,                   # stop early if a store won't fit
               group_size: auto,     # replica groups: auto, a number of ranks, or all (default);
                                     # `width` is accepted as DDStore's name for it
               order: auto, index: compact, index_share: rank,  # data-set scale (options.SCALE)
               device: auto, pin_memory: true}  # batches onto the GPU (default: host batches)
    hydragnn_loader: {preload: false}                        # used when loader: hydragnn
    seed: 0                       # model init and shuffling (same seed -> same batches)
    run_name: gin-demo            # logs/<run_name>/run.log (default: HydraGNN's own log name)
    Dataset: {name: ..., path: data/demo.bp, normalize_y: true, ...}

``Dataset.path`` is one ADIOS2 file in HydraGNN's layout with ``trainset``/``valset``/``testset``
(``$VARS`` and ``~`` are expanded; relative paths are relative to the working directory, as in
HydraGNN, which also writes ``logs/`` there), HydraGNN's own mapping of one file a split
(``{train: a.bp, validate: b.bp, test: c.bp}``: each file read at its split's label, ``trainset``,
``valset`` or ``testset``; ``{total: x.bp}`` is the one file), or a list of files, each a named
data set (``[{name: mols, path: a.bp, weight: 0.7}, {name: bulk, path: b.bp, weight: 0.3}]``;
``NAME=PATH`` strings work too; the name defaults to the file's ``dataset_name``): one store over
all of them, every graph carrying its data set's id as ``data.dataset_name`` (``[1, 1]`` int64,
HydraGNN 5.0's multibranch routing tensor). ``mdloader.sampling`` picks how they share an epoch
(:mod:`mdloader_plugin.sampling.mixes`; default: the weights if given, else proportional to size).
``--set KEY=VALUE`` overrides any key by dotted path; VALUE is parsed as YAML (``3``, ``true``,
``[0, 1]``, ``collective``). Validation names the bad key and the valid choices in one line.
HydraGNN keys are read in upstream's (5.0) vocabulary: ``Architecture.mpnn_type`` (3.0's
``model_type`` is accepted and renamed; both with different values is refused) and
``Training.precision`` (fp32, fp64, bf16 and upstream's aliases, stored canonical).
"""

from __future__ import annotations

import copy
import json
import os
from typing import Any, Iterable

import yaml

from ...core.errors import ConfigError
from ...core.options import SCALE, Option, check_scale, defaults

LOADERS = ("mdloader", "hydragnn")
BACKENDS = ("auto", "onesided", "collective")

#: MDLoader's top-level keys in a HydraGNN config (the rest is HydraGNN's own).
TOP_LEVEL = (
    Option("loader", "mdloader", "`mdloader`, or `hydragnn`: HydraGNN's own DataLoader with "
                                 "DistributedSampler (the baseline)."),
    Option("mdloader", {}, "Options of MDLoader (below), used when `loader: mdloader`."),
    Option("hydragnn_loader", {}, "Options of HydraGNN's own loader (below), used when "
                                  "`loader: hydragnn`."),
    Option("seed", 0, "Model initialisation and shuffling: the same seed gives the same batches "
                      "and the same losses with either loader."),
    Option("run_name", None, "Logs go to `logs/<run_name>/run.log`; unset: HydraGNN's own log "
                             "name."),
    Option("Dataset.path", None, "Required: one ADIOS2 file in HydraGNN's layout holding "
                                 "`trainset`, `valset` and `testset`; `$VARS` and `~` are "
                                 "expanded. Or HydraGNN's mapping of one file a split, "
                                 "`{train: a.bp, validate: b.bp, test: c.bp}` (each read at "
                                 "its split's label). Or a list of files, each a named data set: "
                                 "`[{name: mols, path: a.bp, weight: 0.7}, ...]` (see "
                                 "docs/multi-dataset.md)."),
    Option("Dataset.normalize_y", False, "`true`: min-max scale `y` with the train set's range."),
)
#: ``mdloader:`` section (``loader: mdloader``).
MDLOADER_OPTIONS = (
    Option("backend", "auto", "`auto` (the cost model picks, the online trial corrects it), "
                              "`onesided` or `collective`."),
    Option("prefetch", 2, "Steps the producer thread runs ahead of the trainer (0: fetch in the "
                          "trainer's thread)."),
    Option("profile", None, "Machine profile for `backend: auto`: `local`, `perlmutter`, "
                            "`frontier` or a `mdloader calibrate` output file; unset: "
                            "`$MDLOADER_PROFILE`, else `local`."),
    Option("seed", None, "Shuffling seed; unset: the top-level `seed`."),
    Option("drop_last", False, "As DistributedSampler: drop the tail instead of padding it."),
    Option("max_memory_per_rank", None, "Stop before loading if a rank's store would be larger "
                                        "(bytes or `4GiB`, `512MiB`, `8GB`); applies to each "
                                        "split's store."),
    Option("group_size", None, "Replica groups: `auto` (the estimator picks the group size "
                               "with the backend, within `max_memory_per_rank` or half the "
                               "node's free memory), a number of ranks `W` (each group of `W` "
                               "ranks holds a whole copy; node-aligned, dividing the ranks), "
                               "or unset/`all`: one copy over all ranks. See replica-groups."),
    Option("width", None, "DDStore's name for `group_size` (`--ddstore_width`)."),
    Option("replicate", "auto", "How replica groups get their copies: `read` (every group "
                                "reads the file), `copy` (read once, copied across groups over "
                                "MPI) or `auto` (`copy` on one node, else `read`). See "
                                "replica-groups."),
    Option("sampling", None, "With several files: how the train split shares an epoch among "
                             "them (`{type: temperature, temperature: 2}`, `weights`, `explicit`, "
                             "`balanced`, `weighted`, `hydragnn`); unset: the files' weights if "
                             "given, else proportional to size."),
    Option("device", None, "Batches onto the trainer's device: `auto` (the device HydraGNN "
                           "trains on, when it is a GPU; the copy overlaps compute on a side "
                           "CUDA stream), a torch device (`cuda:0`), or unset: host batches "
                           "that HydraGNN copies itself. See gpu-feeding."),
    Option("pin_memory", None, "Page-locked host batches: unset pins when `device` is a GPU; "
                               "`true`/`false` forces it."),
    *SCALE,
)
#: ``hydragnn_loader:`` section (``loader: hydragnn``).
HYDRAGNN_LOADER_OPTIONS = (
    Option("preload", False, "`true`: every rank reads the whole file into memory; `false`: "
                             "each graph is read from the file on demand, as HydraGNN's "
                             "`AdiosDataset` does by default."),
)
TOP_LEVEL_DEFAULTS = defaults(TOP_LEVEL)
MDLOADER_DEFAULTS = defaults(MDLOADER_OPTIONS)
SECTIONS = ("loader", "mdloader", "hydragnn_loader")
HYDRAGNN_LOADER_DEFAULTS = defaults(HYDRAGNN_LOADER_OPTIONS)


def load(path: str | os.PathLike, overrides: Iterable[str] = ()) -> dict:
    """Read a JSON or YAML config, apply ``KEY=VALUE`` overrides, fill defaults, validate."""
    cfg = read_file(path)
    for item in overrides:
        apply_override(cfg, item)
    return normalise(cfg, source=os.fspath(path))


def read_file(path: str | os.PathLike) -> dict:
    """The config file as a dict (JSON by its ``.json`` suffix, else YAML), or a one-line error."""
    path = os.fspath(path)
    try:
        with open(path) as f:
            text = f.read()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config ({exc.strerror})") from None
    try:
        cfg = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"{path}: not valid {'JSON' if path.endswith('.json') else 'YAML'} "
                          f"({first})") from None
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path}: the config must be a mapping of keys, got "
                          f"{type(cfg).__name__}")
    return cfg


def apply_override(cfg: dict, item: str) -> None:
    """Apply one ``a.b.c=value`` override in place (value parsed as YAML)."""
    key, sep, text = item.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set loader=hydragnn")
    try:
        value = yaml.safe_load(text) if text.strip() else ""
    except yaml.YAMLError:
        value = text
    node = cfg
    parts = key.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"--set {item!r}: {part!r} is a value, not a section")
        node = child
    node[parts[-1]] = value


def normalise(cfg: dict, source: str = "config") -> dict:
    """A validated deep copy with MDLoader's defaults filled in."""
    cfg = copy.deepcopy(cfg)
    _check_spelling(cfg, source)
    name = cfg.setdefault("loader", TOP_LEVEL_DEFAULTS["loader"])
    if name not in LOADERS:
        raise ConfigError(f"{source}: loader: {name!r} is unknown; choose one of "
                          f"{', '.join(LOADERS)}")
    cfg["mdloader"] = {**MDLOADER_DEFAULTS, **(cfg.get("mdloader") or {})}
    cfg["hydragnn_loader"] = {**HYDRAGNN_LOADER_DEFAULTS, **(cfg.get("hydragnn_loader") or {})}
    if cfg["mdloader"]["backend"] not in BACKENDS:
        raise ConfigError(f"{source}: mdloader.backend: {cfg['mdloader']['backend']!r} is "
                          f"unknown; choose one of {', '.join(BACKENDS)}")
    _check_mdloader_options(cfg["mdloader"], source)
    cfg.setdefault("seed", TOP_LEVEL_DEFAULTS["seed"])
    if cfg["mdloader"]["seed"] is None:
        cfg["mdloader"]["seed"] = cfg["seed"]
    cfg.setdefault("Verbosity", {"level": 1})
    _require(cfg, source, "Dataset.path", (str, list, dict))
    cfg["Dataset"]["path"] = _dataset_paths(cfg["Dataset"]["path"], source)
    if isinstance(cfg["Dataset"]["path"], list) and cfg["mdloader"]["order"] == "feistel":
        raise ConfigError(f"{source}: mdloader.order: feistel is not available with several "
                          "Dataset.path files (their epoch is an expanded list); use auto or "
                          "torch")
    _architecture_vocabulary(cfg, source)
    _precision(cfg, source)
    # the variables: named (top-level Variables, HydraGNN main527) or positional (older);
    # which one the installed HydraGNN reads is checked against it (compat.check_form)
    variables = (("Variables.inputs", "Variables.outputs") if "Variables" in cfg else
                 ("NeuralNetwork.Variables_of_interest.input_node_features",
                  "NeuralNetwork.Variables_of_interest.type"))
    for key in ("NeuralNetwork.Architecture.hidden_dim",
                "NeuralNetwork.Architecture.num_conv_layers", *variables,
                "NeuralNetwork.Training.num_epoch", "NeuralNetwork.Training.batch_size",
                "NeuralNetwork.Training.Optimizer.learning_rate"):
        _require(cfg, source, key)
    return cfg


#: HydraGNN's own keys of a ``Dataset.path`` mapping -> the label each file's split is read from
SPLIT_KEYS = {"train": "trainset", "validate": "valset", "test": "testset"}


def _dataset_paths(path, source: str):
    """One path (expanded), HydraGNN's mapping of split files (``{train: a.bp, validate: b.bp,
    test: c.bp}`` as ``{trainset: a.bp, ...}``; ``{total: x.bp}`` as the one file) or a list of
    data set entries (validated, as mappings)."""
    if isinstance(path, dict):
        return _split_paths(path, source)
    if isinstance(path, str):
        return os.path.expanduser(os.path.expandvars(path))
    from ...sources.multi import parse_specs

    specs = parse_specs(path)
    for s in specs:
        w = s.weight
        if w is not None and (isinstance(w, bool) or not isinstance(w, (int, float)) or w < 0):
            raise ConfigError(f"{source}: Dataset.path: weight of {s.name or s.path} must be a "
                              f"number >= 0, got {w!r}")
    return [{"path": s.path, "name": s.name, "weight": s.weight} for s in specs]


def _split_paths(path: dict, source: str):
    """HydraGNN's ``Dataset.path`` mapping: ``total`` alone (one file holding every split), or
    ``train``, ``validate`` and ``test``, each one file read at its split's label."""
    names = ", ".join(map(str, path))
    if set(path) == {"total"} and isinstance(path["total"], str):
        return _dataset_paths(path["total"], source)
    if set(path) != set(SPLIT_KEYS) or not all(isinstance(v, str) for v in path.values()):
        raise ConfigError(f"{source}: Dataset.path: a mapping needs the files of train, validate "
                          f"and test (HydraGNN's keys; or total: one file of all three), each a "
                          f"path, got {{{names}}}")
    return {SPLIT_KEYS[k]: _dataset_paths(v, source) for k, v in path.items()}


# Training.precision values upstream HydraGNN 5.0 accepts (resolve_precision), canonical form.
PRECISIONS = {"fp32": "fp32", "float32": "fp32", "float": "fp32", "fp64": "fp64",
              "float64": "fp64", "double": "fp64", "bf16": "bf16", "bfloat16": "bf16"}


def _architecture_vocabulary(cfg: dict, source: str) -> None:
    """Upstream's ``Architecture.mpnn_type``; HydraGNN 3.0's ``model_type`` is accepted and
    renamed. Both present and different is refused (which one was meant is unknowable)."""
    arch = _require(cfg, source, "NeuralNetwork.Architecture", dict)
    old, new = arch.get("model_type"), arch.get("mpnn_type")
    if old is not None and new is not None and old != new:
        raise ConfigError(f"{source}: NeuralNetwork.Architecture has model_type: {old!r} "
                          f"(HydraGNN 3.0's name) and mpnn_type: {new!r} (5.0's); keep only "
                          "mpnn_type")
    if old is None and new is None:
        raise ConfigError(f"{source}: NeuralNetwork.Architecture.mpnn_type is missing (HydraGNN "
                          "3.0's model_type is accepted too), e.g. mpnn_type: GIN")
    arch.pop("model_type", None)
    arch["mpnn_type"] = new if new is not None else old


def _precision(cfg: dict, source: str) -> None:
    training = _require(cfg, source, "NeuralNetwork.Training", dict)
    value = training.get("precision", "fp32")
    canonical = PRECISIONS.get(str(value).lower())
    if canonical is None:
        raise ConfigError(f"{source}: NeuralNetwork.Training.precision: {value!r} is not one "
                          "HydraGNN allows; choose fp32, fp64 or bf16")
    training["precision"] = canonical


def _check_spelling(cfg: dict, source: str) -> None:
    """A top-level key one typo away from ``loader``/``mdloader``/``hydragnn_loader`` would be
    silently ignored (and the default loader used): refuse it."""
    import difflib

    for key in cfg:
        close = difflib.get_close_matches(str(key), SECTIONS, n=1, cutoff=0.75)
        if close and key not in SECTIONS:
            raise ConfigError(f"{source}: top-level key {key!r} is not known; did you mean "
                              f"{close[0]!r}?")


def _check_mdloader_options(opts: dict, source: str) -> None:
    from ...core.units import parse_bytes

    unknown = sorted(set(opts) - set(MDLOADER_DEFAULTS))
    if unknown:
        raise ConfigError(f"{source}: mdloader.{unknown[0]} is not an option; options: "
                          f"{', '.join(MDLOADER_DEFAULTS)}")
    pf = opts["prefetch"]
    if isinstance(pf, bool) or not isinstance(pf, int) or pf < 0:
        raise ConfigError(f"{source}: mdloader.prefetch must be an integer >= 0, got {pf!r}")
    opts["max_memory_per_rank"] = parse_bytes(opts["max_memory_per_rank"],
                                              f"{source}: mdloader.max_memory_per_rank")
    from ...mpi.groups import from_options

    opts["group_size"], opts["width"] = from_options(opts, f"{source}: mdloader"), None
    opts.update(check_scale(opts, lambda key: f"{source}: mdloader.{key}"))


def _require(cfg: dict, source: str, dotted: str, kind: type | None = None) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise ConfigError(f"{source}: {dotted} is missing; HydraGNN needs it (see "
                              "recipes/hydragnn/demo.yaml for a complete config)")
        node = node[part]
    if kind is not None and not isinstance(node, kind):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise ConfigError(f"{source}: {dotted} must be a {names}, got {node!r}")
    return node


def run_name(cfg: dict) -> str:
    """``logs/<run_name>``: the config's ``run_name``, else HydraGNN's own naming."""
    if cfg.get("run_name"):
        return str(cfg["run_name"])
    from . import compat

    named = copy.deepcopy(cfg)  # HydraGNN 5.0's name reads radius, which update_config defaults
    named["NeuralNetwork"]["Architecture"].setdefault("radius", None)
    return compat.get("get_log_name_config")(named)

