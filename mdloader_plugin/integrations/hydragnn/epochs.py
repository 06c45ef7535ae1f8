"""Per-epoch timing for HydraGNN runs: one ``MDLOADER-EPOCH`` line per epoch in run.log.

HydraGNN 3.0 logs ``Epoch: NN, Train Loss ...`` with no times. :class:`TimedLoader` wraps the
train loader HydraGNN iterates (it forwards ``dataset``, ``sampler`` and ``len``): the epoch's
wall time runs from ``iter()`` to the end of the last batch, and data-wait is the time spent
inside ``next()`` (the trainer waiting for a batch). The same wrapper times MDLoader and the
baseline, so their numbers compare. At the end of each epoch every rank enters one small MPI
reduction (every rank reaches it: all ranks run the same number of batches), and rank 0 logs
``wall_s`` = the slowest rank's wall, ``data_wait_s`` = the mean over ranks, ``samples`` = the
sum, through HydraGNN's logger (its ``logs/<name>/run.log`` and the console).

HydraGNN 5.0 stops an epoch after ``HYDRAGNN_MAX_NUM_BATCH`` batches by breaking out of its loop,
which would leave this wrapper's epoch unfinished and unlogged; with ``max_batches`` the wrapper
ends the epoch itself at that many batches (every rank alike), so the trainer's loop ends
normally and the line is written; the inner loader's iteration is closed (abandoned safely).

With ``keep_state`` (``mdloader train hydragnn``, whose ``Training.continue`` reads it back) rank 0
also writes the loader's state at each epoch's end (:func:`.resume.save`, atomically), so a run
killed in a later epoch continues with the next epoch's order.
"""

from __future__ import annotations

import logging
import time
from typing import Iterator

import numpy as np

from ...core.epochlog import format_epoch_line
from . import compat, resume


class TimedLoader:
    """A train loader that times each full pass and logs one epoch line (see module doc)."""

    def __init__(self, loader, comm, *, run: str, loader_name: str,
                 max_batches: int | None = None, keep_state: bool = False):
        self.loader, self.comm, self.run, self.loader_name = loader, comm, run, loader_name
        self.max_batches, self.keep_state = max_batches, keep_state
        self.epoch_offset = 0  # a continued run's loader epochs go on after the earlier run's
        self.epoch = 0
        self.records: list[dict] = []

    @property
    def dataset(self):
        return self.loader.dataset

    @property
    def sampler(self):
        if self.epoch_offset and self.loader.sampler is not None:
            return _ShiftedSampler(self.loader.sampler, self.epoch_offset)
        return self.loader.sampler

    @property
    def batch_sampler(self):
        """HydraGNN main calls ``set_epoch`` here first (#524): shifted like :attr:`sampler`."""
        inner = getattr(self.loader, "batch_sampler", None)
        if self.epoch_offset and inner is not None and hasattr(inner, "set_epoch"):
            return _ShiftedSampler(inner, self.epoch_offset)
        return inner

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name):  # anything else HydraGNN asks of its loader
        return getattr(self.__dict__["loader"], name)

    def __iter__(self) -> Iterator:
        t0 = time.perf_counter()
        wait, steps, samples = 0.0, 0, 0
        it = iter(self.loader)
        while True:
            if self.max_batches is not None and steps >= self.max_batches:
                getattr(it, "close", lambda: None)()
                break
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
            if self.keep_state:  # a run killed later continues after this epoch
                resume.save(self.loader, self.run, 0)

    def _backend(self) -> str:
        return str(getattr(self.loader, "backend_name", None) or "-")


class _ShiftedSampler:
    """``set_epoch(e)`` as ``set_epoch(e + offset)``; everything else forwarded."""

    def __init__(self, sampler, offset: int):
        self._sampler, self._offset = sampler, offset

    def set_epoch(self, epoch: int) -> None:
        self._sampler.set_epoch(int(epoch) + self._offset)

    def __len__(self) -> int:
        return len(self._sampler)

    def __getattr__(self, name):
        return getattr(self.__dict__["_sampler"], name)
