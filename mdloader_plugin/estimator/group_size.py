"""Choosing the replica group size together with the backend: (backend, W) from cost and memory.

A group of ``W`` ranks holds the whole data set, so a rank holds ``N / W`` records plus the index
(``memory_of(W)``: the store's own sizing, exact when the record sizes are known) and fetches
only inside its group: the step is the backend's cost model evaluated for a job of ``W`` ranks
(``Workload(W, B, mu, sigma, min(R, W))``; groups are node-aligned, so a group of ``W <= R``
ranks is one node). Every valid ``W`` (:func:`~mdloader_plugin.mpi.groups.valid_sizes`) and every
backend is a candidate; :func:`choose_layout` keeps those whose memory fits the budget and
picks the fastest predicted step; candidates within ``TIE`` (2%) of it count as tied, below the
models' resolution, and a tie goes to the larger ``W`` (less memory for the same speed). Each
candidate and the verdict are logged (``MDLOADER-LAYOUT`` lines).

A profile calibrated on one node knows nothing of the network (its inter-node figures copy the
intra-node ones), so for a job that spans nodes it would rate groups across nodes as cheap as
groups inside one: :func:`~.online.blind_to_network` tells, and then fitting groups inside a node
are preferred (``node_local``); if none fits, the smallest fitting ``W`` (the fewest nodes spanned).

The budget is ``max_memory_per_rank`` when given, else :func:`detect_budget`: ``SHARE`` (half)
of the memory the node can still hand out (the smaller of ``MemAvailable`` in ``/proc/meminfo``
and the cgroup's limit minus its usage), divided by the ranks on the node; the other half is
left to the model, the batches and the framework. A budget no ``W`` fits is an error naming the
fewest ranks that would fit.

A group inside a node (``1 < W <= R``) is priced with :func:`~.choose.node_params`: the
profile's terms measured on a per-node sub-communicator when the calibration had them, else an
unidentified per-peer split of a cross-node calibration at its node-side bound. The online
backend check (:mod:`.choose`) still runs inside the chosen ``W``: the loader's initial choice is
:func:`~.choose.choose_initial` for ``W`` ranks, the same model and parameters as here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from ..core.units import human
from ..core.errors import MemoryBudgetError
from .choose import cross_node_shape, node_params
from .models import MODELS, Workload, predict
from .profile import Profile, get_profile
from ..mpi import groups
from ..store.budget import fewest_ranks, index_bytes

SHARE = 0.5  # of the node's available memory, split over its ranks, for the store
TIE = 0.02   # predicted steps this close to the fastest are tied: the larger W wins


@dataclass(frozen=True)
class Candidate:
    """One (backend, W): its predicted step, the store's memory a rank, whether that fits."""

    backend: str
    group_size: int
    predicted_s: float
    memory_bytes: int
    fits: bool

    def log_line(self) -> str:
        return (f"MDLOADER-LAYOUT candidate backend={self.backend} group_size={self.group_size} "
                f"predicted_s={self.predicted_s:.3e} memory_per_rank={human(self.memory_bytes)} "
                f"fits={'yes' if self.fits else 'no'}")


@dataclass(frozen=True)
class LayoutDecision:
    """The chosen (backend, W), every candidate, and the budget they were held to."""

    backend: str
    group_size: int
    candidates: tuple[Candidate, ...]
    budget: int | None
    budget_source: str
    reason: str

    def log_lines(self) -> list[str]:
        return [c.log_line() for c in self.candidates] + [
            f"MDLOADER-LAYOUT backend={self.backend} group_size={self.group_size} "
            f'budget={human(self.budget) if self.budget else "none"} reason="{self.reason}"']


