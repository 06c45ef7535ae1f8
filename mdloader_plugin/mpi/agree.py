"""Decisions the whole job shares: made once, on rank 0, and broadcast; settings that must not
differ, compared.

A choice that every rank must make alike (the backend, the replica group size) cannot be left to
each rank with its own inputs: ranks that read different profile files (one rewritten while the
job started, a different ``MDLOADER_PROFILE`` on some nodes) or sit on nodes with different rank
counts (``srun -N2 -n6``) would choose differently, and a job whose ranks run different backends
hangs until its watchdog ends it. :func:`decide_once` runs the choice on rank 0 alone and
broadcasts it; before that, :func:`compare_inputs` compares what every rank would have decided
from (a digest a named input, one small buffer ``Allreduce``) and, where they differ, rank 0 logs
one warning line naming the ranks and the inputs (``MDLOADER-AGREE ...``); the job runs on rank
0's decision. The same difference is said once a process, whichever decision meets it first.

:func:`require_same` is the same comparison for inputs that must not differ (the data files), and
:func:`agree_settings` for the settings that decide which collectives a rank enters or what it
fetches (the loader's schedule arguments, :func:`job_settings`: ``MDLOADER_FETCH_TIMEOUT``,
``MDLOADER_MPI_MAX_COUNT``, ``HYDRAGNN_MAX_NUM_BATCH``), together with the rank-local checks run
before them: a difference is an error on every rank, one line said by rank 0 naming the setting,
the ranks and their values (``ranks disagree on seed: rank 0 0; ranks 1-2 1: ...``), exit 2.

At 8,192 ranks a comparison is one ``Allreduce`` (``MAX``) of ``2 x 8`` bytes an input a rank:
each input's digest and its negation, whose maxima are the largest and the smallest digest (they
differ where any rank differs). Only when some input differs are the differing values gathered
(as text) to rank 0, to name them.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ..core.errors import ConfigError, MDLoaderError
from ..core.options import env, env_default

#: inputs whose difference this process has already reported (say each once)
_SAID: set = set()
#: distinct values a warning names per input before "and N more"
SHOW = 4
#: characters of a setting's value a line shows at most (a long one is cut, marked "...")
SHOW_CHARS = 160


def digest(text: str) -> int:
    """A 63-bit digest of `text` (stable across processes and runs, unlike ``hash``)."""
    raw = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(raw, "little") & ((1 << 63) - 1)


def compare_inputs(comm, inputs: dict, log=None, what: str = "the job's decisions") -> list:
    """Collective over `comm` (None: one process). The names of the `inputs` whose value differs
    from rank 0's on some rank; rank 0 logs one warning line naming, for each, the ranks and
    their values (each input once a process). `inputs` is ``{name: text}`` or ``{name: (text,
    shown)}`` (compare `text`, name `shown`: a profile's contents, shown by its path), with the
    same names on every rank."""
    bad, values = _differing(comm, inputs)
    if not bad:
        return []
    new = [i for i, k in enumerate(bad) if k not in _SAID]
    _SAID.update(bad)
    if comm.Get_rank() == 0 and log is not None and new:
        log.warning(warning_line([bad[i] for i in new], [[v[i] for i in new] for v in values],
                                 what))
    return bad


def require_same(comm, inputs: dict, what: str, fix: str) -> None:
    """Collective over `comm` (None: one process). Like :func:`compare_inputs`, but a difference
    is an error: a :class:`ConfigError` on every rank (``agreed``: rank 0 prints the one line
    naming the ranks and their values, then `fix`; every rank exits 2), never a hang."""
    bad, values = _differing(comm, inputs)
    if bad:
        raise _disagreement(bad, values, f"ranks disagree on {what} (", f"): {fix}")


#: what a disagreement on the settings of :func:`agree_settings` says to do
SETTINGS_FIX = ("these settings decide which collectives a rank enters and what it fetches; "
                "give every rank the same values (an MPMD launch, a per-node environment or a "
                "per-rank argument differs)")


def agree_settings(world, settings: dict, fn=None, *args, **kwargs):
    """Collective over ``world.comm`` (`world` None or of one rank: one process). ``fn(*args,
    **kwargs)`` on every rank (rank-local checks) and `settings` (``{name: text}`` or ``{name:
    (text, shown)}``, the same names everywhere) compared, in ONE buffer ``Allreduce``; returns
    what `fn` returned. A failure of `fn` on any rank is raised on every rank
    (:func:`~.collectives.agree`'s error); otherwise settings that differ are a
    :class:`ConfigError` on every rank (``agreed``), its one line naming each setting, its values
    and their ranks (:func:`disagreement_line`)."""
    from .collectives import attempt, raise_failure

    err, result = attempt(fn, *args, **kwargs) if fn is not None else (None, None)
    if world is None or world.size == 1:
        if err is not None:
            raise err
        return result
    names, pairs, mine = _digests(settings)
    top = _max(world.comm, np.concatenate([[int(err is not None)], mine, -mine]))
    if top[0]:
        raise_failure(world.comm, err)
    k = len(names)
    bad = [n for n, hi, lo in zip(names, top[1:k + 1], top[k + 1:]) if hi != -lo]
    if bad:
        values = world.comm.gather([_cut(pairs[n][1]) for n in bad], root=0)
        raise _disagreement(bad, values, "ranks disagree on ", ": " + SETTINGS_FIX)
    return result


def disagreement_line(bad: list, values: list, fix: str = SETTINGS_FIX) -> str:
    """The error of :func:`agree_settings`: ``ranks disagree on NAME: rank 0 V; ranks 1-2 W |
    NAME2: ...: FIX`` (`values`: every rank's shown values of the `bad` names, rank order)."""
    return f"ranks disagree on {_listing(bad, values)}: {fix}"


def job_settings() -> dict:
    """The environment settings that steer collectives, as comparable text: whether a loader
    allocates the watchdog's window (``MDLOADER_FETCH_TIMEOUT``), how every per-sample
    collective is cut (``MDLOADER_MPI_MAX_COUNT``), how many steps an epoch fetches
    (``HYDRAGNN_MAX_NUM_BATCH``). Equal meanings read alike (unset and the default, 30 and
    30.0); a value that does not parse is compared as written (its own error follows)."""
    import os

    out = {}
    raw = str(env("MDLOADER_FETCH_TIMEOUT")).strip() or str(env_default("MDLOADER_FETCH_TIMEOUT"))
    try:
        t = float(raw)
        out["MDLOADER_FETCH_TIMEOUT"] = "0 (off)" if t <= 0 else f"{t:g}"
    except ValueError:
        out["MDLOADER_FETCH_TIMEOUT"] = repr(raw)
    out["MDLOADER_MPI_MAX_COUNT"] = _int_text(str(env("MDLOADER_MPI_MAX_COUNT")))
    raw = os.environ.get("HYDRAGNN_MAX_NUM_BATCH")
    out["HYDRAGNN_MAX_NUM_BATCH"] = "unset" if raw is None else _int_text(raw, at_least=0)
    return out


def _int_text(raw: str, at_least=None) -> str:
    try:
        value = int(raw)
    except ValueError:
        return repr(raw)
    return str(value if at_least is None else max(value, at_least))


def _cut(text: str) -> str:
    return text if len(text) <= SHOW_CHARS else text[:SHOW_CHARS - 3] + "..."


def _disagreement(bad: list, values: "list | None", head: str, tail: str) -> ConfigError:
    """The agreed error every rank raises: rank 0 (which has `values`) names the ranks and
    values; the others name the settings alone (rank 0 prints the line)."""
    listing = (_listing(bad, values) if values is not None
               else f"{', '.join(bad)} (rank 0 names the ranks)")
    err = ConfigError(head + listing + tail)
    err.agreed = True
    return err


def _digests(inputs: dict) -> tuple[list, dict, np.ndarray]:
    """(sorted names, ``{name: (text, shown)}``, int64 digests in name order)."""
    names = sorted(inputs)
    pairs = {k: tuple(map(str, v)) if isinstance(v, tuple) else (str(v), str(v))
             for k, v in inputs.items()}
    return names, pairs, np.array([digest(pairs[k][0]) for k in names], dtype=np.int64)


def _max(comm, values) -> np.ndarray:
    """`values` (int64) reduced with MAX over `comm`: one buffer ``Allreduce``."""
    from mpi4py import MPI

    buf = np.ascontiguousarray(values, dtype=np.int64)
    out = np.empty_like(buf)
    comm.Allreduce(buf, out, op=MPI.MAX)
    return out


def _differing(comm, inputs: dict) -> tuple[list, "list | None"]:
    """(names whose value differs from rank 0's somewhere, on rank 0 every rank's shown values
    of those names; None elsewhere). One buffer ``Allreduce``; a gather only when some differ."""
    if comm is None or comm.Get_size() == 1:
        return [], None
    names, pairs, mine = _digests(inputs)
    top = _max(comm, np.concatenate([mine, -mine]))
    k = len(names)
    bad = [n for n, hi, lo in zip(names, top[:k], top[k:]) if hi != -lo]
    if not bad:
        return [], None
    return bad, comm.gather([pairs[k][1] for k in bad], root=0)


def warning_line(bad: list, values: list, what: str) -> str:
    """The one line: for each differing input, each distinct value and the ranks that had it."""
    return (f"MDLOADER-AGREE warning: ranks' inputs to {what} differ ({_listing(bad, values)}); "
            "every rank uses rank 0's decision")


def _listing(bad: list, values: list) -> str:
    parts = []
    for i, name in enumerate(bad):
        by_value: dict = {}
        for rank, vals in enumerate(values):
            by_value.setdefault(vals[i], []).append(rank)
        shown = [f"{rank_text(r)} {v}" for v, r in list(by_value.items())[:SHOW]]
        more = len(by_value) - SHOW
        parts.append(f"{name}: " + "; ".join(shown) + (f"; and {more} more" if more > 0 else ""))
    return " | ".join(parts)


def rank_text(ranks: list) -> str:
    """``rank 0``, ``ranks 1-3``, ``ranks 0,2,5-7``."""
    spans, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            spans.append(str(start) if start == r else f"{start}-{r}")
            start = None
    word = "rank" if len(ranks) == 1 else "ranks"
    return f"{word} {','.join(spans)}"


def everywhere(comm, fn, *args, **kwargs):
    """Collective over `comm` (None: one process). ``fn(*args, **kwargs)`` on every rank; a
    failure on any rank raised on every rank (:func:`~.world.agree` on a bare communicator)."""
    from types import SimpleNamespace

    from .world import agree

    world = None if comm is None else SimpleNamespace(comm=comm, rank=comm.Get_rank(),
                                                      size=comm.Get_size())
    return agree(world, fn, *args, **kwargs)


def decide_once(comm, decide, *args, **kwargs):
    """Collective over `comm` (None: one process). ``decide(*args, **kwargs)`` run on rank 0
    only, its result broadcast to every rank. A failure there is raised on every rank (an
    ``agreed`` :class:`MDLoaderError`: rank 0 says it once) instead of leaving the others in
    the broadcast."""
    if comm is None or comm.Get_size() == 1:
        return decide(*args, **kwargs)
    out, err = None, None
    if comm.Get_rank() == 0:
        try:
            out = ("ok", decide(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - every rank raises it below
            err = exc
            out = ("error", type(exc).__name__, str(exc), isinstance(exc, MDLoaderError))
    out = comm.bcast(out, root=0)
    if out[0] == "ok":
        return out[1]
    if err is not None and not out[3]:
        raise err  # a bug: its traceback on rank 0
    exc = (type(err) if err is not None else MDLoaderError)(
        out[2] if out[3] else f"rank 0 failed: {out[1]}: {out[2]}")
    exc.agreed = True
    raise exc
