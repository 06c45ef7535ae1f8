"""The loader's backends: which one serves each step, and the online switch between them.

:class:`Backends` owns the backend objects of one loader, the current decision (``decision``,
``name``) and, with ``backend="auto"`` on several ranks, an :class:`OnlineSwitch`. The producer
asks :meth:`Backends.for_step` for each step's backend and reports each step's time with
:meth:`Backends.after_step`; the switch only *reports* decisions (``pop_results``) and the
:class:`Backends` that owns the backends applies them (activates the winner, closes the losers)
at a step boundary, the same step on every rank.
"""

from __future__ import annotations

from ..backends import BACKENDS, get_backend
from ..estimator.choose import choose_initial as choose
from ..estimator.online import OnlineTrial, blind_to_network
from ..estimator.profile import get_profile, identity, shape_note
from ..mpi.agree import compare_inputs, decide_once, everywhere
from ..mpi.world import allreduce_number


class CommView:
    """The world as backends see it, but talking on the loader's private communicator."""

    def __init__(self, world, comm):
        self.comm, self.rank, self.size = comm, world.rank, world.size
        self.node_of, self.num_nodes = world.node_of, world.num_nodes
        self.local_rank, self.local_size = world.local_rank, world.local_size


class Backends:
    """The backends of one loader and the decision which one serves (rank-local object; its
    decisions are collective through :class:`OnlineSwitch`). `sends`: the collective backend's
    sends of a step (``(epoch, step) -> (ids, dest)``: this rank's
    :meth:`~mdloader_plugin.sampling.planner.RankPlanner.sends`, the epoch's inverse)."""

    def __init__(self, store, group, group_comm, backend: str, progress, *, per_step: int,
                 profile=None, online: bool = False, comm=None, nodes: int = 1, log=None,
                 name: str = "train", sends=None):
        self.log, self.label, self.group = log, name, group
        backend, online = agreed_setting(comm, backend, online, log)
        online = online and backend == "auto"
        names = list(BACKENDS) if backend == "auto" else [backend]
        view = CommView(group, group_comm) if group_comm is not None else None
        self.all: dict = {}
        for n in names:
            cls = get_backend(n)
            self.all[n] = cls(store, view, progress=progress) if n == "onesided" else cls(
                store, view, sends=sends)  # collective: MDLOADER_COLL_PROGRESS_THREAD
        if backend != "auto":
            self.decision = {"backend": backend, "reason": "chosen in the configuration",
                             "predicted_s": {}}
        else:
            self.decision = choose_initial(store, group, per_step, profile, comm, log)
            self._info(self.decision["decision"].log_line())
            if comm is None or comm.Get_rank() == 0:
                _say_shape_once(log, self.decision["profile"], nodes,
                                group.local_size if group else 1)
        self.name = self.decision["backend"]
        self._serving = None
        self.online = OnlineSwitch(self.decision, comm, nodes) if online else None
        self.activate(self.name if self.online is None else self.online.backend_for_next_step())

    def _info(self, line: str) -> None:
        if self.log is not None:
            self.log.info(f"[{self.label}] {line}")

    @property
    def collective(self) -> bool:
        """Whether steps are collective (a collective backend, or the online trial's per-step
        reduction), the same on every rank."""
        return "collective" in self.all or (self.online is not None and self.online.active)

    @property
    def timing_each_step(self) -> bool:
        """The online trial times every step to its ready batch."""
        return self.online is not None and self.online.active

    def for_step(self, stats):
        """The backend of the next step (the online trial may probe or switch); the names of
        the backends that served are collected in ``stats.backend``."""
        name = self.decision["backend"]
        if self.online is not None and self.online.active:
            self._apply(self.online.pop_results())
            name = self.online.backend_for_next_step()
        self.activate(name)
        if name not in stats.backend.split("+"):
            stats.backend = f"{stats.backend}+{name}" if stats.backend else name
        self.name = self.decision["backend"]
        return self.all[name]

    def _apply(self, results: list) -> None:
        """Obey the online trial's decisions, at a step boundary (the same on every rank)."""
        for res in results:
            self.decision = {"backend": res.backend, "reason": res.reason,
                             "predicted_s": dict(res.predicted_s),
                             "measured_s": dict(res.measured_s), "decision": res}
            self._info(res.log_line())
        if self.online.done and not self.online.settled:
            self.online.settled = True
            keep = self.online.trial.result.backend
            self.activate(keep)
            for name in [n for n in self.all if n != keep]:
                self.all.pop(name).close()  # same step on every rank; lets go of the poller

    def after_step(self, seconds: float) -> None:
        if self.online is not None and self.online.active:
            self.online.record(seconds)

    def activate(self, name: str) -> None:
        """Only `name` may hold the process's poller while it serves (rank-local)."""
        if name != self._serving:
            for n, b in self.all.items():
                if n != name:
                    b.set_active(False)
            self.all[name].set_active(True)
            self._serving = name

    def traffic(self) -> dict:
        out = {"on_node": 0, "off_node": 0}
        for b in self.all.values():
            for k in out:
                out[k] += b.traffic[k]
        return out

    def held_bytes(self) -> int:
        return sum(b.buffers.held_bytes() for b in self.all.values())

    def memory(self) -> dict:
        """This rank's bytes of the backends: ``buffers`` (step buffers held for reuse) and
        ``alltoallv_counts`` (the collective's counts and displacements, 4 x W int64)."""
        coll = "collective" in self.all and self.group is not None
        return {"buffers": self.held_bytes(),
                "alltoallv_counts": 4 * 8 * self.group.size if coll else 0}

    def close(self) -> None:
        for b in self.all.values():
            b.close()
        self.all = {}