def choose_layout(sizes: Sequence[int], ranks_per_node: int, batch_size: int, mean_bytes: float,
                  std_bytes: float, memory_of: Callable[[int], int], budget: int | None,
                  budget_source: str = "max_memory_per_rank",
                  profile: "Profile | str | None" = None,
                  backends: Sequence[str] | None = None,
                  fewest: Callable[[], int | None] | None = None,
                  node_local: int | None = None) -> LayoutDecision:
    """The fastest (backend, W) whose store fits `budget` among group sizes `sizes`; with
    `node_local` (ranks a node) only groups inside a node, if one fits."""
    prof = get_profile(profile)
    names = sorted(backends or MODELS)
    cands = []
    for w in sorted(sizes):
        mem = int(memory_of(w))
        work = Workload(w, batch_size, mean_bytes, std_bytes, ranks_per_node)
        params = node_params(prof, w, ranks_per_node)  # a group inside a node: its own terms
        for name in names:
            cands.append(Candidate(name, w, predict(name, work, params), mem,
                                   budget is None or mem <= budget))
    fitting = [c for c in cands if c.fits]
    if not fitting:
        raise MemoryBudgetError(_no_fit(cands, budget, budget_source, fewest))
    note = ""
    if node_local and any(c.group_size <= node_local for c in fitting):
        fitting = [c for c in fitting if c.group_size <= node_local]
        note = "the profile measured no network, so groups inside a node first; "
    elif node_local:
        # nothing inside a node fits, and the profile cannot tell groups across nodes apart
        # (its inter-node figures copy the intra-node ones): the smallest fitting W spans the
        # fewest nodes and sends the least across them (issue 16: a tie went to W = 4 on 4x1
        # hosts, 1.3-2.4x slower than W = 2)
        least = min(c.group_size for c in fitting)
        fitting = [c for c in fitting if c.group_size == least]
        note = ("no group inside a node fits and the profile is blind to the network, so the "
                "fewest nodes; ")
    if _lacks_node_terms(prof, sizes, ranks_per_node):
        note += ("the profile has no node_params (calibrated across hosts before the per-node "
                 "stage), so groups inside a node are priced with terms measured across hosts: "
                 "re-run `mdloader calibrate`; ")
    fastest = min(c.predicted_s for c in fitting)
    tied = [c for c in fitting if c.predicted_s <= fastest * (1 + TIE)]
    best = min(tied, key=lambda c: (-c.group_size, c.predicted_s, c.backend))
    return LayoutDecision(best.backend, best.group_size, tuple(cands), budget, budget_source,
                          note + _reason(best, cands, prof.name))



def _lacks_node_terms(prof, sizes, ranks_per_node: int) -> bool:
    """A profile calibrated on several hosts with several ranks each, written before calibrate
    measured the same-host terms on a per-node sub-communicator, weighing a group inside a node."""
    return (not prof.node and cross_node_shape(prof) is not None
            and any(1 < w <= ranks_per_node for w in sizes))


