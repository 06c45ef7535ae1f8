"""The one per-epoch log line every integration writes and ``mdloader compare-logs`` reads.

Format (one line, ``key=value`` pairs after a fixed tag, so it survives any log prefix)::

    MDLOADER-EPOCH run=gin-demo loader=mdloader backend=collective epoch=2 wall_s=3.412 \
        data_wait_s=0.041 steps=25 samples=1600 samples_per_s=468.9

``loader`` is what the config selected (``mdloader``, ``hydragnn``, ``fairchem``, ...); ``backend``
is the MDLoader backend that served the epoch (``-`` for baselines). Unknown keys are kept, so
the format can grow without breaking readers.
"""

from __future__ import annotations

import re
from typing import Iterable

TAG = "MDLOADER-EPOCH"
_FLOATS = ("wall_s", "data_wait_s", "samples_per_s")
_INTS = ("epoch", "steps", "samples")
_PAIR = re.compile(r"(\w+)=(\S+)")


def format_epoch_line(*, run: str, loader: str, backend: str, epoch: int, wall_s: float,
                      data_wait_s: float, steps: int, samples: int, **extra) -> str:
    """One ``MDLOADER-EPOCH key=value ...`` line (what ``mdloader compare-logs`` reads); ``extra``
    keys are appended."""
    rate = samples / wall_s if wall_s > 0 else 0.0
    parts = [f"run={run}", f"loader={loader}", f"backend={backend or '-'}", f"epoch={epoch}",
             f"wall_s={wall_s:.4f}", f"data_wait_s={data_wait_s:.4f}", f"steps={steps}",
             f"samples={samples}", f"samples_per_s={rate:.1f}"]
    parts += [f"{k}={v}" for k, v in extra.items()]
    return f"{TAG} " + " ".join(parts)


def parse_epoch_lines(lines: Iterable[str]) -> list[dict]:
    """Every epoch record in `lines` (other lines are ignored)."""
    out = []
    for line in lines:
        pos = line.find(TAG)
        if pos < 0:
            continue
        rec: dict = dict(_PAIR.findall(line[pos + len(TAG):]))
        try:
            for k in _FLOATS:
                if k in rec:
                    rec[k] = float(rec[k])
            for k in _INTS:
                if k in rec:
                    rec[k] = int(rec[k])
        except ValueError:
            continue
        out.append(rec)
    return out
