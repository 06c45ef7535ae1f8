"""A loader state names what it is valid for: the data set (sample count, each file's path and
bytes, the label), shuffle and drop_last. A state written for another data set or another
shuffle/drop_last, or one without these entries, is refused in one line naming the state's
source, both sides and what to do (serial loaders, no MPI)."""

from __future__ import annotations

import numpy as np
import pytest

from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.loader.loader import MDLoader
from mdloader_plugin.store.shard import ShardStore


def _loader(n=23, **kw):
    store = ShardStore.from_samples(None, [{"sid": np.array([i])} for i in range(n)], n)
    return MDLoader(store, batch_size=4, seed=3, backend="onesided", prefetch=0,
                    to_sample=lambda a: int(a["sid"][0]), collate=list, **kw)


def _refusal(loader, state, source="run/state.json") -> str:
    with pytest.raises(ConfigError) as e:
        loader.load_state_dict(state, source)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{source}: "), msg
    return msg


def test_the_state_names_its_data_set_shuffle_and_drop_last():
    state = _loader().state_dict()
    assert {k: state[k] for k in ("num_samples", "data", "shuffle", "drop_last")} == {
        "num_samples": 23, "data": "", "shuffle": True, "drop_last": False}
    again = _loader()
    again.load_state_dict(state)  # its own kind of loader takes it
    assert sum(len(b) for b in again) == 23


@pytest.mark.parametrize("theirs,mine,says", [
    (dict(n=23), dict(n=24), "written for a data set of 23 samples (built in memory) but this "
                             "run has a data set of 24 samples (built in memory): continue with "
                             "the data set, shuffle and drop_last it was written with, or start "
                             "a new run without it"),
    (dict(shuffle=False), dict(), "written for shuffle=False but this run has shuffle=True: "),
    (dict(drop_last=True), dict(), "written for drop_last=True but this run has drop_last=False"),
])
def test_a_state_for_another_data_set_or_order_is_one_line(theirs, mine, says):
    state = _loader(**theirs).state_dict()
    assert says in _refusal(_loader(**mine), state)


def test_a_state_without_what_it_is_for_is_one_line():
    old = {"seed": 3, "epoch": 2, "step": 2, "world_size": 1, "batch_size": 4, "offset": 0,
           "order": "torch"}
    msg = _refusal(_loader(), old)
    assert msg == ("run/state.json: written without num_samples, data, shuffle, drop_last (by "
                   "hand or by an older MDLoader) but this run has a data set of 23 samples "
                   "(built in memory), shuffle=True, drop_last=False: start without that state "
                   "(a new run), or save one with this MDLoader's state_dict()")


def test_a_state_for_other_files_of_the_same_size_names_both(tmp_path):
    from mdloader_plugin.sources import synth
    from mdloader_plugin.sources.adios import write_graphs

    graphs = list(synth.generate("hydragnn", 5, 0, 24))
    a, b = tmp_path / "a.bp", tmp_path / "b.bp"
    write_graphs(a, {"trainset": graphs[:12]})
    write_graphs(b, {"trainset": graphs[12:]})
    loaders = []
    try:
        for path in (a, b):
            store = ShardStore.from_file(None, str(path), "trainset")
            loaders.append(MDLoader(store, batch_size=4, prefetch=0, backend="onesided"))
        state = loaders[0].state_dict()
        assert state["data"].startswith(f"{a} (") and state["data"].endswith(" bytes) [trainset]")
        msg = _refusal(loaders[1], state)
        assert f"written for a data set of 12 samples ({a} (" in msg
        assert f"but this run has a data set of 12 samples ({b} (" in msg
        loaders[0].load_state_dict(state)  # the same file: taken
    finally:
        for ld in loaders:
            ld.close()
            ld.store.close()
