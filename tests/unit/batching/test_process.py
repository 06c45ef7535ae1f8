"""producer='process': the helper process builds exactly the thread producer's batches, and it
ends cleanly (on close, on error, when its loader's process dies) without leaking shared
memory or hanging the trainer."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from mdloader_plugin.batching.process import HelperError
from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.loader.loader import MDLoader
from mdloader_plugin.sources import synth
from mdloader_plugin.store.shard import ShardStore
from mpirun import mpirun
from pyg_equal import batch_diff

ROOT = Path(__file__).resolve().parents[3]


def _store(kind: str, n: int):
    return ShardStore.from_samples(None, list(synth.generate(kind, 3, 0, n)), n)


def _epochs(store, producer: str, batch: int, epochs=(0, 1)):
    with MDLoader(store, batch_size=batch, backend="onesided", prefetch=2, seed=1,
                  producer=producer) as ld:
        assert ld.producer == producer and (ld._helper is not None) == (producer == "process")
        out = []
        for e in epochs:
            ld.set_epoch(e)
            out += list(ld)
        assert ld._column_collate.enabled
    return out


@pytest.mark.parametrize("kind,n,batch", [("hydragnn", 70, 8), ("oc20", 24, 5)])
def test_process_producer_yields_the_thread_producers_batches(kind, n, batch):
    store = _store(kind, n)
    a, b = _epochs(store, "thread", batch), _epochs(store, "process", batch)
    assert len(a) == len(b) > 0
    for i, (x, y) in enumerate(zip(a, b)):
        assert batch_diff(x, y) == "", f"batch {i}: {batch_diff(x, y)}"
    y = b[0]  # the tensors own their (shared) memory: writable, outliving the loader
    next(v for v in y._store.values() if v.is_floating_point()).add_(1)
    store.close()


def test_hydragnn_to_sample_is_rebuilt_in_the_helper_without_pickle():
    """HydraGNN's to_sample (node-feature selection, min-max y, graph heads, float64) crosses
    to the helper as JSON (helper_spec) and builds the thread producer's batches exactly."""
    from mdloader_plugin.batching.process import _rebuild, sample_spec
    from mdloader_plugin.integrations.hydragnn.graphs import Heads, make_to_sample

    to_sample = make_to_sample([0, 2], (-1.5, 2.0), Heads(["graph"], [0], [1], [3]), "float64")
    again = _rebuild(sample_spec(to_sample))
    assert again.helper_spec() == to_sample.helper_spec() and again is not to_sample
    store = _store("hydragnn", 30)
    out = {}
    for producer in ("thread", "process"):
        with MDLoader(store, batch_size=7, backend="onesided", seed=3, producer=producer,
                      to_sample=to_sample) as ld:
            assert (ld._helper is not None) == (producer == "process")
            out[producer] = list(ld)
    assert len(out["thread"]) == len(out["process"]) > 0
    for x, y in zip(out["thread"], out["process"]):
        assert batch_diff(x, y) == ""
    assert out["process"][0].x.shape[1] == 2 and out["process"][0].x.dtype == torch.float64
    store.close()


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_close_ends_the_helper_and_frees_its_memory():
    store = _store("hydragnn", 40)
    shm, fds = set(os.listdir("/dev/shm")), _fds()
    ld = MDLoader(store, batch_size=8, backend="onesided", producer="process")
    proc = ld._helper.proc
    batches = list(ld)
    ld.close()
    assert proc.poll() == 0, "the helper did not exit cleanly on close"
    assert set(os.listdir("/dev/shm")) == shm  # memfds have no name: nothing to leak
    del batches
    assert _fds() == fds, "file descriptors leaked"
    store.close()


def test_a_dead_helper_is_an_error_not_a_hang():
    store = _store("hydragnn", 80)
    ld = MDLoader(store, batch_size=4, backend="onesided", prefetch=1, producer="process")
    it = iter(ld)
    next(it)
    ld._helper.proc.send_signal(signal.SIGKILL)
    t0 = time.monotonic()
    with pytest.raises(HelperError, match=rf"pid {ld._helper.proc.pid}\) exited \(code -9"):
        for _ in it:
            pass
    assert time.monotonic() - t0 < 30
    ld.close()
    store.close()


def test_the_helper_exits_when_its_loaders_process_dies(tmp_path):
    code = ("import os, sys; from mdloader_plugin.loader.loader import MDLoader; "
            "from mdloader_plugin.sources import synth; "
            "from mdloader_plugin.store.shard import ShardStore; "
            "s = ShardStore.from_samples(None, list(synth.generate('hydragnn', 3, 0, 20)), 20); "
            "ld = MDLoader(s, batch_size=4, backend='onesided', producer='process'); "
            "next(iter(ld)); print(ld._helper.proc.pid, flush=True); os._exit(0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-2000:]
    pid = int(r.stdout.split()[-1])
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        if open(f"/proc/{pid}/stat").read().split()[2] == "Z":
            return  # exited; a zombie until its reaper (init) collects it
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    pytest.fail("the helper outlived its loader's process by 10 s")


def test_without_a_column_wise_path_the_thread_producer_is_used(caplog):
    store = _store("hydragnn", 20)
    with MDLoader(store, batch_size=4, backend="onesided", producer="process",
                  to_sample=lambda arrays: arrays, collate=lambda xs: xs) as ld:
        assert ld.producer == "thread" and ld._helper is None
        assert len(list(ld)) == len(ld)
    assert "custom collate" in caplog.text

    class Custom:  # a column-wise twin, but no helper_spec(): cannot cross without pickle
        columns = staticmethod(lambda arrays: arrays)

        def __call__(self, arrays):
            from mdloader_plugin.batching.pyg import pyg_sample
            return pyg_sample(arrays)

    caplog.clear()
    with MDLoader(store, batch_size=4, backend="onesided", producer="process",
                  to_sample=Custom()) as ld:
        assert ld.producer == "thread" and ld._helper is None
        assert len(list(ld)) == len(ld)
    assert "no helper_spec()" in caplog.text
    store.close()


def test_producer_setting_is_checked(monkeypatch):
    store = _store("hydragnn", 20)
    with pytest.raises(ConfigError, match="producer must be 'thread' or 'process'"):
        MDLoader(store, batch_size=4, producer="fork")
    monkeypatch.setenv("MDLOADER_PRODUCER", "procs")
    with pytest.raises(ConfigError, match="MDLOADER_PRODUCER must be"):
        MDLoader(store, batch_size=4)
    store.close()


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.timeout(900)  # a helper a loader (six a rank), each importing torch and PyG
@pytest.mark.parametrize("ranks,n,batch", [(2, 101, 16), (4, 53, 3)])
def test_process_producer_equals_pyg_dataloader_abandon_and_resume_on_mpi_ranks(ranks, n, batch):
    """The loader-semantics script (every backend, rank-dependent abandons, speculation,
    resume) with every loader's batches built by its helper process."""
    r = mpirun(ranks, ["tests/mpi_scripts/loader_semantics.py", n, batch], timeout=600,
               env={"MDLOADER_PRODUCER": "process"})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert f"loader semantics ok: {ranks} ranks" in r.stdout
