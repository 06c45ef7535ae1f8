"""Compact (private and node-shared, dense and checkpointed) vs full index on real ranks.

Usage: index_equal.py N OUT.json

Every representation must give the full index's offsets, lengths and owners for every id, and
both backends must serve byte-identical batches over each. Writes a summary (rank 0)."""

import json
import sys

import numpy as np

from mdloader_plugin.store import index as idx
from mdloader_plugin.loader.loader import MDLoader
from mdloader_plugin.core.blocks import block_bounds
from mdloader_plugin.store.shard import ShardStore
from mdloader_plugin.mpi.world import World
from checks import check

N, out_path = int(sys.argv[1]), sys.argv[2]
world = World.detect()
lo, hi = block_bounds(N, world.size)[world.rank:world.rank + 2]
rng = np.random.default_rng(7)
natoms = rng.integers(1, 60, N)  # sizes spread over several codes; 1-atom records too
samples = [{"sid": np.array([i]), "pos": np.full((int(natoms[i]), 3), i, np.float32)}
           for i in range(lo, hi)]


def batches(store, backend, order="auto"):
    loader = MDLoader(store, batch_size=7, seed=3, backend=backend, prefetch=1, order=order,
                      to_sample=lambda a: (int(a["sid"][0]), a["pos"].tobytes()), collate=list)
    loader.set_epoch(1)
    got = [b for b in loader]
    loader.close()
    return got


two_nodes = World(world.comm, world.rank, world.size, np.arange(world.size) * 2 // world.size,
                  world.rank % (world.size // 2), world.size // 2)  # ranks of one host as 2 nodes
ref = ShardStore.from_samples(world, samples, N, index="full", digests=True)
ids = np.arange(N)
want = {"offsets": ref.offsets[ids], "nbytes": ref.nbytes[ids], "owner": ref.owner_of(ids)}
want_batches = batches(ref, "collective")
summary = {}
ref_pos = {i: np.full((int(natoms[i]), 3), i, np.float32).tobytes() for i in range(N)}
for name, kind, share, dense in [("compact-dense", "compact", "rank", True),
                                 ("compact-k64", "compact", "rank", False),
                                 ("shared-k64", "compact", "node", False),
                                 ("shared-dense", "compact", "node", True),
                                 ("shared-2nodes", "compact", "node", False)]:
    idx.DENSE_UP_TO = N if dense else 0
    st = ShardStore.from_samples(two_nodes if "2nodes" in name else world, samples, N, index=kind,
                                 index_share=share, digests=True)
    check(st.index.every == (1 if dense else 64), st.index.every)
    for key, fn in (("offsets", lambda: st.offsets[ids]), ("nbytes", lambda: st.nbytes[ids]),
                    ("owner", lambda: st.owner_of(ids))):
        check(np.array_equal(fn(), want[key]), (name, key))
    check(np.array_equal(st.digests, ref.digests), (name, "digests"))
    check(np.array_equal(st.buffer, ref.buffer), name)
    for backend in ("collective", "onesided") if "2nodes" not in name else ("collective",):
        check(batches(st, backend) == want_batches, (name, backend))
    if name == "compact-k64":  # the feistel order through real loaders: every id once
        got = [s for b in batches(st, "onesided", order="feistel") for s in b]
        check(all(pos == ref_pos[i] for i, pos in got),
              "feistel positions differ from the reference")
        ids_all = sorted(i for part in world.comm.allgather([i for i, _ in got]) for i in part)
        pad = -(-N // world.size) * world.size - N
        check(sorted(set(ids_all)) == list(range(N)) and len(ids_all) == N + pad,
              f"{len(ids_all)} ids served, {len(set(ids_all))} distinct; expected {N} + {pad}")
    rep = st.memory_report()
    summary[name] = {"index_bytes": rep["index_bytes"],
                     "shared": rep["index_shared_bytes"], "kind": rep["index_kind"]}
    st.close()
summary["full"] = {"index_bytes": ref.memory_report()["index_bytes"]}
ref.close()
summary = world.comm.gather(summary)
if world.rank == 0:
    with open(out_path, "w") as f:
        json.dump(summary, f)
world.close()
