"""World.detect, agree and abort_on_error on real ranks.

Usage: world_checks.py detect|agree|detect,agree|abort-user|abort-bug|abort-agreed

``detect``: node and local ranks on this one machine; the private communicator is a duplicate
(congruent, not the same handle) and its traffic never matches the user's. With
``MDLOADER_TEST_WRONG=1`` it expects one node too many (a check that must fail, even under
``python -O``). ``agree``: a rank-local error becomes the same error on every rank. ``abort-*``:
an error on rank 1 inside ``abort_on_error`` while the others wait in a barrier.
"""

import os
import sys
import time

import numpy as np
from mpi4py import MPI

from checks import check
from mdloader_plugin.core.errors import DataError, MDLoaderError
from mdloader_plugin.mpi.world import World, abort_on_error, agree

mode = sys.argv[1]
modes = mode.split(",")  # detect,agree: both checks in one launch
user = MPI.COMM_WORLD

if "detect" in modes:
    world = World.detect()
    check((world.rank, world.size) == (user.rank, user.size), (world.rank, world.size))
    nodes = 2 if os.environ.get("MDLOADER_TEST_WRONG") == "1" else 1
    check(world.num_nodes == nodes, f"{world.num_nodes} nodes, expected {nodes}")
    check(world.node_of.tolist() == [0] * user.size, f"node_of {world.node_of.tolist()}")
    check((world.local_rank, world.local_size) == (user.rank, user.size),
          f"local rank {world.local_rank} of {world.local_size}")
    check(world.comm != user and MPI.Comm.Compare(world.comm, user) == MPI.CONGRUENT,
          "World.detect did not duplicate the communicator")
    # a message on the user's communicator is never seen on the private one, and back
    peer = (user.rank + 1) % user.size
    req = user.isend(("user", user.rank), dest=peer, tag=11)
    user.Barrier()
    time.sleep(0.2)
    check(not world.comm.iprobe(source=MPI.ANY_SOURCE, tag=11),
          "the user's message matched on the private communicator")
    got = user.recv(source=(user.rank - 1) % user.size, tag=11)
    req.wait()
    check(got == ("user", (user.rank - 1) % user.size), got)
    # on a sub-communicator: every rank but the last
    sub = user.Split(0 if user.rank != user.size - 1 else MPI.UNDEFINED, key=user.rank)
    if sub != MPI.COMM_NULL:
        w2 = World.detect(sub)
        want = (user.size - 1, user.rank, user.size - 1, [0] * (user.size - 1))
        got = (w2.size, w2.rank, w2.local_size, w2.node_of.tolist())
        check(got == want, f"World.detect(sub): {got}, expected {want}")
        w2.close()
        check(w2.comm is None, "close left the communicator")
        sub.Free()
    world.close()
    world.close()  # twice is harmless
    if user.rank == 0:
        print(f"detect ok optimize={sys.flags.optimize}", flush=True)

if "agree" in modes:
    world = World.detect()
    check(agree(world, lambda x: x * 2 + world.rank, 5) == 10 + world.rank, "agree's result")

    def bad_file():
        if world.rank == 1:
            raise DataError("x.bp: key 'trainset/x' missing")
        return "fine"

    try:
        agree(world, bad_file)
        check(False, "agree returned although rank 1 failed")
    except MDLoaderError as e:
        check(str(e) == "x.bp: key 'trainset/x' missing", str(e))
        check(getattr(e, "agreed", False), "not marked agreed")
        check(type(e) is (DataError if world.rank == 1 else MDLoaderError), type(e).__name__)

    def bug():
        if world.rank == 2:
            raise ZeroDivisionError("division by zero")

    try:
        agree(world, bug)
        check(False, "agree returned although rank 2 failed")
    except ZeroDivisionError:
        check(world.rank == 2, "the bug's own exception reached another rank")
    except MDLoaderError as e:
        check(world.rank != 2, "rank 2 lost its exception")
        check(str(e) == "rank 2 failed: ZeroDivisionError: division by zero", str(e))
    # after the errors, the ranks still talk in step
    check(world.comm.allreduce(1) == world.size, "ranks out of step after agree")
    world.close()
    if user.rank == 0:
        print("agree ok", flush=True)

if mode.startswith("abort"):
    world = World.detect()
    with abort_on_error():
        if mode == "abort-agreed":
            agree(world, lambda: (_ for _ in ()).throw(DataError("bad.bp: no such file"))
                  if world.rank == 1 else None)
        elif world.rank == 1:
            time.sleep(0.5)
            if mode == "abort-user":
                raise DataError("bad.bp: key 'trainset/y' missing")
            raise KeyError("oops")
        user.Barrier()  # the others wait here for a rank that never comes
        time.sleep(0.5)
    print(f"rank {user.rank}: outlived the failing rank", flush=True)
