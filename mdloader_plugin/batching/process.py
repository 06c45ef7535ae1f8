"""A helper process that builds batches column-wise, so the trainer's process keeps its GIL.

``producer="process"`` (or ``MDLOADER_PRODUCER=process``): the loader's producer thread still
plans and fetches every step in the MPI rank (MPI must stay there: a forked child of an MPI
process must not call MPI, and the one-sided windows and communicators belong to the rank), then
hands the fetched records to one helper process a loader, which runs the column-wise collate of
:mod:`.batching` (the same code, so the same batch) and hands the batch back. The rank's thread
only copies the records in (one copy, numpy, GIL released for large copies), receives a file
descriptor and wraps the arrays as tensors (zero copy): its Python per step drops from the whole
collate (~1-2 ms) to a few dozen small calls.

Transport: an ``AF_UNIX`` ``SOCK_SEQPACKET`` socket pair (one message a request or reply, file
descriptors passed alongside). Messages are a JSON header and raw int64 arrays; nothing is
pickled. The helper rebuilds the loader's ``to_sample`` from its ``helper_spec()`` (an importable
factory and JSON arguments; :func:`sample_spec`), so a ``to_sample`` without one keeps the
thread producer. Records go through a few reusable input slots and each batch comes
back in a fresh ``memfd`` (anonymous shared memory: no name in ``/dev/shm``, so nothing can leak
when either side dies; the kernel frees it with the last mapping). The batch's tensors are views
of that mapping, which lives exactly as long as any of them.

Lifetime: the helper is started (``python -m mdloader_plugin.batching.process``, a fresh
interpreter: no fork of the MPI process) when the loader is made, imports only numpy, torch,
torch_geometric and this package's batching modules (never mpi4py), and exits on ``close()``, on
end of file on its socket (the loader's process ended) or when its parent changes. A helper
that dies is reported by the next batch as one error naming its pid and exit code, not a hang.
"""

from __future__ import annotations

import importlib
import json
import math
import mmap
import os
import socket
import struct
import subprocess
import sys
import traceback
from pathlib import Path
from types import SimpleNamespace

import numpy as np

_MSG = 1 << 18  # largest message: a step's offsets/sizes (batch 4096: 64 KiB) and a batch's table
_ALIGN = 64
_SLOTS = 3  # input slots: two steps in flight plus the one being written
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)


class HelperError(RuntimeError):
    """The collate helper failed or exited; the message names its pid and what happened."""


def _memfd(size: int, name: str) -> tuple[int, mmap.mmap]:
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    os.ftruncate(fd, size)
    return fd, mmap.mmap(fd, size, mmap.MAP_SHARED)


def _send(sock: socket.socket, head: list, arrays=(), fds=()) -> None:
    """One message: the JSON `head`, then each int64 array's raw bytes."""
    h = json.dumps(head).encode()
    data = b"".join([struct.pack("<I", len(h)), h]
                    + [np.ascontiguousarray(a, dtype=np.int64).tobytes() for a in arrays])
    if len(data) > _MSG:
        raise ValueError(f"collate helper message of {len(data)} B exceeds {_MSG} B")
    socket.send_fds(sock, [data], list(fds))


def _recv(sock: socket.socket) -> tuple[list, np.ndarray, list]:
    """(head, the int64 values after it, file descriptors)."""
    data, fds, _, _ = socket.recv_fds(sock, _MSG, 4)
    if not data:
        for fd in fds:
            os.close(fd)
        raise EOFError
    n = struct.unpack_from("<I", data)[0]
    values = np.frombuffer(data[4 + n:], dtype=np.int64).copy()
    return json.loads(data[4:4 + n]), values, fds


def sample_spec(to_sample) -> dict | None:
    """How the helper rebuilds `to_sample`: its ``helper_spec()`` (``{"factory":
    "module:name", "args": {...}}``, JSON only), or None when it has none."""
    spec = getattr(to_sample, "helper_spec", None)
    if not callable(spec):
        return None
    spec = spec()
    json.dumps(spec)  # JSON or a TypeError here, in the loader, not in the helper
    return spec