_SHAPE_SAID: set = set()  # the shape notes this process has logged: each once


def _say_shape_once(log, prof, nodes: int, ranks_per_node: int) -> None:
    """Rank 0: one warning line, once a process, when this job is beyond the shape `prof` was
    calibrated on (:func:`~mdloader_plugin.estimator.profile.shape_note`)."""
    from mpi4py import MPI

    mpi = MPI.Get_library_version().splitlines()[0].strip().strip("\x00")
    note = shape_note(prof, nodes, ranks_per_node, mpi)
    if note and log is not None and note not in _SHAPE_SAID:
        _SHAPE_SAID.add(note)
        log.warning(note)


def agreed_setting(comm, backend: str, online: bool, log=None) -> tuple[str, bool]:
    """Collective over `comm` (None: one process). Rank 0's backend setting and online trial
    for every rank: a rank configured otherwise (``MDLOADER_BACKEND`` set on some nodes only)
    would construct other backends and skip the collectives the others enter; rank 0 names it
    in one ``MDLOADER-AGREE`` warning line."""
    mine = f"{backend} (online trial {'on' if online else 'off'})"
    compare_inputs(comm, {"backend setting": mine}, log, "the backend choice")
    return decide_once(comm, lambda: (backend, online))


def choose_initial(store, group, per_step: int, profile, comm=None, log=None) -> dict:
    """Collective over `comm` (the loader's, every rank; None: one process). Backend from the
    cost model and machine profile (``estimator``), chosen on rank 0 and broadcast: ranks that
    read different profiles or sit on nodes of different sizes would choose apart (rank 0 logs
    one ``MDLOADER-AGREE`` warning line naming them). `per_step` is what a rank's step really
    carries (fewer than batch_size samples when the data set is small)."""
    prof = everywhere(comm, get_profile, profile)  # a rank without the file: an error on all
    g = group  # the backends' world is the replica group (W ranks, W = P without groups)
    local = g.local_size if g else 1
    compare_inputs(comm, {"profile": identity(prof), "ranks on the node": str(local)}, log,
                   "the backend choice")

    def decide() -> dict:
        dec = choose(g.size if g else 1, local, per_step, store.index.size_sample(), prof)
        return {"backend": dec.backend, "reason": dec.reason,
                "predicted_s": dict(dec.predicted_s), "decision": dec, "profile": prof}

    return decide_once(comm, decide)


class OnlineSwitch:
    """Asks ``estimator.online.OnlineTrial`` which backend serves each step: every step's time
    is reduced with MAX over ranks, so every rank feeds identical numbers and takes the
    identical decision at the same step (a collective decision, never a divergent one). It only
    reports decisions; :class:`Backends` obeys them."""

    def __init__(self, decision: dict, comm, nodes: int):
        self.comm = comm
        blind = blind_to_network(decision.get("profile"), nodes)
        self.trial = OnlineTrial(decision["decision"],
                                 **({"skip_ratio": float("inf")} if blind else {}))
        self.settled = False  # the final decision obeyed (losers closed)

    @property
    def active(self) -> bool:
        return not self.settled

    @property
    def done(self) -> bool:
        return self.trial.done

    def backend_for_next_step(self) -> str:
        return self.trial.backend_for_next_step()

    def pop_results(self) -> list:
        return list(self.trial.pop_events())

    def record(self, seconds: float) -> None:
        if not self.trial.done:  # not the pickled allreduce: its first call holds the GIL
            self.trial.record(allreduce_number(self.comm, float(seconds), "max"))
