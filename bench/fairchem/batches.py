"""fairchem's ``max_atoms`` and data-set mix under MDLoader: atoms a batch against the cap, and the
N-proportional state of a 4-data-set mix a rank holds.

    python -m bench.fairchem.batches            # writes bench/results/fairchem_batches.json

1. Atoms a batch on OC20-like sizes (20,000 structures, gamma-distributed atoms, mean ~75,
   7-225): fairchem's own ``MaxAtomDistributedBatchSampler`` (fairchem-core installed), MDLoader's
   ``max_atoms`` batches, and the rule MDLoader used before (``max_atoms // mean`` graphs a batch
   from a shuffled epoch), at ``max_atoms`` 300 and 700: a histogram in tenths of the cap, the
   largest batch, the share above the cap, batches an epoch.
2. The 4-data-set fairchem mix (temperature 2, each set's seeded permutation) at 2e7 samples:
   bytes a sample of the rank's N-proportional state as ``mdloader rank-cost --datasets 4
   --fairchem`` measures it (index, order, plans; P = 64), with the order MDLoader picks (auto:
   the keyed one) and with the expanded list kept (``torch``, fairchem's exact order).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from bench.harness import BENCH as HERE, commit, record

from mdloader_plugin.sampling.max_atoms import MaxAtomsBatches  # noqa: E402

N, SEED, CAPS, BINS = 20_000, 0, (300, 700), 10


def oc20_like(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(rng.gamma(6.0, 12.5, n).round(), 7, 225).astype(np.int64)


def summary(atoms: np.ndarray, cap: int) -> dict:
    edges = np.linspace(0, cap, BINS + 1)
    hist = np.histogram(np.minimum(atoms, cap), edges)[0].tolist()
    return {"batches": int(atoms.size), "max": int(atoms.max()), "mean": float(atoms.mean()),
            "over_cap": float((atoms > cap).mean()), "hist": hist,
            "above_cap": int((atoms > cap).sum())}


def fairchem_atoms(natoms: np.ndarray, cap: int) -> np.ndarray | None:
    try:
        from fairchem.core.datasets.samplers.max_atom_distributed_sampler import \
            MaxAtomDistributedBatchSampler
    except ImportError:
        return None

    class Dataset:
        def __len__(self):
            return natoms.size

        def get_metadata(self, key, idx):
            return natoms[idx]

    s = MaxAtomDistributedBatchSampler(Dataset(), cap, 1, 0, SEED)
    s.set_epoch_and_start_iteration(0, 0)
    return np.array([natoms[b].sum() for b in s])


def batches() -> list[dict]:
    natoms = oc20_like(N, SEED)
    rows = []
    for cap in CAPS:
        plan = MaxAtomsBatches(natoms, cap, 1, seed=SEED)
        mine = np.array([natoms[plan.plan(0, s)[0][plan.plan(0, s)[0] >= 0]].sum()
                         for s in range(plan.steps_in(0))])
        b = max(1, cap // int(round(natoms.mean())))
        perm = np.random.default_rng(SEED).permutation(N)
        old = natoms[perm[:N // b * b]].reshape(-1, b).sum(1)
        theirs = fairchem_atoms(natoms, cap)
        rows.append({"max_atoms": cap, "mdloader": summary(mine, cap),
                     "before": summary(old, cap) | {"graphs_a_batch": b},
                     "fairchem": None if theirs is None else summary(theirs, cap),
                     "equal_to_fairchem": None if theirs is None else
                     bool(np.array_equal(np.sort(theirs), np.sort(mine)))})
    return rows


def mix_bytes(num_samples: float) -> dict:
    from mdloader_plugin.estimator.rankcost import Job, RankCost, mix_for
    from mdloader_plugin.sampling.reference import ReferenceSchedule as GlobalSampler

    job = Job(64, int(num_samples), 32, "onesided", 4, steps=5, fairchem=True)
    rc = RankCost(job)
    row = rc.run()
    state, keyed = rc.state_bytes(), rc.schedule.order_bytes
    listed = GlobalSampler(job.num_samples, 64, 32, mix=mix_for(job), order="torch").order_bytes
    return {"num_samples": job.num_samples, "datasets": 4, "ranks": 64, "order": rc.schedule.order,
            "bytes_per_sample": state / job.num_samples,
            "order_bytes": keyed, "list_order_bytes": listed,
            "list_bytes_per_sample": (state - keyed + listed) / job.num_samples,
            "step_cpu_ms_median": row["step_cpu_ms_median"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--num-samples", type=float, default=2e7)
    ap.add_argument("--out", default=str(HERE / "results" / "fairchem_batches.json"))
    args = ap.parse_args()
    load = os.getloadavg()[0]
    out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "machine": f"{os.cpu_count()} cores, load {load:.1f}",
           "commit": commit(), "record": record(args),
           "structures": N, "batches": batches(), "mix": mix_bytes(args.num_samples)}
    Path(args.out).write_text(json.dumps(out, indent=1))
    for r in out["batches"]:
        print(f"max_atoms {r['max_atoms']}: mdloader max {r['mdloader']['max']}, before max "
              f"{r['before']['max']} ({r['before']['over_cap']:.1%} over), equal to fairchem: "
              f"{r['equal_to_fairchem']}")
    m = out["mix"]
    print(f"4-set fairchem mix at {m['num_samples']:.0e} ({m['order']}): "
          f"{m['bytes_per_sample']:.2f} B a sample; with the expanded list kept "
          f"{m['list_bytes_per_sample']:.2f} B a sample")


if __name__ == "__main__":
    main()
