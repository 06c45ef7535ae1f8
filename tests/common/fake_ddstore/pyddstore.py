"""A test stand-in for DDStore's ``pyddstore`` (the C++ library is not installed here), so upstream
HydraGNN's own ``DistDataset`` runs its DDStore path unmodified as the baseline MDLoader is compared
with. Semantics of the real ``PyDDStore(comm)``: every rank ``add``s its local array of a name; the
global array is the ranks' arrays joined along dim 0 in rank order; ``get(name, out, offset)``
fills ``out`` with the rows starting at global row ``offset``. Here ``add`` allgathers the arrays
(fine for test sizes); ``epoch_begin``/``epoch_end`` do nothing."""

import numpy as np


class PyDDStore:
    def __init__(self, comm, method=0):
        self.comm, self.method, self._data = comm, method, {}

    def add(self, name, arr):
        parts = self.comm.allgather(np.ascontiguousarray(arr))
        self._data[name] = np.concatenate(parts, axis=0)

    def get(self, name, out, offset):
        src = self._data[name]
        n = out.shape[0] if out.ndim else 1
        out[...] = src[int(offset):int(offset) + n].reshape(out.shape)

    def epoch_begin(self):
        pass

    def epoch_end(self):
        pass

    def free(self):
        self._data = {}
