"""What trainers read beside the batches: ``loader.sampler`` (``set_epoch``, ``len``) and
``loader.dataset`` (this rank's own samples)."""

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
        return self._loader.sampler_core.per_rank


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


def memory_report(loader: "MDLoader") -> dict:
    """:meth:`MDLoader.memory_report`."""
    rep = loader.store.memory_report()
    counts = 4 * 8 * loader.group.size if "collective" in loader._backends and loader.group else 0
    weights = loader.sampler_core.weights  # balance_weights (fairchem: atoms a sample, 4 B each)
    structures = {"index": rep["index_bytes"], "order": loader.sampler_core.order_bytes,
                  **loader._planner.memory(), "alltoallv_counts": counts,
                  "balance_weights": 0 if weights is None else int(weights.nbytes),
                  "records": rep["records_bytes"]}  # every structure that grows with N or P
    return {"records_bytes": rep["records_bytes"], "index_bytes": rep["index_bytes"],
            "order_bytes": loader.sampler_core.order_bytes + loader._planner.nbytes,
            "weights_bytes": structures["balance_weights"], "structures": structures,
            "buffers_bytes": loader._switch.held_bytes(),
            "prefetch_cap_bytes": loader.prefetch_bytes if loader.prefetch else 0,
            "samples_global": rep["samples_global"], "order": loader.sampler_core.order,
            "index_kind": rep["index_kind"]}


def log_memory(loader: "MDLoader") -> None:
    """One INFO line on rank 0: the memory report in MiB and bytes a sample."""
    m, mib = memory_report(loader), 2.0 ** -20
    n = max(m["samples_global"], 1)
    loader.log.info(
        f"[{loader.name}] memory on rank {loader.rank}: records {m['records_bytes'] * mib:.1f} "
        f"MiB, index {m['index_bytes'] * mib:.1f} MiB ({m['index_kind']}), order "
        f"{m['order_bytes'] * mib:.1f} MiB ({m['order']}), buffers as steps need (prefetch "
        f"queue <= {m['prefetch_cap_bytes'] * mib:.0f} MiB); N-proportional: "
        f"{(m['index_bytes'] + m['order_bytes']) / n:.2f} B a sample")
