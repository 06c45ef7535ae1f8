"""Two PyG batches are the same object: class, keys in order, tensors (dtype, shape, values),
graph count and the slice/increment tables ``get_example`` uses."""

import torch


def batch_diff(a, b) -> str:
    """'' when `a` and `b` are the same batch, else what differs first."""
    if type(a) is not type(b):
        return f"class {type(a).__name__} != {type(b).__name__}"
    ka, kb = list(a._store.keys()), list(b._store.keys())
    if ka != kb:
        return f"keys {ka} != {kb}"
    for k in ka:
        x, y = a[k], b[k]
        if x.dtype != y.dtype or x.shape != y.shape or not torch.equal(x, y):
            return f"{k}: {x.dtype}{list(x.shape)} != {y.dtype}{list(y.shape)} or values differ"
    if a.num_graphs != b.num_graphs:
        return f"num_graphs {a.num_graphs} != {b.num_graphs}"
    for table in ("_slice_dict", "_inc_dict"):
        ta, tb = getattr(a, table), getattr(b, table)
        if list(ta) != list(tb):
            return f"{table} keys {list(ta)} != {list(tb)}"
        for k in ta:
            if ta[k].dtype != tb[k].dtype or not torch.equal(ta[k], tb[k]):
                return f"{table}[{k}]: {ta[k]} != {tb[k]}"
    return ""
