"""``mdloader convert`` whose last rank dies after finishing `after` parts: the parts done stay
in OUT.parts for a resume. ``os._exit(9)`` as a killed process, or with ``--sigkill`` a real
SIGKILL (what the kernel's OOM killer or a lost node does to a rank).
Usage: convert_kill.py AFTER [--sigkill] ARGS"""

import os
import signal
import sys

from mdloader_plugin.cli import main
from mdloader_plugin.sources.convert import parallel

after = int(sys.argv[1])
sigkill = sys.argv[2] == "--sigkill"
args = sys.argv[3:] if sigkill else sys.argv[2:]
real = parallel.run_parts


def dying(comm, work, plan, todo, convert_part, *rest, **kw):
    done = []

    def part(p, folder):
        if comm.rank == comm.size - 1 and len(done) == after:
            if sigkill:
                print(f"rank {comm.rank}: killing myself", file=sys.stderr, flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(9)
        convert_part(p, folder)
        done.append(folder)
    return real(comm, work, plan, todo, part, *rest, **kw)


parallel.run_parts = dying
sys.exit(main(["convert", *args]))
