"""mpi.agree on real ranks: rank 0's decision on every rank, the inputs that differ named once
by rank 0, and a failure on rank 0 (or inputs that must not differ) raised on every rank; settings
that must not differ (agree_settings) named with their ranks in one line; the loader's backend
setting taken from rank 0."""

import logging

from mpi4py import MPI

from checks import check
from mdloader_plugin.core.errors import ConfigError, MDLoaderError
from mdloader_plugin.loader.switch import agreed_setting
from mdloader_plugin.mpi.agree import (SETTINGS_FIX, agree_settings, compare_inputs, decide_once,
                                       require_same)
from mdloader_plugin.mpi.world import World

comm = MPI.COMM_WORLD
rank = comm.rank


class Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


log = logging.getLogger("agree-checks")
log.addHandler(seen := Lines())
log.setLevel(logging.INFO)

check(decide_once(comm, lambda: ("chosen by", rank)) == ("chosen by", 0), "not rank 0's")
inputs = {"profile": ("same", "same.json"), "ranks on the node": str(1 + (rank == 2))}
check(compare_inputs(comm, inputs, log, "it") == ["ranks on the node"], "wrong differences")
check(compare_inputs(comm, inputs, log, "it again") == ["ranks on the node"], "not stable")
if rank == 0:
    check(seen.lines == ["MDLOADER-AGREE warning: ranks' inputs to it differ (ranks on the node: "
                         "ranks 0-1,3 1; rank 2 2); every rank uses rank 0's decision"], seen.lines)
else:
    check(seen.lines == [], f"rank {rank} logged {seen.lines}")


def fails():
    raise ConfigError("profile x.json: key 'os.t_step' is absurd")


for attempt, what in ((lambda: decide_once(comm, fails), "key 'os.t_step' is absurd"),
                      (lambda: require_same(comm, {"data": f"/d/{rank % 2}.bp"}, "the data files",
                                            "give every rank the same file"),
                       "ranks disagree on the data files")):
    try:
        attempt()
        check(False, f"rank {rank}: no error")
    except MDLoaderError as exc:  # rank 0 raises the ConfigError, the others an MDLoaderError
        check(exc.agreed and exc.exit_code == 2 and (
            rank != 0 or (isinstance(exc, ConfigError) and what in str(exc))), f"{rank}: {exc}")
# settings that must not differ (agree_settings): the checks' result where they agree; a
# difference is one agreed error naming the setting and the ranks; a failing check wins
world = World(comm, rank, comm.size, None)
same = {"seed": "0", "batch_size": "4"}
check(agree_settings(world, same, lambda x: x * 2, 21) == 42, "no result")
for settings, fn, want in (
        ({**same, "seed": str(int(rank >= 2))}, None,
         f"ranks disagree on seed: ranks 0-1 0; ranks 2-3 1: {SETTINGS_FIX}"),
        ({**same, "seed": str(rank)}, lambda: rank == 1 and (_ for _ in ()).throw(
            ConfigError("batch_size must be a positive integer, got 0")),
         "batch_size must be a positive integer, got 0")):
    try:
        agree_settings(world, settings, fn)
        check(False, f"rank {rank}: no error")
    except MDLoaderError as exc:
        check(exc.agreed and exc.exit_code == 2 and (rank != 0 or str(exc) == want),
              f"{rank}: {exc}")
# a store's group size given otherwise on one rank: the same error, before the groups split
from mdloader_plugin.mpi import groups  # noqa: E402

try:
    groups.make(World.detect(comm), 1 if rank == 3 else 2)
    check(False, f"rank {rank}: no error for group sizes that differ")
except MDLoaderError as exc:
    check(exc.agreed and (rank != 0 or str(exc) == "ranks disagree on group_size: ranks 0-2 2; "
                          f"rank 3 1: {SETTINGS_FIX}"), f"{rank}: {exc}")
check(comm.allreduce(1) == comm.size, "ranks out of step after agree_settings")
# a rank configured with another backend (MDLOADER_BACKEND on some nodes) follows rank 0
mine = ("auto", True) if rank != 3 else ("onesided", False)
check(agreed_setting(comm, *mine) == ("auto", True), f"rank {rank} kept its own setting")
if rank == 0:
    print("agree ok", flush=True)
