"""What HydraGNN main's training loop asks of a loader (and 5.0's): ``len``, ``set_epoch`` on
``batch_sampler`` (main, first) and ``sampler`` (5.0), a fresh iteration from the epoch's first
batch after an abandoned one (``rewind``), and an epoch cap (``max_steps``)."""

from mdloader_plugin.loader.loader import MDLoader
from mdloader_plugin.store.shard import ShardStore


def _ids(batch):
    return batch.x[:, 0].tolist()  # the synthetic graphs' first column tells them apart


def test_set_epoch_on_batch_sampler_and_sampler(split_file):
    store = ShardStore.from_file(None, split_file, "trainset")
    with MDLoader(store, batch_size=4, backend="onesided", prefetch=0) as loader:
        loader.batch_sampler.set_epoch(3)
        assert loader.epoch == 3
        loader.sampler.set_epoch(5)
        assert loader.epoch == 5 and len(loader) == 8  # 30 graphs, batches of 4
    store.close()


def test_rewind_serves_the_epoch_from_its_first_batch(split_file):
    store = ShardStore.from_file(None, split_file, "trainset")
    with MDLoader(store, batch_size=4, backend="onesided", prefetch=2) as loader:
        full = [_ids(b) for b in loader]
        it = iter(loader)
        next(it), next(it)
        it.close()  # abandoned after 2 batches, as upstream's graph-size scan does
        loader.rewind()
        assert [_ids(b) for b in loader] == full
    store.close()


def test_max_steps_caps_the_epoch_on_every_call(split_file):
    store = ShardStore.from_file(None, split_file, "trainset")
    with MDLoader(store, batch_size=4, backend="onesided", prefetch=2) as loader:
        full = [_ids(b) for b in loader]
        loader.max_steps = 3
        for epoch in (0, 0, 1):
            loader.set_epoch(epoch)
            got = [_ids(b) for b in loader]
            assert len(loader) == 3 and len(got) == 3
        loader.set_epoch(0)
        assert [_ids(b) for b in loader] == full[:3]
    store.close()
