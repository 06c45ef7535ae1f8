"""The train loader of an upstream script's ``create_dataloaders``, timed under the launcher.

:class:`ArmedTimedLoader` is :class:`~mdloader_plugin.integrations.hydragnn.epochs.TimedLoader`
(one ``MDLOADER-EPOCH`` line an epoch in the script's run.log) for a loop MDLoader does not
drive: only a pass that follows upstream's ``set_epoch`` is an epoch. :func:`time_upstream` wraps
the train loader of the three :mod:`.hooks` hands back (MDLoader's or upstream's own).
"""

from __future__ import annotations

from typing import Iterator

from ..epochs import TimedLoader


class ArmedTimedLoader(TimedLoader):
    """:class:`TimedLoader` for the launcher, around the train loader of an upstream script's
    ``create_dataloaders`` (MDLoader's or upstream's own): only a pass that follows a
    ``set_epoch`` (what upstream's training loop calls before every epoch, on every rank) is
    timed and logged. Any other pass (upstream's graph-size scan, which abandons or exhausts
    the loader at a data-dependent batch on each rank) runs untimed and without the epoch's
    reduction, so no rank waits in it alone. ``max_batches`` is the batch count upstream's loop
    takes (the minimum over ranks), so every rank ends its epoch where the loop does."""

    armed = False

    def _arming(self, inner):
        if inner is None or not hasattr(inner, "set_epoch"):
            return inner
        return _Arming(inner, self)

    @property
    def sampler(self):
        return self._arming(super().sampler)

    @property
    def batch_sampler(self):
        return self._arming(super().batch_sampler)

    def __iter__(self) -> Iterator:
        if not self.armed:
            return iter(self.loader)
        self.armed = False
        return super().__iter__()


class _Arming:
    """A sampler whose ``set_epoch`` also arms its :class:`ArmedTimedLoader`."""

    def __init__(self, sampler, owner: ArmedTimedLoader):
        self._sampler, self._owner = sampler, owner

    def set_epoch(self, epoch: int) -> None:
        self._owner.armed = True
        self._sampler.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self._sampler)

    def __iter__(self):
        return iter(self._sampler)

    def __getattr__(self, name):
        return getattr(self.__dict__["_sampler"], name)


def time_upstream(loaders: tuple, run: str) -> tuple:
    """Upstream ``create_dataloaders``' three loaders with the train loader timed
    (:class:`ArmedTimedLoader`; collective over the world: every rank calls it alike).
    ``loader=mdloader`` where MDLoader serves, ``hydragnn`` for upstream's own loader."""
    from mpi4py import MPI

    from ....mpi.agree import everywhere
    from .. import compat

    train = loaders[0]
    n = len(train)
    comm = MPI.COMM_WORLD.Dup()  # its own communicator: no ordering against the script's
    cap = everywhere(comm, compat.max_batches)  # a bad value: one line on every rank
    if cap is not None:
        n = min(n, cap)
    nbatch = comm.allreduce(n, op=MPI.MIN)
    served = getattr(train, "backend_name", None) is not None
    timed = ArmedTimedLoader(train, comm, run=run, loader_name="mdloader" if served
                             else "hydragnn", max_batches=nbatch)
    return (timed, *loaders[1:])
