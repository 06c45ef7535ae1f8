"""PyG in-memory dataset: a ``.pt`` file written by ``InMemoryDataset.save`` (a tuple of the
collated ``Data`` as a dict, the ``slices`` and the class) or the older ``torch.save((data,
slices))``.

Loaded with ``torch.load(weights_only=True)`` only (no arbitrary unpickling; PyG registers its
classes as safe globals); a file that needs full unpickling is refused with a clear error.
Memory: the collated tensors are loaded once (that is what an in-memory dataset is); graphs are
then cut out one at a time with PyG's ``separate`` and written out.
"""

from __future__ import annotations

from typing import Iterator

from ...core.errors import DataError
from .oc20lmdb import to_arrays
from .oc20lmdb import RENAMES

NAME = "pyg"


def accepts(path: str) -> bool:
    """Whether ``path`` looks like this source's input."""
    return path.endswith((".pt", ".pth"))


def _load(path: str):
    import pickle

    import torch
    import torch_geometric  # noqa: F401 - registers PyG classes as safe globals

    try:
        out = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0][:160]
        raise DataError(f"{path}: torch.load(weights_only=True) refused it ({first}); MDLoader "
                        "does not unpickle .pt files; re-save it with InMemoryDataset.save "
                        "from a current PyG") from None
    except Exception as exc:  # noqa: BLE001 - zip/format errors
        raise DataError(f"{path}: not a torch file ({str(exc).splitlines()[0][:160]})") from None
    if not isinstance(out, tuple) or len(out) not in (2, 3):
        raise DataError(f"{path}: expected (data, slices[, class]) as InMemoryDataset.save "
                        f"writes, got {type(out).__name__}")
    from torch_geometric.data import Data

    data, slices = out[0], out[1]
    cls = out[2] if len(out) == 3 else Data
    if isinstance(data, dict):
        data = cls.from_dict(data)
    return data, slices


def count(path: str) -> int:
    """Number of structures in ``path`` (for the progress bar and the split)."""
    data, slices = _load(path)
    if slices is None:
        return 1
    first = next(iter(slices.values()))
    return int(len(first) - 1)


def iterate(path: str) -> Iterator[dict]:
    """The structures of ``path`` one at a time, each a ``dict`` of numpy arrays."""
    from torch_geometric.data.separate import separate

    data, slices = _load(path)
    if slices is None:
        yield to_arrays(data, f"{path}: graph 0")
        return
    n = int(len(next(iter(slices.values()))) - 1)
    for i in range(n):
        g = separate(cls=data.__class__, batch=data, idx=i, slice_dict=slices, decrement=False)
        yield _keep_names(to_arrays(g, f"{path}: graph {i}"), g)


def _keep_names(arrays: dict, g) -> dict:
    """`to_arrays` renames OC20's ``y``/``force``; a PyG dataset keeps its own names."""
    for old, new in RENAMES.items():
        if new in arrays and old in g and new not in g:
            arrays[old] = arrays.pop(new)
    return arrays
