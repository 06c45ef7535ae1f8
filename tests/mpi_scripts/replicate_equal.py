"""Read-once-and-copy against every group reading: ``replicate_equal.py FILE W [multi]
[chunk=BYTES]`` loads the store with ``replicate="read"`` and ``"copy"`` (group size W), asserts
on every rank that the record buffers, index and digests are byte-identical, and prints the bytes
read from the file by all ranks in each mode. With ``multi`` the file is loaded as two data sets
(``from_files``); with ``chunk=BYTES`` both loads stream chunks of at most BYTES and must equal a
load with the default chunk."""

import hashlib
import sys

import numpy as np

from mdloader_plugin.store.shard import ShardStore
from mdloader_plugin.mpi.world import World, abort_on_error
from checks import check

path, w = sys.argv[1], int(sys.argv[2])
multi = "multi" in sys.argv[3:]
chunk = next((int(a[6:]) for a in sys.argv[3:] if a.startswith("chunk=")), None)
world = World.detect()


def load(mode, chunk=chunk):
    kw = dict(group_size=w, digests=True, replicate=mode, load_chunk_bytes=chunk)
    if multi:
        return ShardStore.from_files(world, [f"a={path}", f"b={path}"], **kw)
    return ShardStore.from_file(world, path, **kw)


def fingerprint(store):
    ids = np.arange(store.num_samples)
    return (hashlib.sha256(store.buffer.tobytes()).hexdigest(), store.block_starts.tolist(),
            np.asarray(store.offsets[ids]).tolist(), np.asarray(store.nbytes[ids]).tolist(),
            store.digests.tolist(), store.meta["keys"], store.meta["label"])


with abort_on_error(world.comm):
    read = load("read")
    fp_read, read_bytes = fingerprint(read), read.meta["bytes_read_all_ranks"]
    check(read.meta["replicate"] == "read", read.meta["replicate"])
    read.close()
    copy = load("copy")
    fp_copy, copy_bytes = fingerprint(copy), copy.meta["bytes_read_all_ranks"]
    check(copy.meta["replicate"] == ("copy" if w < world.size else "read"),
          (w, copy.meta["replicate"]))
    check(fp_copy == fp_read, f"rank {world.rank}: copied store differs from the read one")
    check(copy.buffer.nbytes > 0, "copied store is empty")
    copy.close()
    if chunk is not None:
        whole = load("read", None)
        check(fingerprint(whole) == fp_read, f"rank {world.rank}: chunks of {chunk} B differ")
        whole.close()
    same = world.comm.allgather(fp_copy[0])
    if world.rank == 0:
        print(f"equal ranks={world.size} W={w} read_bytes={read_bytes} copy_bytes={copy_bytes} "
              f"distinct_buffers={len(set(same))}", flush=True)
