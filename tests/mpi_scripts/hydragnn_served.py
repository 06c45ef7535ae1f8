"""``mdloader train hydragnn`` (the driver) recording what the train loader serves.

``python -m mpi4py hydragnn_served.py OUT KILL CONFIG [KEY=VALUE ...]``: each rank appends one
line a batch to ``OUT/served-<rank>.jsonl`` (the loader's epoch, the step, a digest of the batch's
``x`` and ``y``), flushed as it goes. ``KILL`` = ``E:S`` makes every rank SIGKILL itself as it is
about to hand the trainer step S of loader epoch E (a job killed mid-epoch, every rank gone at
once, nothing run at exit); ``-`` trains to the end.
"""

import hashlib
import json
import os
import signal
import sys

from mdloader_plugin.integrations.hydragnn import driver, epochs

out, kill, config, *overrides = sys.argv[1:]
kill_at = None if kill == "-" else tuple(int(x) for x in kill.split(":"))
timed_iter = epochs.TimedLoader.__iter__


def recording(self):
    path = os.path.join(out, f"served-{self.comm.Get_rank()}.jsonl")
    with open(path, "a") as f:
        for step, batch in enumerate(timed_iter(self)):
            epoch = self.epoch + self.epoch_offset  # the loader's epoch
            if (epoch, step) == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            digest = hashlib.sha1(batch.x.numpy().tobytes() + batch.y.numpy().tobytes())
            f.write(json.dumps([epoch, step, digest.hexdigest()[:16]]) + "\n")
            f.flush()
            yield batch


epochs.TimedLoader.__iter__ = recording
sys.exit(driver.run_file(config, overrides))
