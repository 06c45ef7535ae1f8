"""fairchem's loader path with replica groups on 4 MPI ranks: ``build_loader`` (the Hydra target
``loader: mdloader`` uses) with ``group_size: 2`` (also DDStore's spelling ``width``, and the
copy loading) serves every rank the same fairchem batches, step by step, as ``group_size: all``
(W = P), with both backends, atom-balanced dealing (``max_atoms``) and two data sets. The job
(:func:`_job`) runs in the 4-rank launch the fairchem modules share
(tests/common/shared_jobs.py)."""

from __future__ import annotations

import hashlib
import types
from pathlib import Path

import pytest

from checks import check  # noqa: E402

pytestmark = [pytest.mark.mpi, pytest.mark.slow]
KEY_MAPPING = {"energy": "oc20_energy", "forces": "forces"}
CONFIGS = [  # (name, build_loader arguments); the first is the reference (W = P)
    ("all-onesided", {"backend": "onesided"}),
    ("W2-onesided", {"backend": "onesided", "group_size": 2}),
    ("W2-collective", {"backend": "collective", "width": 2}),
    ("W2-copy", {"backend": "onesided", "group_size": 2, "replicate": "copy"}),
]


SHARED_JOBS = ("fairchem",)  # the job runs in the launch the fairchem modules share


def shared_job(key: str, work: Path) -> list:
    """The job's data in `work`; the arguments of :func:`_job` (tests/common/shared_jobs.py)."""
    from mdloader_plugin.integrations.fairchem.data import write_oc20_like

    return [write_oc20_like(str(work), num_train=40, num_val=8, seed=5)["bp"]]


@pytest.fixture(scope="module")
def job(shared_jobs, request):
    pytest.importorskip("fairchem.core")
    return shared_jobs.result("fairchem", request.module)["stdout"]


@pytest.mark.timeout(600)
def test_fairchem_loader_with_groups_serves_the_batches_of_all_ranks(job):
    for name in ("single", "multi"):
        line = next((ln for ln in job.splitlines() if ln.startswith(f"SAME {name} ")), None)
        assert line, job[-3000:]
        steps, configs = (int(x.split("=")[1]) for x in line.split()[2:4])
        assert steps > 0 and configs == len(CONFIGS)


def _collate():
    from fairchem.core.units.mlip_unit.mlip_unit import Task, mt_collater_adapter

    tasks = [Task(name="oc20_energy", level="system", property="energy", out_spec=None,
                  normalizer=None, datasets=["oc20", "oc20b"]),
             Task(name="forces", level="atom", property="forces", out_spec=None,
                  normalizer=None, datasets=["oc20", "oc20b"])]
    for t in tasks:
        t.out_spec = types.SimpleNamespace(dim=[1] if t.level == "system" else [3],
                                           dtype="float32")
    return mt_collater_adapter(tasks)


def _digest(batch) -> str:
    """sha256 over every tensor of the batch (names, dtypes, shapes, bytes) and the rest."""
    import torch

    h = hashlib.sha256()
    for key in sorted(batch.keys()):
        v = batch[key]
        h.update(key.encode())
        if torch.is_tensor(v):
            h.update(f"{v.dtype}{tuple(v.shape)}".encode())
            h.update(v.detach().cpu().contiguous().numpy().tobytes())
        else:
            h.update(repr(v).encode())
    return h.hexdigest()


def _serve(bp: str, multi: bool, **kw) -> list[str]:
    from mdloader_plugin.integrations.fairchem.loader import build_loader

    common = dict(collate_fn=_collate(), key_mapping=KEY_MAPPING, max_atoms=120, seed=3,
                  prefetch=0)
    if multi:
        loader = build_loader(datasets={"oc20": bp, "oc20b": bp}, **common, **kw)
    else:
        loader = build_loader(bp, dataset_name="oc20", **common, **kw)
    out = []
    for epoch in (0, 1):
        loader.batch_sampler.set_epoch_and_start_iteration(epoch, 0)
        out += [_digest(b) for b in loader]
    loader.close()
    return out


def _job(bp: str) -> None:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    for multi in (False, True):
        served = [_serve(bp, multi, **kw) for _, kw in CONFIGS]
        for (name, _), got in zip(CONFIGS, served):
            check(got == served[0], f"{name} served other batches than {CONFIGS[0][0]} "
                                    f"({'two data sets' if multi else 'one'})")
        steps = comm.allreduce(len(served[0]), op=MPI.MIN)
        if comm.rank == 0:
            print(f"SAME {'multi' if multi else 'single'} steps={steps} configs={len(served)}",
                  flush=True)

