"""Extended XYZ trajectories (``.xyz``/``.extxyz``), read frame by frame with ``ase.io.iread``.

The frame count comes from a first pass that reads only the atom-count lines and skips each frame
(no parsing), so splits can be assigned before the streaming pass. Kept per frame: everything of
:func:`atoms.atoms_to_graph` (the extxyz reader puts ``energy``/``forces``/``stress`` into a
calculator), numeric per-atom columns and numeric ``info`` values.
"""

from __future__ import annotations

from itertools import islice
from typing import Iterator

from ...core.errors import DataError
from .atoms import atoms_to_graph

NAME = "extxyz"


def accepts(path: str) -> bool:
    """Whether ``path`` looks like this source's input."""
    return path.endswith((".xyz", ".extxyz"))


def count(path: str) -> int:
    """Number of structures in ``path`` (for the progress bar and the split)."""
    n = 0
    try:
        with open(path, "rb") as f:
            while True:
                line = f.readline()
                if not line:
                    return n
                if not line.strip():
                    continue
                natoms = int(line)
                skipped = sum(1 for _ in islice(f, natoms + 1))
                if skipped != natoms + 1:
                    raise DataError(f"{path}: frame {n} is truncated (expected {natoms} atoms)")
                n += 1
    except ValueError:
        raise DataError(f"{path}: frame {n} does not start with an atom count; not an "
                        "(extended) XYZ file") from None


def offsets(path: str, frames) -> list[int]:
    """Byte offset of the start of each frame in `frames` (sorted; a frame equal to the count is
    the end of the file), so that ranks parse their frame ranges without reading the rest."""
    want, out, n = list(frames), [], 0
    with open(path, "rb") as f:
        for k in want:
            while n < k:
                line = f.readline()
                if not line:
                    break
                if line.strip():
                    for _ in islice(f, int(line) + 1):
                        pass
                    n += 1
            pos = f.tell()
            while True:  # skip blank lines between frames, as count() does
                line = f.readline()
                if not line or line.strip():
                    break
                pos = f.tell()
            f.seek(pos)
            out.append(pos)
    return out


def iterate_range(path: str, start: int, stop: int, hint=None) -> Iterator[dict]:
    """Frames ``start..stop-1``; `hint` is ``(first byte, end byte)`` from :func:`offsets`."""
    from io import StringIO

    from ase.io.extxyz import read_xyz

    lo, hi = hint if hint is not None else offsets(path, [start, stop])
    with open(path, "rb") as f:
        f.seek(lo)
        text = f.read(hi - lo).decode()
    skipped: set = set()
    try:
        for atoms in read_xyz(StringIO(text), slice(0, stop - start)):
            yield atoms_to_graph(atoms, None, skipped)
    except (ValueError, KeyError, IndexError) as exc:
        raise DataError(f"{path}: cannot parse as extended XYZ ({exc})") from None


def iterate(path: str) -> Iterator[dict]:
    """The structures of ``path`` one at a time, each a ``dict`` of numpy arrays."""
    from ase.io import iread

    skipped: set = set()
    try:
        for atoms in iread(path, index=":", format="extxyz"):
            yield atoms_to_graph(atoms, None, skipped)
    except (ValueError, KeyError, IndexError) as exc:
        raise DataError(f"{path}: cannot parse as extended XYZ ({exc})") from None
