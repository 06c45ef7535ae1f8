"""Machine profiles: the numbers the cost models read, as JSON data files.

A profile is ``{"name", "description", "provenance", "params": {key: {"value", "source"}}}``,
optionally with ``"node_params"`` (same shape, a subset of the keys): the same-host terms that a
calibration across several hosts measured again on a per-node sub-communicator (``calibrate.py``),
which a job or replica group inside one node uses instead (``choose.node_params``).
Profiles without it (every one written before) load unchanged. An optional parameter
(``models.optional_params``, e.g. ``coll.t_count``) a profile lacks takes its stand-in's value,
and its source says so: a profile written before it prices exactly as before.
Shipped profiles live in ``estimator/profiles/`` (``perlmutter`` and ``frontier`` from published
figures, ``local`` a fallback measured on a small x86 box); ``mdloader calibrate`` writes one for
the machine it runs on. Every value carries its source, so a reader can tell a measured number
from a vendor figure from an assumption.

Validation is strict and speaks in one line naming the file and key: a missing key, a value that
is not a number, or one outside the plausible range of its unit (a latency of 3 s, a bandwidth
of 10 B/s) is an error, because a silently absurd profile makes every choice wrong.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import ConfigError
from ..core.options import env
from .models import optional_params, required_params

PROFILE_DIR = Path(__file__).resolve().parent / "profiles"
ENV_VAR = "MDLOADER_PROFILE"

#: plausible range of each unit: latencies 1 ns..1 s, bandwidths 1 MB/s..10 TB/s, sizes 0..1 GB,
#: flags 0..1
RANGES = {"s": (1e-9, 1.0), "B/s": (1e6, 1e13), "B": (0.0, 1e9), "flag": (0.0, 1.0)}


class ProfileError(ConfigError):
    """A profile file is missing, unreadable or holds an absurd number."""


@dataclass(frozen=True)
class Profile:
    """A validated machine profile."""

    name: str
    params: dict[str, float]
    sources: dict[str, str] = field(default_factory=dict)
    description: str = ""
    provenance: dict = field(default_factory=dict)
    path: str = ""
    node: dict[str, float] = field(default_factory=dict)  # measured inside one node (optional)
    node_sources: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        doc = {"name": self.name, "description": self.description,
               "provenance": self.provenance,
               "params": {k: {"value": v, "source": self.sources.get(k, "")}
                          for k, v in sorted(self.params.items())}}
        if self.node:
            doc["node_params"] = {k: {"value": v, "source": self.node_sources.get(k, "")}
                                  for k, v in sorted(self.node.items())}
        return doc

    def write(self, path: str | os.PathLike) -> None:
        """Write the profile to `path` atomically (:func:`write_atomic`)."""
        write_atomic(path, json.dumps(self.to_json(), indent=2) + "\n")


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """`text` into `path` so that no reader ever sees a part of it: a temporary file in the
    same folder, flushed to disk, renamed over `path` (``os.replace``). A job starting while
    ``mdloader calibrate`` writes reads the old profile or the new one, never half of one
    (the Slurm recipes skip calibration when the file is non-empty). Missing folders of
    `path` are made (``calibrate --out profiles/HOST.json``)."""
    import tempfile

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def identity(prof: Profile) -> tuple[str, str]:
    """(what a profile's numbers are, how to name it): its contents' JSON, and its file (or
    name) with a short digest of the contents, to compare the profiles ranks read."""
    text = json.dumps(prof.to_json(), sort_keys=True)
    short = hashlib.blake2b(text.encode(), digest_size=4).hexdigest()
    return text, f"{prof.path or prof.name} (contents {short})"


def shape_note(prof: Profile, nodes: int, ranks_per_node: int,
               mpi_library: str | None = None) -> str | None:
    """One line when a job is beyond the shape a calibrated profile was measured on (its
    provenance: nodes, ranks a node, MPI library), else None: a one-node profile on several
    nodes (its inter-node figures are copies of the intra-node ones), more ranks a node than
    calibrated, or another MPI. More nodes than a calibration of two or more is not beyond it:
    the model extrapolates over nodes by design. Shipped profiles (no measured shape) give None."""
    prov = prof.provenance or {}
    if prov.get("kind") != "calibrated":
        return None
    cal_nodes, cal_rpn = int(prov.get("nodes", 1)), int(prov.get("ranks_per_node", 1))
    cal_mpi = prov.get("mpi_library")
    why = []
    if nodes > 1 and cal_nodes < 2:
        why.append("it was measured on one node: its inter-node figures are copies of the "
                   "intra-node ones")
    if ranks_per_node > cal_rpn:
        why.append(f"more ranks a node ({ranks_per_node}) than calibrated ({cal_rpn})")
    if mpi_library and cal_mpi and mpi_library.strip() != str(cal_mpi).strip():
        why.append(f"another MPI (calibrated with {cal_mpi})")
    if not why:
        return None
    where = prof.path or prof.name
    plural = lambda n, w: f"{n} {w}{'s' if n != 1 else ''}"  # noqa: E731
    return (f"profile {where} was calibrated on {plural(cal_nodes, 'node')} x {cal_rpn} ranks a "
            f"node; this job runs {plural(nodes, 'node')} x {ranks_per_node} ranks a node: "
            f"{'; '.join(why)}, so backend: auto decides from extrapolated figures (the online "
            "trial checks them); recalibrate on two or more nodes with this job's ranks a node: "
            f"srun -N 2 --ntasks-per-node {ranks_per_node} python -m mpi4py -m mdloader_plugin "
            f"calibrate --out {where}")


def available() -> list[str]:
    """Names of the shipped profiles."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.json"))


