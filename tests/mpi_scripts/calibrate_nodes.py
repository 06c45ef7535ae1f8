"""`calibrate` with ranks split into pretend nodes on one host (node_of overridden).

Usage: calibrate_nodes.py NODE_OF OUT.json   (NODE_OF e.g. 0,0,1,1)

Runs the quick calibration and writes the profile (rank 0). On one host every "node" is the same
shared memory, so the numbers mean nothing; what is tested is which stages run and what the
profile records."""

import sys

import numpy as np

from mdloader_plugin.estimator.calibrate import CalibrationSetup, run
from mdloader_plugin.mpi.world import World
from checks import check

world = World.detect()
world.node_of = np.asarray([int(x) for x in sys.argv[1].split(",")], dtype=np.int64)
check(world.node_of.size == world.size, (world.node_of, world.size))
prof = run(world, CalibrationSetup.quick())
if world.rank == 0:
    prof.write(sys.argv[2])
world.comm.Barrier()
world.close()