def _rebuild(spec: dict):
    module, _, name = spec["factory"].partition(":")
    obj = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj(**spec.get("args", {})) if spec.get("call", True) else obj


class CollateHelper:
    """The loader's side: start the helper, :meth:`submit` a step's records, :meth:`result` its
    batch (in submission order; a result not asked for is dropped), :meth:`close`."""

    def __init__(self, spec: dict):
        self._sock, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        root = str(Path(__file__).resolve().parents[1])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in (env.get("PYTHONPATH"),) if p])
        env.setdefault("OMP_NUM_THREADS", "1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mdloader_plugin.batching.process", str(child.fileno()),
             str(os.getpid())], pass_fds=[child.fileno()], env=env, stdin=subprocess.DEVNULL)
        child.close()
        self._slots: list = [None] * _SLOTS  # (mmap, ndarray view, size)
        self._seq, self._next_slot, self._closed = 0, 0, False
        self._pending: dict[int, int] = {}  # seq -> slot
        _send(self._sock, ["init", list(sys.path), spec])

    def submit(self, buf: np.ndarray, offsets: np.ndarray, nbytes: np.ndarray) -> int:
        """Copy the step's records into an input slot and ask for their batch: a ticket."""
        offsets = np.asarray(offsets, dtype=np.int64)
        nbytes = np.asarray(nbytes, dtype=np.int64)
        end = int((offsets + nbytes).max()) if offsets.size else 0
        slot = self._next_slot
        self._next_slot = (slot + 1) % _SLOTS
        fds = []
        if self._slots[slot] is None or self._slots[slot][2] < end:
            size = max(end + end // 4, 1 << 16)
            fd, mm = _memfd(size, "mdloader-records")  # the old one is unmapped with its view
            self._slots[slot] = (mm, np.frombuffer(mm, np.uint8), size)
            fds = [fd]
        np.copyto(self._slots[slot][1][:end], buf.reshape(-1)[:end])
        self._seq += 1
        try:
            _send(self._sock, ["batch", self._seq, slot, self._slots[slot][2]],
                  (offsets, nbytes), fds)
        except OSError as exc:
            raise self._dead(exc) from None
        finally:
            for fd in fds:
                os.close(fd)
        self._pending[self._seq] = slot
        return self._seq

    def result(self, ticket: int):
        """The batch of ``ticket`` (a PyG ``Batch``), or None when the column-wise path
        declined the records (the caller collates them the general way)."""
        while True:
            try:
                msg, _, fds = _recv(self._sock)
            except (EOFError, OSError) as exc:
                raise self._dead(exc) from None
            kind, seq = msg[0], msg[1]
            self._pending.pop(seq, None)
            if seq != ticket:  # an abandoned step's batch: nobody wants it
                for fd in fds:
                    os.close(fd)
                continue
            if kind == "error":
                raise HelperError(f"mdloader collate helper (pid {self.proc.pid}) failed on a "
                                  f"batch:\n{msg[2]}")
            if kind == "none":
                return None
            return _unpack(fds[0], msg[2], msg[3], msg[4])

    def _dead(self, exc) -> HelperError:
        code = self.proc.poll()
        if code is None:
            try:
                code = self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                code = "still running"
        return HelperError(f"mdloader collate helper (pid {self.proc.pid}) exited (code {code}; "
                           f"{type(exc).__name__}): its batch cannot be built; see its stderr "
                           "above, or use producer='thread'")

    def close(self, timeout: float = 5.0) -> None:
        """Stop the helper (waits up to `timeout` s, then kills it) and free the input slots."""
        if self._closed:
            return
        self._closed = True
        try:
            _send(self._sock, ["close"])
        except OSError:
            pass
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._sock.close()
        self._slots = [None] * _SLOTS  # unmapped with their views


def _pack(batch) -> tuple[int, mmap.mmap, list, int]:
    """A batch built by :class:`~mdloader_plugin.batching.pyg.ColumnCollate` -> one memfd holding
    every tensor (keys in order, then the slice and increment tables) and its table."""
    mapping = batch._store._mapping
    parts = [("m", k, v) for k, v in mapping.items()]
    parts += [("s", k, v) for k, v in batch._slice_dict.items()]
    parts += [("i", k, v) for k, v in batch._inc_dict.items()]
    table, arrays, pos = [], [], 0
    for where, key, t in parts:
        a = t.numpy()
        table.append((where, key, a.dtype.str, list(a.shape), pos))
        arrays.append(a)
        pos += -(-a.nbytes // _ALIGN) * _ALIGN
    fd, mm = _memfd(max(pos, _ALIGN), "mdloader-batch")
    out = np.frombuffer(mm, np.uint8)
    for (_, _, _, _, o), a in zip(table, arrays):
        if a.nbytes:
            out[o:o + a.nbytes] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    del out
    return fd, mm, table, max(pos, _ALIGN)


def _unpack(fd: int, table: list, size: int, count: int):
    """Tensors viewing the helper's memfd (mapped once, zero copy), assembled as the batch."""
    import torch
    from torch_geometric.data import Batch, Data

    from .pyg import _empty_batch

    try:
        mm = mmap.mmap(fd, size, mmap.MAP_SHARED | _POPULATE)
    finally:
        os.close(fd)
    out = _empty_batch(Batch, Data)
    store = out._store
    mapping = store._mapping if type(getattr(store, "_mapping", None)) is dict else store
    slices, incs = {}, {}
    dest = {"m": mapping, "s": slices, "i": incs}
    for where, key, dt, shape, off in table:
        a = np.frombuffer(mm, dtype=dt, count=math.prod(shape), offset=off).reshape(shape)
        dest[where][key] = torch.from_numpy(a)
    out._num_graphs = count
    out._slice_dict, out._inc_dict = slices, incs
    return out


def _serve(sock: socket.socket, parent: int) -> None:
    """The helper's loop: one reply a request, in order."""
    import torch

    from .pyg import ColumnCollate, pyg_collate

    torch.set_num_threads(1)
    msg, _, _ = _recv(sock)
    sys.path[:0] = [p for p in msg[1] if p not in sys.path]
    collate = ColumnCollate(_rebuild(msg[2]), pyg_collate)
    slots: dict[int, np.ndarray] = {}
    sock.settimeout(1.0)
    while True:
        try:
            msg, values, fds = _recv(sock)
        except socket.timeout:
            if os.getppid() != parent:  # the loader's process is gone
                return
            continue
        except (EOFError, ConnectionResetError):
            return
        if msg[0] == "close":
            return
        _, seq, slot, size = msg
        offsets, nbytes = values[:len(values) // 2], values[len(values) // 2:]
        try:
            if fds:
                slots[slot] = np.frombuffer(mmap.mmap(fds[0], size, mmap.MAP_SHARED), np.uint8)
                os.close(fds[0])
            collate.enabled = True
            batch = collate(SimpleNamespace(buf=slots[slot], offsets=offsets, nbytes=nbytes))
            if batch is None:
                _send(sock, ["none", seq])
                continue
            fd, mm, table, total = _pack(batch)
            count = batch._num_graphs
            del batch
            try:
                _send(sock, ["ok", seq, table, total, count], (), [fd])
            finally:
                os.close(fd)
                mm.close()
        except Exception:  # noqa: BLE001 - reported to the loader, which raises it
            _send(sock, ["error", seq, traceback.format_exc()])


def main(argv: list[str]) -> None:
    """Entry point of the helper process: ``collate_process FD PARENT_PID``."""
    sock = socket.socket(fileno=int(argv[0]))
    try:
        _serve(sock, int(argv[1]))
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        sock.close()


if __name__ == "__main__":
    main(sys.argv[1:])
