"""One cell of the fault matrix (tests/integration/test_fault_matrix.py): the own loop of
docs/own-loop.md on a few ranks, one rank hit by one fault at one phase.

Usage: fault_cell.py DATA KIND PHASE BACKEND VICTIM FORM EPOCHS

KIND    exception  a RuntimeError in the trainer loop
        backward   a RuntimeError raised inside ``loss.backward()`` (torch autograd; PyG batches)
        memory     a real ``MemoryError`` (numpy asked for 1 EiB)
        producer   a RuntimeError in the loader's producer thread (its batch build, patched here)
        watchdog   a RuntimeError in the fetch watchdog's thread (patched here)
        kill       SIGKILL of the victim's own process
        stop       SIGSTOP of the victim's own process
        stall      the victim's trainer sleeps 3 x MDLOADER_FETCH_TIMEOUT (an evaluation): healthy
PHASE   load (store loaded, the others construct the loader), first (step 0), mid (step 5),
        boundary (after epoch 0's last step), close (after the last epoch, before closing)
FORM    with   the loader in a ``with`` block (its ``__exit__`` runs on the error path)
        plain  the docs' literal loop: ``loader.close()`` at the end (an exception skips it)
EPOCHS  epochs the trainer runs when nothing stops it

The victim prints ``fault-matrix: rank R injects KIND at PHASE t=UNIX_TIME`` just before the
fault; every rank prints ``fault-matrix: rank R done`` after closing everything. With
``FAULT_CELL_SYNC=1`` every step ends in an allreduce over all ranks, as DDP's gradient
allreduce does. An injected exception's message carries ``fault-matrix injected`` (the line the
test looks for). A patch point that no longer exists is exit 99 with a line saying so.
"""

import os
import signal
import sys
import threading
import time

import numpy as np

data, kind, phase, backend, victim, form, epochs = sys.argv[1:8]
victim, epochs = int(victim), int(epochs)
sync = os.environ.get("FAULT_CELL_SYNC") == "1"
MID = 5

from mdloader_plugin import MDLoader, ShardStore, World  # noqa: E402

world = World.detect()
me = world.rank
token = f"fault-matrix injected {kind} on rank {me} at {phase}"
armed = threading.Event()  # the main thread reached the fault's phase (thread kinds read it)


def say(line: str) -> None:
    print(f"fault-matrix: rank {me} {line}", flush=True)


def missing(what: str) -> None:
    say(f"cannot inject {kind}: {what} is gone (update tests/mpi_scripts/fault_cell.py)")
    sys.stdout.flush()
    os._exit(99)


def patch_thread_faults() -> None:
    """On the victim: the producer's batch build or the watchdog's loop raises once armed."""
    if kind == "producer":
        from mdloader_plugin.loader import step

        build = getattr(step.BatchBuilder, "__call__", None)
        if build is None:
            missing("mdloader_plugin.loader.step.BatchBuilder.__call__")

        def failing_build(self, *a, **kw):
            if armed.is_set():
                raise RuntimeError(token)
            return build(self, *a, **kw)

        step.BatchBuilder.__call__ = failing_build
    elif kind == "watchdog":
        from mdloader_plugin.loader import watchdog

        stuck = getattr(watchdog.FetchWatchdog, "_stuck", None)
        if stuck is None:
            missing("mdloader_plugin.loader.watchdog.FetchWatchdog._stuck")

        def failing_stuck(self, now):  # called by the watchdog thread every beat
            if armed.is_set():
                raise RuntimeError(token)
            return stuck(self, now)

        watchdog.FetchWatchdog._stuck = failing_stuck


def inject(where: str) -> None:
    """The fault, if this rank is the victim and `where` is its phase."""
    if me != victim or where != phase:
        return
    say(f"injects {kind} at {phase} t={time.time():.3f}")
    if kind in ("exception", "producer", "watchdog"):
        if kind == "exception":
            raise RuntimeError(token)
        armed.set()  # the thread raises at its next build / beat
        if phase in ("load", "boundary", "close"):
            time.sleep(5)  # no step follows for the producer: give the thread its chance
    elif kind == "memory":
        np.empty(1 << 60, dtype=np.uint8)  # numpy's MemoryError: "Unable to allocate 1.00 EiB"
    elif kind == "backward":
        armed.set()  # the next step's loss.backward() raises
    elif kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif kind == "stall":
        time.sleep(3 * float(os.environ["MDLOADER_FETCH_TIMEOUT"]))
        say("stall over")


def train_step(batch) -> None:
    """The model's compute and, with FAULT_CELL_SYNC, the gradient allreduce."""
    if kind == "backward":
        import torch

        x = batch.x.float().sum().reshape(1).requires_grad_(True)
        loss = (Boom.apply(x) if armed.is_set() and me == victim else x * 2).sum()
        loss.backward()
    time.sleep(0.01)
    if sync:
        world.comm.Allreduce(np.ones(1), np.empty(1))


if kind == "backward":
    import torch

    class Boom(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            raise RuntimeError(token)

if me == victim:
    patch_thread_faults()
# torch-free batches (lists of sample ids) unless the fault needs autograd on PyG batches
plain = {} if kind == "backward" else {
    "to_sample": lambda a: int(a["y"].size), "collate": list}


def epochs_of(loader) -> None:
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for step, batch in enumerate(loader):
            if epoch == 0 and step == 0:
                inject("first")
            if epoch == 0 and step == MID:
                inject("mid")
            train_step(batch)
        if epoch == 0:
            inject("boundary")
    inject("close")


store = ShardStore.from_file(world, data, "trainset")
inject("load")
if form == "with":
    with MDLoader(store, batch_size=4, seed=0, backend=backend, online_trial=False,
                  **plain) as loader:
        epochs_of(loader)
else:  # the docs' own loop as it stands
    loader = MDLoader(store, batch_size=4, seed=0, backend=backend, online_trial=False, **plain)
    epochs_of(loader)
    loader.close()
store.close()
say("done")
