"""Data-set scale (issue 19): per-rank bytes of index + order, epoch start and load, before/after.

A synthetic data set of tiny records (``x [n, 1]`` float32 with n in 1..4 and ``y [1]`` float64
holding the sample id: 64-72 byte codec records) is written once to ``--tmp`` (default
``/tmp/mdloader-scale``: record sizes and bytes, reused when present) and loaded on ``--ranks``
ranks (each rank reads its block into its window and builds the index). Per configuration:

* ``before``: the full index (int64 offset + length, 16 B a sample, exchanged by Allgatherv) and
  the pre-#19 sampler's epoch table (``torch.randperm`` as int64, padded, dealt into a
  ``[P, N/P]`` int64 table kept for the epoch: 8 B a sample; reproduced below as
  :func:`legacy_epoch_table`, the code the sampler ran before the order module);
* ``torch``: compact index, DistributedSampler-equal order kept as an int32 list (4 B a sample);
* ``after``: compact index and the feistel order (the default above 4M samples);
* ``after-shared``: the same with one index copy a node (``index_share="node"``).

Measured on every rank, reported as the max over ranks: ``index_bytes`` and ``order_bytes``
(array bytes of this rank's share), ``epoch_start_s`` (first plan of a new epoch),
``load_s`` (read the block + build the store and index), and ``rss_mib``. Every configuration's
index is checked against the full index on 100k random ids, and the first plans of ``torch``
against ``before`` (equal). Then a table extrapolated with the formulas of ``docs/scale.md`` to
N = 1e8 and 1e9 at P = 2048 (EXTRAPOLATED, not measured; feistel plan cost at that size is
measured on one process, as it needs no list).

    python -m bench.scale.dataset [--samples 20000000] [--ranks 4] [--tmp DIR] [--out JSON]

Writes ``bench/results/dataset_scale.json`` and ``dataset_scale.md``. Times on the shared 2-core
machine are contaminated by other users' load.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from bench.harness import BENCH as HERE, mpiexec, module, record
CONFIGS = {"before": ("full", "rank", "legacy"), "torch": ("compact", "rank", "torch"),
           "after": ("compact", "rank", "feistel"),
           "after-shared": ("compact", "node", "feistel")}
BATCH = 32


# -- the data set (written once) --------------------------------------------------------------
def dataset(tmp: Path, n: int) -> tuple[Path, Path]:
    """``sizes.npy`` (uint8 atoms a record) and ``records.bin`` (all records end to end)."""
    from mdloader_plugin.records import codec

    tmp.mkdir(parents=True, exist_ok=True)
    sizes_p, rec_p = tmp / f"atoms_{n}.npy", tmp / f"records_{n}.bin"
    if sizes_p.exists() and rec_p.exists():
        return sizes_p, rec_p
    atoms = np.random.default_rng(0).integers(1, 5, n).astype(np.uint8)
    lens = {a: codec.record_size(_sample(a, 0)) for a in range(1, 5)}
    with open(f"{rec_p}.part", "wb") as f:
        for lo in range(0, n, 1 << 20):
            f.write(encode_records(atoms[lo:lo + (1 << 20)], lo, lens).tobytes())
    os.replace(f"{rec_p}.part", rec_p)
    np.save(sizes_p, atoms)
    return sizes_p, rec_p


def _sample(atoms: int, sid: int) -> dict:
    return {"x": np.full((atoms, 1), atoms, np.float32), "y": np.array([sid], np.float64)}


def encode_records(atoms: np.ndarray, first_id: int, lens: dict) -> np.ndarray:
    """Records of samples ``first_id ..`` end to end, built from one template a size (the id
    patched into ``y``'s payload): vectorised, ~50 ns a record."""
    from mdloader_plugin.records import codec

    sizes = np.array([0] + [lens[a] for a in range(1, 5)])[atoms]
    offs = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    out = np.empty(int(sizes.sum()), np.uint8)
    for a in range(1, 5):
        sel = np.flatnonzero(atoms == a)
        tpl = np.frombuffer(codec.encode(_sample(a, 0)), np.uint8)
        rows = np.tile(tpl, (sel.size, 1))
        rows[:, tpl.size - 8:] = (sel + first_id).astype(np.float64).view(np.uint8).reshape(-1, 8)
        out[(offs[sel][:, None] + np.arange(tpl.size)).ravel()] = rows.ravel()
    return out


# -- worker (under mpiexec) ---------------------------------------------------------------------
def legacy_epoch_table(n: int, p: int, seed: int, epoch: int) -> np.ndarray:
    """The pre-#19 sampler's epoch table (DistributedSampler's order, int64, [P, N/P])."""
    import torch

    g = torch.Generator()
    g.manual_seed(seed + epoch)
    order = torch.randperm(n, generator=g).numpy().astype(np.int64, copy=False)
    per_rank = -(-n // p)
    total = per_rank * p
    if total > n:
        order = np.concatenate([order, order[:total - n]])
    return np.ascontiguousarray(order.reshape(per_rank, p).T)


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def load(world, n: int, sizes_p: Path, rec_p: Path, index: str, share: str):
    from mdloader_plugin.records import codec
    from mdloader_plugin.core.blocks import block_bounds
    from mdloader_plugin.store.shard import ShardStore

    lo, hi = (int(x) for x in block_bounds(n, world.size)[world.rank:world.rank + 2])
    atoms = np.load(sizes_p, mmap_mode="r")
    lens = np.array([0] + [codec.record_size(_sample(a, 0)) for a in range(1, 5)])
    start = int(sum(int(lens[atoms[i:min(i + (1 << 22), lo)]].sum())
                    for i in range(0, lo, 1 << 22)))
    sizes = lens[atoms[lo:hi]]

    def fill(buf, offs):
        with open(rec_p, "rb") as f:
            f.seek(start)
            f.readinto(memoryview(buf))

    return ShardStore.from_records(world, sizes, fill, n, index=index, index_share=share)


def measure(world, n, sizes_p, rec_p, name, ref=None) -> dict:
    from mdloader_plugin.sampling.reference import ReferenceSchedule as GlobalSampler

    index, share, order = CONFIGS[name]
    world.comm.Barrier()
    t0 = time.perf_counter()
    store = load(world, n, sizes_p, rec_p, index, share)
    load_s = time.perf_counter() - t0
    ids = np.random.default_rng(world.rank).integers(0, n, 100_000)
    got = (store.offsets[ids], store.nbytes[ids], store.owner_of(ids))
    world.comm.Barrier()
    t0 = time.perf_counter()
    if order == "legacy":
        table = legacy_epoch_table(n, world.size, 0, 1)
        plan, order_bytes = table[:, :BATCH], table.nbytes
    else:
        s = GlobalSampler(n, world.size, BATCH, seed=0, order=order)
        plan, order_bytes = s.plan(1, 0), s.order_bytes
    start_s = time.perf_counter() - t0
    rep = store.memory_report()
    code = getattr(store.index, "codes", None)
    row = {"config": name, "index": rep["index_kind"], "order": order, "samples": n,
           "code_bytes": 0 if code is None else code.dtype.itemsize,
           "local_size": world.local_size,
           "ranks": world.size, "records_bytes": rep["records_bytes"],
           "index_bytes": rep["index_bytes"], "order_bytes": int(order_bytes),
           "epoch_start_s": start_s, "load_s": load_s, "rss_mib": _rss_mib(),
           "first_plan": plan[:, :4].tolist()}
    del plan
    store.close()
    if order == "legacy":
        del table
    return row, got


def worker(a) -> None:
    from mdloader_plugin.mpi.world import World

    import torch  # noqa: F401 - imported before any timing (the legacy table needs it)

    world = World.detect()
    sizes_p, rec_p = Path(a.sizes), Path(a.records)
    rows, ref = [], None  # ref: the full index's answers (the first config)
    for name in CONFIGS:
        row, got = measure(world, a.samples, sizes_p, rec_p, name)
        ref = ref or got
        row["index_equal_full"] = all(np.array_equal(x, y) for x, y in zip(got, ref))
        per = world.comm.gather(row)
        if world.rank == 0:
            merged = dict(per[0])
            for k in ("index_bytes", "order_bytes", "epoch_start_s", "load_s", "rss_mib",
                      "records_bytes"):
                merged[k] = max(r[k] for r in per)
            merged["index_equal_full"] = all(r["index_equal_full"] for r in per)
            merged["records_bytes_total"] = sum(r["records_bytes"] for r in per)
            rows.append(merged)
            print(f"  {name:13s} index {merged['index_bytes'] / a.samples:6.3f} B/sample, order "
                  f"{merged['order_bytes'] / a.samples:6.3f} B/sample, epoch start "
                  f"{merged['epoch_start_s']:7.3f} s, load {merged['load_s']:6.2f} s", flush=True)
    if world.rank == 0:
        Path(a.out).write_text(json.dumps({"rows": rows}, indent=1))
    world.close()


# -- driver -------------------------------------------------------------------------------------
def formula(r: dict, n: int, p: int, rpn: int) -> dict:
    """Per-rank bytes of `r`'s configuration at N = `n`, P = `p`, `rpn` ranks a node: the
    formulas of docs/scale.md (``r`` gives the code width and the mean record)."""
    from mdloader_plugin.store.index import default_every
    from mdloader_plugin.sampling.order import ROUNDS, TorchOrder
    from mdloader_plugin.sampling.reference import PLAN_POSITIONS

    small = 16 * (p + 1)  # block starts (+ their cum, compact)
    if r["index"].startswith("full"):
        index = 16 * n + 8 * (p + 1)
    else:
        arrays = r["code_bytes"] * n + 8 * -(-n // default_every(n))
        index = arrays / (rpn if "one copy per node" in r["index"] else 1) + small
    run = p * BATCH * max(1, PLAN_POSITIONS // (p * BATCH))  # ids of the plans kept
    run = min(run, p * -(-n // p))
    order = {"legacy": 8 * p * -(-n // p), "torch": TorchOrder.bytes_for(n) + 8 * run,
             "feistel": ROUNDS * 8 + 8 * run}[r["order"]]
    mean = r["records_bytes_total"] / r["samples"]
    return {"index": index, "order": order, "records": mean * n / p}


def extrapolate(rows: list[dict], feistel_plan_s: float) -> list[dict]:
    """Per-rank bytes at P = 2048 by :func:`formula` (8 ranks a node for the shared index);
    epoch start of a list order scaled linearly in N, feistel's one measured step."""
    out = []
    for n in (10**8, 10**9):
        for r in rows:
            f = formula(r, n, 2048, 8)
            lists = r["order"] in ("legacy", "torch")
            out.append({"config": r["config"], "samples": n, "ranks": 2048, "ranks_per_node": 8,
                        "index_gib": f["index"] / 2**30, "order_gib": f["order"] / 2**30,
                        "records_gib": f["records"] / 2**30,
                        "epoch_start_s": r["epoch_start_s"] * n / r["samples"] if lists
                        else feistel_plan_s})
    return out


def feistel_plan_seconds(n: int = 10**9, p: int = 2048, b: int = BATCH) -> float:
    """One step's plan at N = 1e9, P = 2048 (every rank computes all ranks' ids): measured."""
    from mdloader_plugin.sampling.reference import ReferenceSchedule as GlobalSampler

    s = GlobalSampler(n, p, b, order="feistel")
    t0 = time.perf_counter()
    s.plan(1, 0)
    return time.perf_counter() - t0


def markdown(res: dict) -> str:
    n = res["rows"][0]["samples"]
    lines = [f"Measured: N = {n:,} tiny records on {res['rows'][0]['ranks']} ranks of one 2-core "
             "machine shared with other users (times are contaminated by their load). Bytes are "
             "this rank's array bytes, max over ranks; B/sample = bytes / N.", "",
             "| config | index | order | index B/sample | order B/sample | index + order "
             "B/sample | formula B/sample | epoch start s | load s | index = full |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in res["rows"]:
        i, o = r["index_bytes"] / n, r["order_bytes"] / n
        f = formula(r, n, r["ranks"], r["local_size"])
        lines.append(f"| {r['config']} | {r['index']} | {r['order']} | {i:.3f} | {o:.3f} | "
                     f"{i + o:.3f} | {(f['index'] + f['order']) / n:.3f} | "
                     f"{r['epoch_start_s']:.3f} | {r['load_s']:.2f} | {r['index_equal_full']} |")
    lines += ["", "EXTRAPOLATED (formulas of docs/scale.md from the per-sample figures above; "
              "not measured), P = 2048; `after-shared` with 8 ranks a node; records for these "
              "tiny records (for molecules, ~5 KB a record, multiply by ~70); feistel epoch "
              "start = one step's plan at N = 1e9, P = 2048, "
              f"B = {BATCH}, measured on one process:", "",
              "| N | config | index GiB/rank | order GiB/rank | records GiB/rank | "
              "epoch start s |", "|---:|---|---:|---:|---:|---:|"]
    for e in res["extrapolated"]:
        lines.append(f"| {e['samples']:.0e} | {e['config']} | {e['index_gib']:.3f} | "
                     f"{e['order_gib']:.3f} | {e['records_gib']:.3f} | "
                     f"{e['epoch_start_s']:.3g} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=20_000_000)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--tmp", default="/tmp/mdloader-scale")
    ap.add_argument("--out", default=str(HERE / "results" / "dataset_scale.json"))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--sizes", help=argparse.SUPPRESS)
    ap.add_argument("--records", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    t0 = time.perf_counter()
    sizes_p, rec_p = dataset(Path(a.tmp), a.samples)
    print(f"data set: {rec_p} ({rec_p.stat().st_size / 2**20:.0f} MiB, "
          f"{time.perf_counter() - t0:.1f} s)", flush=True)
    tmp_out = Path(a.out).with_suffix(".rows.json")
    mpiexec(a.ranks, [*module("bench.scale.dataset"), "--worker", "--samples", a.samples,
                      "--sizes", sizes_p, "--records", rec_p, "--out", tmp_out], timeout=3600)
    res = json.loads(tmp_out.read_text())
    tmp_out.unlink()
    plans = {r["config"]: r.pop("first_plan") for r in res["rows"]}
    res["torch_plan_equals_before"] = plans["torch"] == plans["before"]
    res["feistel_plan_1e9_p2048_s"] = feistel_plan_seconds()
    res["extrapolated"] = extrapolate(res["rows"], res["feistel_plan_1e9_p2048_s"])
    res["date"] = time.strftime("%F %H:%M UTC", time.gmtime())
    res["record"] = record(a)
    Path(a.out).write_text(json.dumps(res, indent=1))
    Path(a.out).with_suffix(".md").write_text(markdown(res))
    print(markdown(res))


if __name__ == "__main__":
    main()
