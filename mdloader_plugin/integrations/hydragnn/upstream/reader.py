"""MDLoader's serial ADIOS2 reader behind upstream HydraGNN's ``AdiosDataset`` and ``adios2_open``.

Upstream main reads its files through ``adios2.Stream(path, "r", comm)``, which needs an
MPI-enabled ADIOS2; PyPI's wheels are serial and refuse a communicator. Under the launcher
(:mod:`.launcher`) these stand in for upstream's names in
``hydragnn.utils.datasets.adiosdataset``, so an unmodified script's ``AdiosDataset(...)``,
``setkeys``/``setsubset`` and ``adios2_open(path, "r", MPI.COMM_SELF)`` run on any ADIOS2:

* :func:`adios2_open` opens a file for reading with ``adios2.FileReader`` and answers the calls
  upstream's scripts make of it (``__next__``, ``read_attribute``, ``read_attribute_string``,
  ``available_variables``, ``available_attributes``, ``read``, a context manager);
* :class:`AdiosDataset` is upstream's class of that name with the same constructor, attributes
  (``ndata``, ``keys``, ``dataset_name``, ``pna_deg``, ``minmax_*``, ``subset``, ``var_config``)
  and methods (``setkeys``, ``setsubset``, ``len``, ``get``). It is a subclass of upstream's
  ``AbstractBaseDataset``, so ``dataset[i]`` gains upstream's ``dataset_name`` id as upstream's
  does, and ``get`` applies upstream's own ``update_predicted_values``/``update_atom_features``
  where upstream's does (up to main d251f81; main527's datasets ignore ``var_config``).
  Each rank reads metadata itself (no rank-0 broadcast: the reader is serial); a subset reads
  only its own extents; ``preload`` reads the subset with one box read a key
  (:class:`~mdloader_plugin.sources.adios.GraphFile`).

What the served data set is made of (file, label, keys, subset, targets, data set id) is
:meth:`AdiosDataset.describe`: the DDStore stand-in (:mod:`.data`) builds MDLoader's
store from it instead of copying graphs one by one. ``shmem`` and ``ddstore`` (node shared memory
and DDStore inside the dataset) change only where upstream keeps the bytes: here they are
ignored with a warning (the graphs are the same), and ``ddstore=True`` with its
``ddstore_width`` is kept for the DDStore stand-in (MDLoader serves the dataset in replica groups
of that width).
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from hydragnn.utils.datasets.abstractbasedataset import AbstractBaseDataset

from ....core.errors import ConfigError, DataError
from ....sources.adios import GraphFile
from ....sources.joined import JoinedReader, is_joined


class _Reader:
    """A read-only ``adios2_open`` handle (see the module docstring)."""

    def __init__(self, path: str):
        import adios2

        self.path = path
        if is_joined(path):  # `mdloader convert --writers W`: W files read as one
            self._r = JoinedReader(path)
            return
        try:
            self._r = adios2.FileReader(path)
        except Exception as exc:  # noqa: BLE001 - adios2 raises plain RuntimeError/ValueError
            GraphFile(path)  # a missing or unreadable file: its one-line DataError
            raise DataError(f"{path}: not a readable ADIOS2 file ({exc})") from None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __iter__(self):
        return self

    def __next__(self):  # upstream steps once into the file's only step
        return self

    def read(self, name: str, start=None, count=None):
        if start is None:
            return self._r.read(name)
        return self._r.read(name, list(start), list(count))

    def __getattr__(self, name):  # available_variables, read_attribute, ...
        return getattr(self.__dict__["_r"], name)

    def close(self) -> None:
        if self.__dict__.get("_r") is not None:
            self._r.close()
            self._r = None


def adios2_open(path, mode: str = "r", comm=None, *args, **kwargs):
    """Upstream's ``adios2_open(path, "r", comm)`` on a serial ADIOS2 (reads only)."""
    if str(mode) not in ("r", "rra"):
        raise ConfigError(f"adios2_open({path!r}, {mode!r}): MDLoader's serial reader only reads; "
                          "writing needs upstream's writer on an MPI-enabled ADIOS2 (write test "
                          "data with `mdloader synth` or `mdloader convert`)")
    return _Reader(str(path))


