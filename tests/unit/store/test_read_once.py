"""A 4-rank load reads every byte of the file once: each rank reads only its own block."""

from __future__ import annotations

import json

import pytest

from mpirun import mpirun

SCRIPT = r'''
import json, sys
import numpy as np
from mdloader_plugin.mpi.world import World
from mdloader_plugin.core.blocks import block_bounds
from mdloader_plugin.store.shard import ShardStore
from mdloader_plugin.sources.adios import GraphFile, _ADIOS_TYPES

path = sys.argv[1]
world = World.detect()
store = ShardStore.from_file(world, path)
with GraphFile(path) as f:  # the reader alone, same block, to check counts and payload
    info = f.info("trainset")
    b = block_bounds(info.ndata, world.size)
    block = f.read_block("trainset", int(b[world.rank]), int(b[world.rank + 1]), info=info)
    payload = 0
    for v in f._vars.values():
        shape = [int(x) for x in v["Shape"].split(",")]
        payload += int(np.prod(shape)) * np.dtype(_ADIOS_TYPES[v["Type"]]).itemsize
reads = world.comm.gather([store.meta["bytes_read"], block.nbytes_read, len(block)], root=0)
if world.rank == 0:
    print("RESULT " + json.dumps({"reads": reads, "payload": payload, "ndata": info.ndata}))
store.close()
world.close()
'''


@pytest.mark.mpi
def test_four_ranks_read_each_byte_once(tmp_path, synth_file):
    script = tmp_path / "bytes_read.py"
    script.write_text(SCRIPT)
    r = mpirun(4, [script, synth_file], timeout=240)
    assert r.returncode == 0, r.stderr[-2000:]
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("RESULT "))
    res = json.loads(line[len("RESULT "):])
    store_reads = [x[0] for x in res["reads"]]
    block_reads = [x[1] for x in res["reads"]]
    assert sum(x[2] for x in res["reads"]) == res["ndata"]  # every graph on exactly one rank
    assert store_reads == block_reads
    assert sum(block_reads) == res["payload"]  # each byte of every variable read exactly once
    for n in block_reads:  # and about a quarter each
        assert abs(n - res["payload"] / 4) < 0.1 * res["payload"] / 4
