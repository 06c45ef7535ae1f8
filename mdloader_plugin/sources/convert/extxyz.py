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


def iterate(path: str) -> Iterator[dict]:
    """The structures of ``path`` one at a time, each a ``dict`` of numpy arrays."""
    from ase.io import iread

    skipped: set = set()
    try:
        for atoms in iread(path, index=":", format="extxyz"):
            yield atoms_to_graph(atoms, None, skipped)
    except (ValueError, KeyError, IndexError) as exc:
        raise DataError(f"{path}: cannot parse as extended XYZ ({exc})") from None