class AdiosDataset(AbstractBaseDataset):
    """Upstream's ``AdiosDataset(filename, label, comm, ...)`` read with MDLoader's reader."""

    def __init__(self, filename, label, comm=None, preload=False, shmem=False,
                 enable_cache=False, ddstore=False, ddstore_width=None, var_config=None,
                 subset_istart=None, subset_iend=None, keys=None,
                 ddstore_store_per_sample=True):
        super().__init__()
        self.filename, self.label, self.comm = str(filename), label, comm
        self.rank = comm.Get_rank() if comm is not None else 0
        if shmem:
            warnings.warn(f"AdiosDataset({self.filename}, shmem=True): MDLoader's reader keeps "
                          "the graphs in this process (the same graphs)", stacklevel=2)
        # ddstore=True (DDStore inside the dataset): MDLoader serves it, in groups of the width
        self.use_ddstore = bool(ddstore)
        self.ddstore_width = ddstore_width if ddstore else None
        self._file = GraphFile(self.filename)
        self._block = None
        self.info = self._file.info(label)
        self.ndata = self.info.ndata
        self.keys = list(self.info.keys)
        attrs = self._file.global_attributes()
        name = attrs.get("dataset_name")
        self.dataset_name = (name[0] if isinstance(name, list) and name else name) or None
        if "pna_deg" in attrs:
            self.pna_deg = np.asarray(attrs["pna_deg"]).reshape(-1)
        for mm in ("minmax_graph_feature", "minmax_node_feature"):
            if mm in attrs:
                setattr(self, mm, np.asarray(attrs[mm]).reshape((2, -1)))
        if keys is not None:
            self.setkeys(keys)
        # main527 (named data schema): upstream's datasets take var_config and ignore it; the
        # graphs are the file's keys as written
        self.var_config = var_config if positional_targets() else None
        if self.var_config is not None:
            self.input_node_features = var_config["input_node_features"]
            self.variables_type = var_config["type"]
            self.output_index = var_config["output_index"]
            self.graph_feature_dim = var_config["graph_feature_dims"]
            self.node_feature_dim = var_config["node_feature_dims"]
        self.enable_cache, self.cache = enable_cache, {}
        self.subset = self._block = None
        self.subset_istart = self.subset_iend = None
        self.preload = False
        self.setsubset(subset_istart, subset_iend, preload)

    # -- upstream's methods ------------------------------------------------------------------
    def setkeys(self, keys) -> None:
        missing = [k for k in keys if k not in self.info.keys]
        if missing:
            raise DataError(f"{self.filename}: key {missing[0]!r} is not in {self.label} (keys "
                            f"there: {', '.join(self.info.keys)}); files read together must hold "
                            "the same keys")
        self.keys = list(keys)
        self._block = None if self._block is None else self._read_subset()

    def setsubset(self, subset_istart, subset_iend, preload=False) -> None:
        if subset_istart is None or subset_iend is None:
            self.subset = None
            lo, hi = 0, self.ndata
        else:
            lo, hi = int(subset_istart), int(subset_iend)
            if not 0 <= lo <= hi <= self.ndata:
                raise DataError(f"{self.filename}: subset {lo}..{hi} outside {self.label} "
                                f"(ndata={self.ndata})")
            self.subset = range(lo, hi)
        self.subset_istart, self.subset_iend = lo, hi
        self.preload = bool(preload or self.preload)
        self._block = self._read_subset() if self.preload else None

    def _read_subset(self):
        return self._file.read_block(self.label, self.subset_istart, self.subset_iend,
                                     self.keys, self.info)

    def len(self) -> int:
        return self.subset_iend - self.subset_istart

    def get(self, i):
        i = int(i)
        if not 0 <= i < self.len():
            raise IndexError(f"{self.filename} [{self.label}]: index {i} outside 0..{self.len()}")
        if i in self.cache:
            return self.cache[i].clone()
        if self._block is not None:
            arrays = self._block.sample(i)
        else:
            g = self.subset_istart + i
            arrays = self._file.read_block(self.label, g, g + 1, self.keys, self.info).sample(0)
        data = self.update_data_object(to_data(arrays))
        if self.enable_cache:
            self.cache[i] = data.clone()
        return data

    def update_data_object(self, data):
        """Upstream's targets and input columns (its own functions)."""
        if self.var_config is not None:
            from hydragnn.preprocess import update_atom_features, update_predicted_values

            update_predicted_values(self.variables_type, self.output_index,
                                    self.graph_feature_dim, self.node_feature_dim, data)
            update_atom_features(self.input_node_features, data)
        return data

    # -- what the DDStore stand-in needs ----------------------------------------------------
    @property
    def variable_count(self) -> dict:
        """Per-graph extents of this dataset's graphs (node counts for cost-aware batching)."""
        out = {}
        for k in ("x", "pos"):
            if k in self.info.keys and self.info.keys[k].vdim == 0:
                out[k] = self._file.read_extents(self.label, k, self.subset_istart,
                                                 self.subset_iend)[0]
        return out

    @property
    def variable_dim(self) -> dict:
        return {k: v.vdim for k, v in self.info.keys.items()}

    def describe(self) -> dict:
        """What this rank's data set is, for building an MDLoader store from the file."""
        vc = self.var_config
        return {"path": self.filename, "label": self.label, "keys": list(self.keys),
                "lo": self.subset_istart, "hi": self.subset_iend,
                "dataset_name": self.dataset_name, "id": self._dataset_id(),
                "targets": None if vc is None else {
                    "type": list(vc["type"]), "output_index": list(vc["output_index"]),
                    "graph_feature_dims": list(vc["graph_feature_dims"]),
                    "node_feature_dims": list(vc["node_feature_dims"]),
                    "input_node_features": list(vc["input_node_features"])},
                "pna_deg": None if not hasattr(self, "pna_deg") else
                np.asarray(self.pna_deg).reshape(-1).tolist()}

    def _dataset_id(self):
        """The ``dataset_name`` id ``dataset[i]`` carries (upstream's dictionary), or None."""
        if self.dataset_name is None:
            return None
        probe = torch.zeros(1)

        class _Probe(AbstractBaseDataset):  # upstream's __getitem__, on an empty sample
            def get(inner, i):
                from torch_geometric.data import Data

                return Data(x=probe)

            def len(inner):
                return 1

        p = _Probe()
        p.dataset_name = self.dataset_name
        if hasattr(self, "dataset_name_dict"):
            p.dataset_name_dict = self.dataset_name_dict
        tag = getattr(p[0], "dataset_name", None)
        return None if tag is None else int(torch.as_tensor(tag).reshape(-1)[0])

    def close(self) -> None:
        self._file.close()


def positional_targets() -> bool:
    """Whether upstream's datasets rebuild targets from ``var_config`` in ``get()`` (up to main
    d251f81); main527's (the named data schema) no longer do."""
    import hydragnn.utils.datasets.adiosdataset as upstream

    return hasattr(upstream, "update_predicted_values")


def to_data(arrays: dict):
    """A graph's arrays as upstream's reader makes its ``Data``: a tensor a key (dtype kept),
    uint8 keys (strings in HydraGNN's writer) as ``str``."""
    from torch_geometric.data import Data

    data = Data()
    for k, v in arrays.items():
        v = np.asarray(v)
        data[k] = bytes(v).decode("utf-8") if v.dtype == np.uint8 else torch.from_numpy(
            np.array(v))
    return data
