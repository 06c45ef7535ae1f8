"""Per-step cost of the scale work (issue 19), one process: index lookups and the epoch order.

What a backend asks the index every step (``nbytes[ids]``, ``offsets[ids]``, ``owner_of(ids)``
for a rank's ``B`` ids; the collective backend asks ``nbytes``/``offsets`` again for the ~``B``
ids it sends) with the ``full`` index (int64 offset + length: the representation
before issue 19, same code path as before) and the ``compact`` index, dense (``K = 1``, up to
4M samples: the loaders benchmark's case) and checkpointed (``K = 64``, above 4M); and what the
sampler does a step (``plan(epoch, step)``) with the ``torch`` list and the ``feistel`` order.
Kinds are interleaved round by round (the median of each kind over the rounds), so the ratios
hold on a loaded machine even where the absolute times do not.

    python -m bench.scale.step [--rounds 9] [--out bench/results/scale_step.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from bench.harness import BENCH as HERE, record
P = 4
BATCHES = (4, 32, 256)


def indexes(n: int) -> dict:
    """Every index kind over `n` samples on `P` ranks (one process builds the whole index)."""
    from mdloader_plugin.store.index_build import build_index
    from mdloader_plugin.core.blocks import block_bounds

    sizes = 8 * np.random.default_rng(1).integers(300, 900, n)  # molecule-like, 2 B codes
    starts = block_bounds(n, P)
    out = {"full": build_index(None, sizes, starts, "full")}
    out["compact K=1" if n <= (1 << 22) else "compact K=64"] = build_index(None, sizes, starts)
    if n <= (1 << 22):
        out["compact K=64"] = build_index(None, sizes, starts, every=64)
    return out


def lookup_us(idx, ids: np.ndarray, reps: int) -> float:
    t = time.perf_counter()
    for _ in range(reps):
        idx.nbytes[ids], idx.offsets[ids], idx.owner_of(ids)
    return (time.perf_counter() - t) / reps * 1e6


def plan_us(n: int, batch: int, order: str) -> tuple[float, float]:
    """(first plan of the epoch, mean of the next steps) in us; the steps span two runs of
    plans, so a run's computation (the feistel evaluations) is in the mean."""
    from mdloader_plugin.sampling.reference import PLAN_POSITIONS
    from mdloader_plugin.sampling.reference import ReferenceSchedule as GlobalSampler

    core = GlobalSampler(n, P, batch, seed=0, order=order)
    t = time.perf_counter()
    core.plan(0, 0)  # a torch order makes its list here (epoch start)
    first = time.perf_counter() - t
    span = max(1, PLAN_POSITIONS // (P * batch))
    steps = max(1, min(core.steps_per_epoch - 1, 2 * span))
    t = time.perf_counter()
    for s in range(1, steps + 1):
        core.plan(0, s)
    return first * 1e6, (time.perf_counter() - t) / steps * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--sizes", default="4096,4194304,20000000")
    ap.add_argument("--out", default=str(HERE / "results" / "scale_step.json"))
    a = ap.parse_args()
    load0 = [round(x, 2) for x in os.getloadavg()]
    rng = np.random.default_rng(2)
    rows = []
    for n in (int(x) for x in a.sizes.split(",")):
        kinds = indexes(n)
        for b in BATCHES:
            ids = rng.integers(0, n, b)
            reps = max(20, 20000 // b)
            got = {k: [] for k in kinds}
            for _ in range(a.rounds):
                for k, idx in kinds.items():
                    got[k].append(lookup_us(idx, ids, reps))
            for k, v in got.items():
                rows.append({"what": "index lookup", "kind": k, "N": n, "P": P, "B": b,
                             "us_per_step": float(np.median(v))})
                print(f"index  N={n:>9} B={b:>5} {k:<13} {np.median(v):9.1f} us/step",
                      flush=True)
        del kinds
        orders = ("torch", "feistel")
        for b in BATCHES:
            got = {o: [] for o in orders}
            for _ in range(max(3, a.rounds // 3)):
                for o in orders:
                    got[o].append(plan_us(n, b, o))
            for o, v in got.items():
                first, step = np.median(np.array(v), axis=0)
                rows.append({"what": "plan", "kind": o, "N": n, "P": P, "B": b,
                             "us_per_step": float(step), "first_plan_us": float(first)})
                print(f"plan   N={n:>9} P*B={P * b:>5} {o:<13} {step:9.1f} us/step (first "
                      f"plan {first / 1e3:.1f} ms)", flush=True)
    out = {"date": time.strftime("%Y-%m-%d %H:%M %Z"), "loadavg_start": load0,
           "loadavg_end": [round(x, 2) for x in os.getloadavg()], "rounds": a.rounds, "rows": rows,
           "record": record(a)}
    Path(a.out).write_text(json.dumps(out, indent=1))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
