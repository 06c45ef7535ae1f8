"""Per-epoch timing for HydraGNN runs: one ``MDLOADER-EPOCH`` line per epoch in run.log.

HydraGNN 3.0 logs ``Epoch: NN, Train Loss ...`` with no times. :class:`TimedLoader` wraps the
train loader HydraGNN iterates (it forwards ``dataset``, ``sampler`` and ``len``): the epoch's
wall time runs from ``iter()`` to the end of the last batch, and data-wait is the time spent
inside ``next()`` (the trainer waiting for a batch). The same wrapper times MDLoader and the
baseline, so their numbers compare. At the end of each epoch every rank enters one small MPI
reduction (every rank reaches it: all ranks run the same number of batches), and rank 0 logs
``wall_s`` = the slowest rank's wall, ``data_wait_s`` = the mean over ranks, ``samples`` = the
sum, through HydraGNN's logger (its ``logs/<name>/run.log`` and the console).
"""

from __future__ import annotations

import logging
import time
from typing import Iterator

import numpy as np

from ...epochlog import format_epoch_line
from . import compat


class TimedLoader:
    """A train loader that times each full pass and logs one epoch line (see module doc)."""

    def __init__(self, loader, comm, *, run: str, loader_name: str):
        self.loader, self.comm, self.run, self.loader_name = loader, comm, run, loader_name
        self.epoch = 0
        self.records: list[dict] = []

    @property
    def dataset(self):
        return self.loader.dataset

    @property
    def sampler(self):
        return self.loader.sampler

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name):  # anything else HydraGNN asks of its loader
        return getattr(self.__dict__["loader"], name)

    def __iter__(self) -> Iterator:
        t0 = time.perf_counter()
        wait, steps, samples = 0.0, 0, 0
        it = iter(self.loader)
        while True:
            t = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                wait += time.perf_counter() - t
                break
            wait += time.perf_counter() - t
            steps += 1
            samples += int(getattr(batch, "num_graphs", 1))
            yield batch
        self._end_epoch(time.perf_counter() - t0, wait, steps, samples)

    def _end_epoch(self, wall: float, wait: float, steps: int, samples: int) -> None:
        from mpi4py import MPI

        mine = np.array([wall, wait, steps, samples], dtype=np.float64)
        hi = np.empty_like(mine)
        tot = np.empty_like(mine)
        self.comm.Allreduce(mine, hi, op=MPI.MAX)
        self.comm.Allreduce(mine, tot, op=MPI.SUM)
        size = self.comm.Get_size()
        rec = dict(run=self.run, loader=self.loader_name, backend=self._backend(),
                   epoch=self.epoch, wall_s=float(hi[0]), data_wait_s=float(tot[1] / size),
                   steps=int(hi[2]), samples=int(tot[3]), ranks=size)
        self.records.append(rec)
        self.epoch += 1
        if self.comm.Get_rank() == 0:
            logging.getLogger(compat.LOGGER_NAME).info(format_epoch_line(**rec))

    def _backend(self) -> str:
        return str(getattr(self.loader, "backend_name", None) or "-")
