"""``mdloader convert`` whose last rank dies (os._exit, as a killed process) after finishing
`after` parts: the parts done stay in OUT.parts for a resume. Usage: convert_kill.py AFTER ARGS"""

import os
import sys

from mdloader_plugin.cli import main
from mdloader_plugin.sources.convert import parallel

after = int(sys.argv[1])
real = parallel.run_parts


def dying(comm, work, plan, todo, convert_part, *rest, **kw):
    done = []

    def part(p, folder):
        if comm.rank == comm.size - 1 and len(done) == after:
            os._exit(9)
        convert_part(p, folder)
        done.append(folder)
    return real(comm, work, plan, todo, part, *rest, **kw)


parallel.run_parts = dying
sys.exit(main(["convert", *sys.argv[2:]]))
