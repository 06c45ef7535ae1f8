"""pin_memory and the device copy (mdloader_plugin.batching.device): shapes, dtypes and values
survive; what needs CUDA is skipped on CPU-only torch, never faked."""

import numpy as np
import pytest
import torch

from mdloader_plugin.batching.device import DeviceStage
from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.loader.loader import MDLoader
from mdloader_plugin.store.shard import ShardStore

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device (pinned memory, streams)")


def _samples(n=24):
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        a = 3 + i % 5
        out.append({"x": rng.random((a, 4), dtype=np.float32),
                    "pos": rng.random((a, 3)),  # float64
                    "edge_index": rng.integers(0, a, (2, 2 * a)),
                    "y": np.array([float(i)], np.float32),
                    "z": rng.integers(1, 9, a).astype(np.int32)})
    return out


def _store():
    samples = _samples()
    return ShardStore.from_samples(None, samples, len(samples))


def _epoch(**kw):
    with MDLoader(_store(), batch_size=5, seed=3, backend="onesided", prefetch=2, **kw) as ld:
        return list(ld)


def _same(a, b, device_type: str):
    keys = sorted(a.keys())
    assert keys == sorted(b.keys())
    for k in keys:
        ta, tb = a[k], b[k]
        assert tb.dtype == ta.dtype and tb.shape == ta.shape, k
        assert tb.device.type == device_type, k
        assert torch.equal(ta, tb.cpu()), k


def test_default_moves_nothing_and_device_cpu_keeps_every_shape_dtype_and_value():
    host = _epoch()
    moved = _epoch(device="cpu")
    assert len(host) == len(moved) == 5
    for a, b in zip(host, moved):
        _same(a, b, "cpu")
    assert host[0].x.dtype == torch.float32 and host[0].pos.dtype == torch.float64
    assert host[0].edge_index.dtype == torch.int64 and host[0].z.dtype == torch.int32


@pytest.mark.skipif(CUDA, reason="checks the CPU-only fallback")
def test_pin_memory_without_accelerator_warns_once_and_serves_host_batches(caplog):
    host = _epoch()
    with caplog.at_level("WARNING"):
        pinned = _epoch(pin_memory=True)
    assert sum("no accelerator" in r.message for r in caplog.records) == 1
    for a, b in zip(host, pinned):
        _same(a, b, "cpu")


@pytest.mark.skipif(CUDA, reason="checks the CPU-only error")
def test_cuda_device_without_cuda_is_a_config_error_naming_the_fix():
    with pytest.raises(ConfigError, match="device='cuda'.*device=None"):
        MDLoader(_store(), batch_size=5, backend="onesided", device="cuda")


def test_stage_and_ready_handle_tensors_and_containers_on_cpu():
    st = DeviceStage("cpu")
    item = {"a": torch.arange(6, dtype=torch.int16).reshape(2, 3), "b": [torch.ones(2)]}
    out = st.ready(st.stage(item))
    assert out["a"].dtype == torch.int16 and out["a"].shape == (2, 3)
    assert torch.equal(out["b"][0], torch.ones(2))
    off = DeviceStage()
    assert not off.active and off.ready(off.stage(item)) is item


@needs_cuda
def test_cuda_batches_are_on_the_device_with_host_shapes_dtypes_and_values():
    host = _epoch()
    moved = _epoch(device="cuda")  # pins by default
    for a, b in zip(host, moved):
        _same(a, b, "cuda")


@needs_cuda
def test_pinned_host_batches_are_pinned():
    st = DeviceStage(None, pin_memory=True)
    out = st.ready(st.stage({"x": torch.ones(4, 2)}))
    assert out["x"].is_pinned() and out["x"].device.type == "cpu"


@needs_cuda
def test_copy_runs_on_a_side_stream_and_the_trainer_stream_waits_for_it():
    st = DeviceStage("cuda")
    staged = st.stage({"x": torch.arange(1 << 20, dtype=torch.float32)})
    assert st.stream != torch.cuda.current_stream()
    out = st.ready(staged)
    assert torch.equal(out["x"].cpu(), torch.arange(1 << 20, dtype=torch.float32))


# -- the HydraGNN config's mdloader.device / mdloader.pin_memory -------------------------------
def _hydra_loaders(path, *sets):
    from pathlib import Path

    from mdloader_plugin.batching.pyg import pyg_sample
    from mdloader_plugin.integrations.hydragnn import config, loaders

    demo = Path(__file__).resolve().parents[3] / "recipes" / "hydragnn" / "demo.yaml"
    cfg = config.load(demo, [f"Dataset.path={path}", "mdloader.prefetch=1", *sets])
    return loaders, loaders.build_mdloader(cfg, None, pyg_sample, labels=("trainset",))


@pytest.mark.parametrize("sets,want", [((), None), (("mdloader.device=cpu",), "cpu"),
                                       (("mdloader.device=auto",), "cuda" if CUDA else None)])
def test_hydragnn_config_device_reaches_the_loader(split_file, sets, want):
    loaders, (ld,) = _hydra_loaders(split_file, *sets)
    try:
        got = ld._device.device
        assert (got.type if got is not None else None) == want
        assert ld._device.pin == (want == "cuda")  # unset pin_memory: pinned only for a GPU
        batches = list(ld)
        assert len(batches) == len(ld) and all(b.x.device.type == (want or "cpu")
                                               for b in batches)
    finally:
        loaders.close([ld])


@pytest.mark.skipif(CUDA, reason="checks the CPU-only fallback")
def test_hydragnn_config_pin_memory_without_accelerator_warns(split_file, caplog):
    loaders, (ld,) = _hydra_loaders(split_file, "mdloader.pin_memory=true")
    try:
        assert not ld._device.pin
        assert any("pin_memory=True but no accelerator" in r.getMessage() for r in caplog.records)
    finally:
        loaders.close([ld])


@pytest.mark.skipif(CUDA, reason="checks the CPU-only error")
def test_hydragnn_config_cuda_without_cuda_names_the_key(split_file):
    with pytest.raises(ConfigError, match=r"^mdloader.device: 'cuda' .* use `auto`") as exc:
        _hydra_loaders(split_file, "mdloader.device=cuda")
    assert "\n" not in str(exc.value)