def get_profile(name_or_path: "str | os.PathLike | Profile | None" = None) -> Profile:
    """A shipped profile by name, or a profile file by path (``None``: :func:`default_name`)."""
    if isinstance(name_or_path, Profile):
        return name_or_path
    ref = str(name_or_path) if name_or_path is not None else default_name()
    path = Path(ref)
    if ref in available():
        path = PROFILE_DIR / f"{ref}.json"
    elif not (ref.endswith(".json") or os.sep in ref) or not path.exists():
        raise ProfileError(f"profile {ref!r} is neither a shipped profile nor an existing .json "
                           f"file; shipped: {', '.join(available())}")
    return load(path)


def default_name() -> str:
    """``$MDLOADER_PROFILE`` if set (a name or a path written by calibrate), else ``local``."""
    return env(ENV_VAR) or "local"


def load(path: str | os.PathLike) -> Profile:
    """Read and validate one profile file."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read profile ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise ProfileError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    return from_dict(doc, str(path))


def from_dict(doc: object, where: str = "<profile>") -> Profile:
    """Validate a parsed profile document; `where` names it in error messages."""
    if not isinstance(doc, dict) or not isinstance(doc.get("params"), dict):
        raise ProfileError(f"{where}: a profile is a JSON object with a \"params\" object")
    params, sources = {}, {}
    for key, (unit, meaning) in required_params().items():
        params[key], sources[key] = _value(doc["params"], key, unit, meaning, where)
    for key, (unit, meaning, stand_in) in optional_params().items():
        if key in doc["params"]:
            params[key], sources[key] = _value(doc["params"], key, unit, meaning, where)
        else:
            params[key] = params[stand_in]
            sources[key] = f"not in the profile: {stand_in}'s value (as before {key} existed)"
    name = str(doc.get("name") or Path(where).stem)
    node, node_sources = _node_section(doc.get("node_params"), where)
    return Profile(name, params, sources, str(doc.get("description", "")),
                   dict(doc.get("provenance") or {}), where, node, node_sources)


def _node_section(entries: object, where: str) -> tuple[dict[str, float], dict[str, str]]:
    """The optional ``node_params`` object: known keys only, each validated like ``params``."""
    if entries is None:
        return {}, {}
    if not isinstance(entries, dict):
        raise ProfileError(f"{where}: \"node_params\" must be an object of parameters")
    known = {**required_params(), **{k: v[:2] for k, v in optional_params().items()}}
    node, sources = {}, {}
    for key in entries:
        if key not in known:
            raise ProfileError(f"{where}: node_params key {key!r} is not a cost-model parameter")
        unit, meaning = known[key]
        node[key], sources[key] = _value(entries, key, unit, meaning, f"{where} (node_params)")
    return node, sources


def validate_params(params: dict[str, float], where: str = "<profile>") -> None:
    """Check a flat ``{key: value}`` dict (e.g. fresh fit results) against the same rules."""
    from_dict({"params": {k: {"value": v} for k, v in params.items()}}, where)


def _value(entries: dict, key: str, unit: str, meaning: str, where: str) -> tuple[float, str]:
    if key not in entries:
        raise ProfileError(f"{where}: missing key {key!r} ({meaning}, in {unit})")
    entry = entries[key]
    raw = entry.get("value") if isinstance(entry, dict) else entry
    source = str(entry.get("source", "")) if isinstance(entry, dict) else ""
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
        raise ProfileError(f"{where}: key {key!r} must be a number in {unit}, got {raw!r}")
    lo, hi = RANGES[unit]
    if not lo <= raw <= hi:
        raise ProfileError(f"{where}: key {key!r} = {raw!r} is absurd for {meaning} "
                           f"(expected {lo:g}..{hi:g} {unit})")
    return float(raw), source
