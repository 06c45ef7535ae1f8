"""Replica groups on paper: the (backend, W) auto would pick on Perlmutter and Frontier at 64-2048
ranks, and its predicted step against W = P (MODEL OUTPUT, nothing measured).

For each shipped machine profile (``perlmutter``: 4 ranks a GPU node of 256 GB; ``frontier``: 8
ranks a node of 512 GB; published figures, see the profiles' ``source`` fields), each data set
and each batch size, :func:`mdloader_plugin.estimator.group_size.layout_from_mean` weighs every
valid ``W`` x backend exactly as ``mdloader estimate --group-size auto`` does (and as the Slurm
recipe comments quote): memory a rank ``ceil(N / W)`` mean records plus the index, the budget half
of the node's memory over its ranks, the fastest fitting candidate wins (ties within 2% to the
larger ``W``). The data sets:

- ``oc20-2m``: OC20-2M-sized, 2,000,000 slabs of ~70 KB +- 20 KB a record (~140 GB);
- ``molecules``: ANI-1x-sized, 5,000,000 molecules of ~4.7 KB +- 2.3 KB a record (~24 GB; the
  bench's HydraGNN-like records).

    python -m bench.groups.model        # ~1 s; bench/results/groups_model.json

``bench/report.py`` puts the table in ``bench/RESULTS.md``; ``docs/replica-groups.md`` quotes it.
"""

from __future__ import annotations

import json

from bench.harness import BENCH as HERE, record

RANKS = [64, 128, 256, 512, 1024, 2048]
BATCHES = [4, 32, 256]
PROFILES = ["perlmutter", "frontier"]
DATASETS = {"oc20-2m": (2_000_000, 70_000.0, 20_000.0),
            "molecules": (5_000_000, 4_700.0, 2_300.0)}  # samples, mean, std bytes a record
KIND = "MODEL OUTPUT (estimator cost models and shipped profiles; not measured)"


def model() -> dict:
    from mdloader_plugin.estimator import get_profile
    from mdloader_plugin.estimator.group_size import layout_from_mean

    rows = []
    for name in PROFILES:
        prof = get_profile(name)
        rpn = int(prof.provenance.get("ranks_per_node", 1))
        for ds, (n, mean, std) in DATASETS.items():
            for b in BATCHES:
                for p in RANKS:
                    dec = layout_from_mean(p, rpn, b, mean, std, n, prof)
                    best = next(c for c in dec.candidates if c.backend == dec.backend
                                and c.group_size == dec.group_size)
                    at_p = min((c for c in dec.candidates if c.group_size == p),
                               key=lambda c: c.predicted_s)
                    rows.append({"profile": name, "ranks_per_node": rpn, "dataset": ds,
                                 "num_samples": n, "mean_record_bytes": mean, "batch": b,
                                 "ranks": p, "backend": dec.backend, "group_size": dec.group_size,
                                 "predicted_s": best.predicted_s,
                                 "memory_per_rank": best.memory_bytes,
                                 "budget_per_rank": dec.budget,
                                 "full_backend": at_p.backend, "full_predicted_s": at_p.predicted_s,
                                 "full_memory_per_rank": at_p.memory_bytes,
                                 "speedup_vs_full": at_p.predicted_s / best.predicted_s,
                                 "reason": dec.reason})
    return {"kind": KIND, "datasets": {k: {"num_samples": v[0], "mean_record_bytes": v[1],
                                           "std_record_bytes": v[2]} for k, v in DATASETS.items()},
            "rows": rows}


def table(res: dict) -> list[str]:
    """Markdown: one row per (machine, data set, batch), one column per rank count; a cell is
    auto's (backend, W), its predicted ms a step and how much faster than the best W = P."""
    out = [f"**{res['kind']}**. Cell: auto's pick `backend W` (W = P: `all`), predicted ms a "
           "step (fetch), and the predicted speed-up over the best backend at W = P.", "",
           "| machine | data | batch | " + " | ".join(map(str, RANKS)) + " |",
           "|---|---|---:|" + "---|" * len(RANKS)]
    keys = sorted({(r["profile"], r["dataset"], r["batch"]) for r in res["rows"]},
                  key=lambda k: (PROFILES.index(k[0]), list(DATASETS).index(k[1]), k[2]))
    for prof, ds, b in keys:
        cells = []
        for p in RANKS:
            r = next(x for x in res["rows"] if (x["profile"], x["dataset"], x["batch"],
                                                x["ranks"]) == (prof, ds, b, p))
            w = "all" if r["group_size"] == p else str(r["group_size"])
            cells.append(f"{r['backend'][:4]} {w}: {r['predicted_s'] * 1e3:.2f} "
                         f"({r['speedup_vs_full']:.2f}x)")
        out.append(f"| {prof} | {ds} | {b} | " + " | ".join(cells) + " |")
    mem = {(r["profile"], r["dataset"]): r for r in res["rows"] if r["batch"] == 32
           and r["ranks"] == RANKS[-1]}
    out += ["", "Memory a rank of the pick at 2048 ranks, batch 32 (budget: half the node's "
            "memory over its ranks): " + "; ".join(
                f"{p} {d}: {r['memory_per_rank'] / 2**30:.2f} GiB of "
                f"{r['budget_per_rank'] / 2**30:.1f} GiB"
                for (p, d), r in sorted(mem.items())) + "."]
    return out


def main() -> None:
    res = model()
    res["record"] = record()
    out = HERE / "results" / "groups_model.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    print("\n".join(table(res)))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
