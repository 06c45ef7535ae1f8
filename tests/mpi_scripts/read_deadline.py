"""Every rank loads its block of a slightly truncated file (usage: read_deadline.py PATH).

The rank whose block runs past the cut waits for ever inside ADIOS2 (holding the GIL); the others
go on to the index exchange. The read deadline (MDLOADER_READ_TIMEOUT) must end every rank.
"""

import sys

from mdloader_plugin import ShardStore, World

world = World.detect()
store = ShardStore.from_file(world, sys.argv[1], "trainset")
print(f"rank {world.rank}: outlived the truncated read", flush=True)
store.close()