def layout_from_mean(ranks: int, ranks_per_node: int, batch_size: int, mean_bytes: float,
                     std_bytes: float, num_samples: int, profile: "Profile | str | None" = None,
                     budget: int | None = None, group_size="auto",
                     fixed_bytes: int | None = None) -> LayoutDecision:
    """(backend, W) for a job described by its mean record size, as ``mdloader estimate`` and
    ``bench/groups/model.py`` weigh it ahead of a run: memory a rank ``ceil(N / W)`` mean
    records plus the index's bound; the budget `budget` if given, else ``SHARE`` of the
    profile's node memory (``provenance.node_memory_bytes``) over its ranks, else this node's
    (:func:`detect_budget`). `group_size` ``"auto"`` weighs every valid ``W``; an int weighs it
    against ``W = P`` only. `fixed_bytes`: what a rank holds whatever ``W`` (index + order for
    the scale options chosen, :func:`~mdloader_plugin.store.budget.scale_bytes`); default the
    compact index's bound."""
    import numpy as np

    prof = get_profile(profile)
    node_of = np.arange(ranks) // max(1, ranks_per_node)
    if group_size not in (None, "auto"):
        groups.check_size(group_size, node_of)
    sizes = [w for w in groups.valid_sizes(node_of)
             if group_size == "auto" or w in (group_size or ranks, ranks)]
    budget, source = profile_budget(prof, ranks_per_node, budget)
    n = int(num_samples)
    index = index_bytes(n) if fixed_bytes is None else int(fixed_bytes)
    return choose_layout(sizes, ranks_per_node, batch_size, mean_bytes, std_bytes,
                         lambda w: int(-(-n // w) * mean_bytes) + index, budget, source, prof,
                         fewest=lambda: (fewest_ranks(np.full(n, mean_bytes), budget)
                                         if budget else None))


def profile_budget(prof: Profile, ranks_per_node: int,
                   budget: int | None = None) -> tuple[int | None, str]:
    """(bytes a rank, where that figure comes from) for a job planned ahead of its run:
    `budget` if given, else ``SHARE`` of the profile's node memory over its ranks, else this
    node's (:func:`detect_budget`)."""
    if budget is not None:
        return budget, "max_memory_per_rank"
    node_mem = prof.provenance.get("node_memory_bytes")
    if node_mem:
        return (int(float(node_mem) * SHARE / ranks_per_node),
                f"{SHARE:.0%} of the {prof.name} node's {human(float(node_mem))} over "
                f"{ranks_per_node} ranks")
    return detect_budget(ranks_per_node)


def _reason(best: Candidate, cands: list[Candidate], prof: str) -> str:
    full = max(c.group_size for c in cands)
    at_p = min((c for c in cands if c.group_size == full), key=lambda c: c.predicted_s)
    tight = sorted({c.group_size for c in cands if not c.fits})
    why = f"fastest that fits ({prof} model, ties within {TIE:.0%} to the larger W): " \
          f"{best.predicted_s * 1e3:.3f} ms/step"
    if best.group_size != full:
        why += (f", {at_p.predicted_s / best.predicted_s:.2f}x faster than W={full} "
                f"({at_p.backend})")
    if tight:
        why += f"; over the budget: W={','.join(map(str, tight))}"
    return why + f"; {human(best.memory_bytes)} a rank"


def _no_fit(cands, budget, source, fewest) -> str:
    full = max(cands, key=lambda c: c.group_size)
    msg = (f"the memory budget {human(budget)} a rank ({source}) fits no group size: even "
           f"W={full.group_size} (all ranks) needs {human(full.memory_bytes)} a rank")
    need = fewest() if fewest else None
    if need is None:
        return msg + "; the index alone exceeds it: raise the budget"
    return msg + f"; run with at least {need} ranks or raise max_memory_per_rank"


def detect_budget(ranks_on_node: int) -> tuple[int | None, str]:
    """``SHARE`` of this node's available memory per rank, and how it was found (None where
    nothing could be read)."""
    found = []
    avail = _meminfo_available()
    if avail:
        found.append((avail, "MemAvailable in /proc/meminfo"))
    cg = _cgroup_room()
    if cg:
        found.append((cg, "the cgroup's memory limit minus its usage"))
    if not found:
        return None, "no budget: the node's available memory could not be read"
    room, src = min(found)
    per_rank = int(room * SHARE / max(1, ranks_on_node))
    return per_rank, (f"{SHARE:.0%} of {human(room)} free on the node ({src}) over "
                      f"{ranks_on_node} ranks")


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_room() -> int | None:
    """cgroup v2 ``memory.max - memory.current`` (v1: limit - usage), None if unlimited."""
    for limit, usage in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                         ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                          "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            with open(limit) as f:
                lim = f.read().strip()
            with open(usage) as f:
                used = int(f.read().strip())
        except (OSError, ValueError):
            continue
        if lim == "max" or int(lim) >= 1 << 60:
            return None
        return max(0, int(lim) - used)
    return None
