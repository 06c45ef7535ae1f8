"""No unpickling in the data path; the one converter that must unpickle says so.

Grep-based: in ``mdloader_plugin/`` only ``sources/convert/oc20lmdb.py`` may call ``pickle.load``/
``loads`` (OC20's LMDBs hold pickled PyG objects); ``torch.load`` always passes
``weights_only=True``; numpy never loads with ``allow_pickle=True``; no dill/cloudpickle/joblib.
Sample bytes move only as raw buffers: the backends and the codec make no mpi4py lower-case
(pickle-based) calls at all.
"""

from __future__ import annotations

import re
import subprocess
import sys

from mpirun import ROOT

PKG = ROOT / "mdloader_plugin"
ALLOWED = {"sources/convert/oc20lmdb.py"}
UNPICKLE = re.compile(r"\b(c?[Pp]ickle|dill|cloudpickle|joblib|_pickle)\s*\.\s*(load|loads|"
                      r"Unpickler)\b|\bimport\s+(dill|cloudpickle|joblib)\b"
                      r"|allow_pickle\s*=\s*True")
TORCH_LOAD = re.compile(r"torch\.load\s*\(")
OBJECT_MPI = re.compile(r"\.(bcast|allgather|gather|scatter|alltoall|send|recv|isend|irecv|"
                        r"sendrecv|allreduce|reduce)\(")


def sources():
    for path in sorted(PKG.rglob("*.py")):
        yield path.relative_to(PKG).as_posix(), path.read_text()


def test_unpickling_only_in_the_lmdb_converter():
    bad = [(rel, m.group(0)) for rel, text in sources() for m in UNPICKLE.finditer(text)
           if rel not in ALLOWED]
    assert not bad, f"unpickling outside the OC20 LMDB converter: {bad}"
    assert UNPICKLE.search((PKG / "sources/convert/oc20lmdb.py").read_text())  # the rule bites


def test_torch_load_is_always_weights_only():
    for rel, text in sources():
        for m in TORCH_LOAD.finditer(text):
            call = text[m.start():text.find(")", m.end()) + 1]
            assert "weights_only=True" in call, f"{rel}: {call}"


def test_sample_bytes_never_go_through_pickle():
    for rel in ("records/codec.py",
                *[f"backends/{p.name}" for p in (PKG / "backends").glob("*.py")]):
        hits = OBJECT_MPI.findall((PKG / rel).read_text())
        assert not hits, f"{rel} uses pickle-based mpi4py calls: {hits}"


def test_converter_warns_in_help_and_at_run_time():
    from mdloader_plugin.sources.convert import oc20lmdb

    assert "unpickles" in oc20lmdb.WARNING and "trust" in oc20lmdb.WARNING
    r = subprocess.run([sys.executable, "-m", "mdloader_plugin", "convert", "--help"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0
    assert re.search(r"WARNING: unpickling runs code", r.stdout), r.stdout
