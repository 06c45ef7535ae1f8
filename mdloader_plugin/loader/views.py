"""What trainers read beside the batches: ``loader.sampler`` (``set_epoch``, ``len``) and
``loader.dataset`` (this rank's own samples); the loader's memory report, from what each of its
parts reports of itself (the store, the schedule, the planner, the backends)."""

from __future__ import annotations

from typing import Sequence

from ..records import codec


class EpochSampler:
    """What trainers expect at ``loader.sampler``: ``set_epoch`` (and ``len``)."""

    def __init__(self, loader: "MDLoader"):
        self._loader = loader

    def set_epoch(self, epoch: int) -> None:
        self._loader.set_epoch(epoch)

    def __len__(self) -> int:
        return self._loader.schedule.per_rank


class LocalSamples(Sequence):
    """``loader.dataset``: this rank's own samples (decoded copies), for code that peeks at one."""

    def __init__(self, loader: "MDLoader"):
        self._loader = loader

    def __len__(self) -> int:
        lo, hi = self._loader.store.local_range
        return hi - lo

    def __getitem__(self, i: int):
        lo, hi = self._loader.store.local_range
        if not -len(self) <= i < len(self):
            raise IndexError(f"local sample {i} out of range ({len(self)} on this rank)")
        rec = self._loader.store.local_record(lo + (i % len(self))).copy()
        return self._loader.to_sample(codec.decode(rec))


def memory_report(store, schedule, planner, backends, prefetch_cap: int) -> dict:
    """:meth:`.loader.MDLoader.memory_report`: this rank's bytes by kind. ``records_bytes`` (its
    share of the data set), ``index_bytes`` (its share of the global index), ``order_bytes`` (the
    epoch order and the planner's runs), ``buffers_bytes`` (step buffers held for reuse),
    ``prefetch_cap_bytes`` (`prefetch_cap`: the most that batches waiting in the prefetch queue may
    hold); ``structures``: each per-rank structure that grows with N or P by name (``index``,
    ``order``, ``plan_rows``, ``inverse``, ``alltoallv_counts``, ``balance_weights``, ``records``).
    Each part reports its own: ``store.memory_report()``, ``schedule.memory()``,
    ``planner.memory()``, ``backends.memory()``."""
    rep, sched, mine = store.memory_report(), schedule.memory(), backends.memory()
    structures = {"index": rep["index_bytes"], "order": sched["order"], **planner.memory(),
                  "alltoallv_counts": mine["alltoallv_counts"],
                  "balance_weights": sched["balance_weights"],  # fairchem: atoms, 4 B a sample
                  "records": rep["records_bytes"]}  # every structure that grows with N or P
    return {"records_bytes": rep["records_bytes"], "index_bytes": rep["index_bytes"],
            "order_bytes": sched["order"] + planner.nbytes,
            "weights_bytes": sched["balance_weights"], "structures": structures,
            "buffers_bytes": mine["buffers"], "prefetch_cap_bytes": prefetch_cap,
            "samples_global": rep["samples_global"], "order": schedule.order,
            "index_kind": rep["index_kind"]}


def log_memory(log, name: str, rank: int, m: dict) -> None:
    """One INFO line on rank 0: the memory report `m` in MiB and bytes a sample."""
    mib = 2.0 ** -20
    n = max(m["samples_global"], 1)
    log.info(
        f"[{name}] memory on rank {rank}: records {m['records_bytes'] * mib:.1f} "
        f"MiB, index {m['index_bytes'] * mib:.1f} MiB ({m['index_kind']}), order "
        f"{m['order_bytes'] * mib:.1f} MiB ({m['order']}), buffers as steps need (prefetch "
        f"queue <= {m['prefetch_cap_bytes'] * mib:.0f} MiB); N-proportional: "
        f"{(m['index_bytes'] + m['order_bytes']) / n:.2f} B a sample")
