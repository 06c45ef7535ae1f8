"""One conversion at a time into one output: a lock on ``OUT.parts/lock`` (see :mod:`.parallel`).

Two conversions into the same ``--out`` would each take the other's parts for their own, remove
the folder under the other's feet, or rename a half-assembled file over the other's. So the
first process of a conversion (rank 0) takes an exclusive ``flock`` on ``OUT.parts/lock`` before
anything is written, and every rank learns the outcome before any rank writes; a second
conversion finds the lock taken and stops with one line naming who holds it.

The kernel drops the lock when its holder ends, however it ends (a crash, ``SIGKILL``, a job
killed by the scheduler): a killed run never blocks its own resume, and there is no stale lock
file to remove by hand. The file stays in ``OUT.parts`` while the conversion lasts (a fresh start
empties the folder around it) and is removed last. A file system that cannot lock (``flock``
unsupported: some parallel file systems mounted without it) leaves the conversion unguarded,
with one warning.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import sys

from ...core.errors import DataError

NAME = "lock"


class OutputLock:
    """The lock of one conversion's work folder, held from :meth:`take` to :meth:`release`."""

    def __init__(self, work: str, out: str):
        self.work, self.out, self.fd = work, out, None

    @property
    def path(self) -> str:
        return os.path.join(self.work, NAME)

    def take(self) -> None:
        """Hold the lock, or raise the DataError that says who does."""
        while True:
            os.makedirs(self.work, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                holder = _read(fd)
                os.close(fd)
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise DataError(
                        f"{self.out} is being converted by another mdloader convert "
                        f"({holder or 'its process'} holds {self.path}): wait for it to end, "
                        "or choose another --out") from None
                print(f"mdloader: warning: {self.path}: cannot lock it ({exc.strerror}); "
                      "nothing stops a second conversion into the same --out while this one "
                      "runs", file=sys.stderr, flush=True)
                return
            try:  # the file we hold may have been removed by a holder that just ended
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}".encode())
        self.fd = fd

    def release(self, remove: bool = False) -> None:
        """Drop the lock (`remove`: remove the file and the then empty work folder first)."""
        if remove:
            try:
                os.remove(self.path)
                os.rmdir(self.work)
            except OSError:  # a next conversion already took a new lock here: its folder
                pass
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def close_inherited(self) -> None:
        """In a forked worker: close this copy of the descriptor (the parent still holds the
        lock; the worker must not keep it after the parent is gone)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 200, 0).decode(errors="replace").strip()
    except OSError:
        return ""
