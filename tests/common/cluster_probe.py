"""MPI probe for the emulated cluster (run under ``mdloader cluster run -- python -m mpi4py``).

``basic``: hostnames differ by host, ``Win.Allocate`` + ``Lock_all(MODE_NOCHECK)`` + Get +
``Flush_all`` and ``Alltoallv`` move the right bytes, and a timed MB-sized Send between hosts
(prints ``bandwidth ... Gbit/s``). ``progress MODE HELPER``: rank 0 Gets from a rank on its own
host and from one on another host while every other rank is busy outside MPI for 3 s (MODE
``sleep`` or ``spin``); HELPER ``iprobe`` runs a thread in every rank that calls ``Iprobe`` on a
duplicate communicator every ~1 ms. Prints one ``progress ...`` line with the Get times.
"""

from __future__ import annotations

import sys
import threading
import time

import numpy as np
from mpi4py import MPI
from checks import check

comm = MPI.COMM_WORLD


def check_names() -> list[str]:
    names = comm.allgather(MPI.Get_processor_name())
    if comm.rank == 0:
        print("hosts", names, flush=True)
    check(len(set(names)) > 1, f"all ranks on one host: {names}")
    return names


def check_rma() -> None:
    n = 1 << 16
    win = MPI.Win.Allocate(n, comm=comm)
    np.frombuffer(win.tomemory(), np.uint8)[:] = (np.arange(n) + comm.rank) % 251
    comm.Barrier()
    win.Lock_all(MPI.MODE_NOCHECK)
    out = np.empty(1000, np.uint8)
    for t in range(comm.size):
        win.Get(out, t, target=(100, 1000, MPI.BYTE))
        win.Flush_all()
        check(np.array_equal(out, (np.arange(100, 1100) + t) % 251), f"Get from {t} wrong")
    win.Unlock_all()
    comm.Barrier()
    win.Free()


def check_alltoallv() -> None:
    r, p = comm.rank, comm.size
    counts = np.array([(r + 1) * 10 + d for d in range(p)], np.int64)
    send = np.concatenate([np.full(k, r * 16 + d, np.uint8) for d, k in enumerate(counts)])
    rcounts = np.array(comm.alltoall(counts.tolist()), np.int64)
    recv = np.empty(rcounts.sum(), np.uint8)
    comm.Alltoallv([send, (counts, None), MPI.BYTE], [recv, (rcounts, None), MPI.BYTE])
    want = np.concatenate([np.full(rcounts[s], s * 16 + r, np.uint8) for s in range(p)])
    check(np.array_equal(recv, want), "Alltoallv bytes wrong")


def bandwidth(names: list[str], nbytes: int = 20_000_000, reps: int = 2) -> None:
    """Rank 0 sends `nbytes` to the first rank on another host; prints the best rate."""
    other = next(i for i, n in enumerate(names) if n != names[0])
    data = np.ones(nbytes, np.uint8)
    best = float("inf")
    for _ in range(reps):
        comm.Barrier()
        t0 = time.perf_counter()
        if comm.rank == 0:
            comm.Send(data, other)
            comm.Recv(data[:1], other)
        elif comm.rank == other:
            comm.Recv(data, 0)
            comm.Send(data[:1], 0)
        best = min(best, time.perf_counter() - t0)
    if comm.rank == 0:
        print(f"bandwidth {nbytes / 1e6:g} MB in {best:.3f} s = "
              f"{nbytes * 8 / best / 1e9:.3f} Gbit/s", flush=True)


def busy(mode: str, seconds: float) -> None:
    t0 = time.perf_counter()
    if mode == "sleep":
        time.sleep(seconds)
        return
    a = np.random.default_rng(0).random((200, 200))
    while time.perf_counter() - t0 < seconds:
        a = a @ a
        a /= np.abs(a).max()


def timed_gets(win, target: int, out: np.ndarray, k: int = 10) -> list[float]:
    times = []
    for _ in range(k):
        t0 = time.perf_counter()
        win.Get(out, target)
        win.Flush(target)
        times.append(time.perf_counter() - t0)
        check(out[0] == target, f"Get from {target} returned {out[0]}")
    return times


def progress(mode: str, helper: str, names: list[str]) -> None:
    win = MPI.Win.Allocate(1 << 20, comm=comm)
    np.frombuffer(win.tomemory(), np.uint8)[:] = comm.rank
    win.Lock_all(MPI.MODE_NOCHECK)
    out = np.empty(4096, np.uint8)
    for t in range(comm.size):  # connections up before timing
        win.Get(out, t)
        win.Flush(t)
    stop, th = threading.Event(), None
    if helper == "iprobe":
        dup = comm.Dup()

        def poll() -> None:
            while not stop.is_set():
                dup.Iprobe()
                time.sleep(0.001)
        th = threading.Thread(target=poll, daemon=True)
        th.start()
    same = next((i for i in range(1, comm.size) if names[i] == names[0]), None)
    other = next(i for i, n in enumerate(names) if n != names[0])
    comm.Barrier()
    res = {}
    if comm.rank != 0:
        busy(mode, 3.0)
    else:
        time.sleep(0.3)
        for label, target in (("samehost", same), ("otherhost", other)):
            if target is not None:
                res[label] = timed_gets(win, target, out)
    comm.Barrier()
    stop.set()
    if th is not None:
        th.join()
    if comm.rank == 0:
        print(f"progress mode={mode} helper={helper} " + " ".join(
            f"{k}: first={v[0] * 1e3:.3f}ms median_rest={np.median(v[1:]) * 1e3:.3f}ms "
            f"max_rest={max(v[1:]) * 1e3:.3f}ms" for k, v in res.items()),
            flush=True)
    win.Unlock_all()
    win.Free()


def main(argv: list[str]) -> None:
    names = check_names()
    if argv[:1] == ["progress"]:
        progress(argv[1], argv[2], names)
        return
    check_rma()
    check_alltoallv()
    bandwidth(names, int(argv[0]) if argv else 20_000_000)
    if comm.rank == 0:
        print("probe ok", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
