"""DDStore 954ef59's batched reads (``get_batch``) over MDLoader's records, in the two layouts a
store of fixed-width rows can hold variable-size graphs in.

``PyDDStore.get_batch(name, out, indices)`` reads whole rows of ONE width a variable. A graph's
record (the same bytes MDLoader moves: ``mdloader_plugin.records.codec``) varies in size, so:

- ``pad``: one row a record, every row as wide as the widest record in the data set (agreed over
  ranks); a step reads ``b`` rows (``b * widest`` bytes).
- ``rows``: records cut into rows of ``row_bytes`` (the last one padded); a record's rows are
  consecutive and every rank knows every record's first row and row count (allgathered), so a
  step turns its ids into row ids (``np.repeat`` + ``arange``, timed as part of the fetch) and
  reads those.

HydraGNN main's own ``DistDataset`` (d251f81, ``ddstore_store_per_sample=True``) uses neither:
it packs every sample into one record of 1-byte rows and reads it with one ``get(name, buf,
offset)`` per sample (a range of rows of one owner; RMA lock/Get/unlock under method 0), never
``get_batch``. Of the two ``get_batch`` layouts, ``rows`` is the one that generalises it (its row
width 1 byte, a record's rows consecutive); ``pad`` is what ``pyddstore.torch.DistDataset`` does
for fixed-shape fields. Method 0 is collective (every rank calls ``get_batch`` every step);
method 1 posts one libfabric ``fi_read`` a row (``FABRIC_IFACE=lo`` here).
"""

from __future__ import annotations

import os
import time

import numpy as np


class Reference:
    """Every record of the data set on every rank (allgathered once), to check reads against."""

    def __init__(self, store, comm):
        lo, hi = store.local_range
        mine = [store.local_record(i) for i in range(lo, hi)]
        local = np.concatenate(mine) if mine else np.empty(0, np.uint8)
        counts = np.array(comm.allgather(local.size), dtype=np.int64)
        self.buf = np.empty(int(counts.sum()), dtype=np.uint8)
        comm.Allgatherv(local, [self.buf, counts])
        self.nbytes = np.asarray(store.nbytes[np.arange(store.num_samples)], dtype=np.int64)
        self.start = np.concatenate([[0], np.cumsum(self.nbytes)[:-1]]).astype(np.int64)

    def record(self, i: int) -> np.ndarray:
        s = int(self.start[i])
        return self.buf[s:s + int(self.nbytes[i])]

    def mismatches(self, ids, records) -> int:
        """How many of `records` (byte arrays, in `ids` order) differ from the reference."""
        return sum(not np.array_equal(r, self.record(int(i))) for i, r in zip(ids, records))


class DDStoreBatched:
    """One ``PyDDStore`` (method 0 or 1) holding the records of `store` in one layout."""

    def __init__(self, store, comm, ref: Reference, method: int, layout: str, row_bytes: int):
        if method == 1:
            os.environ.setdefault("FABRIC_IFACE", "lo")
        import pyddstore

        self.name = f"dds_{'coll' if method == 0 else 'fabric'}_{layout}"
        self.layout, self.ref = layout, ref
        self.comm = comm.Dup()
        self.dds = pyddstore.PyDDStore(self.comm, method=method)
        lo, hi = store.local_range
        nb = ref.nbytes
        if layout == "pad":
            self.width = int(nb.max())
            self.nrows = np.ones(nb.size, dtype=np.int64)
        else:
            self.width = int(row_bytes)
            self.nrows = -(-nb // self.width)
        self.first = np.concatenate([[0], np.cumsum(self.nrows)[:-1]]).astype(np.int64)
        shard = np.zeros((int(self.nrows[lo:hi].sum()), self.width), dtype=np.uint8)
        flat = shard.reshape(-1)
        base = int(self.first[lo]) if hi > lo else 0
        for i in range(lo, hi):
            at = (int(self.first[i]) - base) * self.width
            flat[at:at + int(nb[i])] = store.local_record(i)
        self.var = self.name
        self.dds.add(self.var, shard)  # add() copies the shard
        self._out = np.empty((0, self.width), dtype=np.uint8)

    def _rows_of(self, ids: np.ndarray) -> np.ndarray:
        n = self.nrows[ids]
        starts = np.repeat(self.first[ids] - np.concatenate([[0], np.cumsum(n)[:-1]]), n)
        return starts + np.arange(int(n.sum()), dtype=np.int64)

    def fetch(self, ids: np.ndarray) -> tuple[float, np.ndarray]:
        """(seconds, rows read) of one step's ids: the row ids and the ``get_batch``."""
        t0 = time.perf_counter()
        rows = ids if self.layout == "pad" else self._rows_of(ids)
        if self._out.shape[0] < rows.size:  # a buffer reused step to step (grown once)
            self._out = np.empty((max(rows.size, 2 * self._out.shape[0]), self.width), np.uint8)
        out = self._out[:rows.size]
        self.dds.get_batch(self.var, out, rows)
        return time.perf_counter() - t0, out

    def fetched(self, ids: np.ndarray, out: np.ndarray):
        """The rows read, as the loader's ``Fetched``: record ``i`` starts at its first row."""
        from mdloader_plugin.backends.base import Fetched

        at = np.concatenate([[0], np.cumsum(self.nrows[ids])[:-1]]).astype(np.int64) * self.width
        return Fetched(np.asarray(ids), out.reshape(-1), at, self.ref.nbytes[ids])

    def check(self, ids: np.ndarray, out: np.ndarray) -> int:
        """Records of `ids` cut from the rows read, compared byte for byte."""
        f = self.fetched(ids, out)
        return self.ref.mismatches(ids, [f.record(i) for i in range(f.ids.size)])

    def bytes_moved(self, ids: np.ndarray) -> int:
        return int(self.nrows[ids].sum()) * self.width

    def close(self) -> None:
        """Collective. A Barrier first: a rank freeing while another still reads hung method 1."""
        self.comm.Barrier()
        self.dds.free()
        self.comm.Free()
