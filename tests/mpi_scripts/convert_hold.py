"""``mdloader convert`` whose parts each wait until the file GATE exists: a conversion that
is still running while a test starts another one. Usage: convert_hold.py GATE ARGS"""

import os
import sys
import time

from mdloader_plugin.cli import main
from mdloader_plugin.sources.convert import parallel

gate = sys.argv[1]
real = parallel.run_parts


def held(comm, work, plan, todo, convert_part, *rest, **kw):
    def part(p, folder):
        while not os.path.exists(gate):
            time.sleep(0.05)
        convert_part(p, folder)
    return real(comm, work, plan, todo, part, *rest, **kw)


parallel.run_parts = held
sys.exit(main(["convert", *sys.argv[2:]]))
