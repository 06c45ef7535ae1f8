"""Replica groups on the emulated cluster: every group size x backend, and auto, step by step.

For each link rate and shape (``H`` hosts x ``R`` ranks, network namespaces, real Open MPI over
TCP, ``tc tbf`` rate limit: ``mdloader cluster``), one MPI job (``--worker``) loads the data set
with every valid group size ``W`` (``ShardStore.from_file(..., group_size=W)``), serves ``steps``
batches with each backend through a real :class:`MDLoader` (no prefetch, so the trainer's thread
does every fetch and a step's time is its own; a Barrier after each step, untimed, stands for
the trainer's gradient allreduce, which starts every rank's step together: without it ranks
drift apart and, 4-6 ranks on 2 cores, the slowest rank's step picked up whole scheduler time
slices, 1 ms or 10-19 ms by turns around a 0.2 ms fetch) and records, per (W, backend): the
median over
steps of the slowest rank's fetch and whole step (fetch + batch), the slowest rank's step
series (``step_s``: what the tie-aware score tests), the bytes a step that crossed a
host (summed over ranks, counted in the backends) and the store's memory a rank. Then ``auto``
runs as users run it: ``open_store(group_size="auto")`` (budget: half the node's free memory
over its ranks) and ``backend="auto"`` (model + online trial, run for epochs until the trial has
decided: ``AUTO_EPOCHS``), and its (backend, W) and step are set against the fastest measured
row. Auto's profile is the one ``mdloader calibrate`` wrote on that cluster
(``results/profile-SHAPE-RATE-node.json``, :func:`_profile`), as a user would calibrate first.

Development and held-out grids: the issue's grid (2x2 and 4x1 at 200mbit and 1gbit) is the one
the estimator was developed on; ``--out groups_heldout.json`` with other shapes and rates
(e.g. ``--shapes 3x2,4x1 --rates 300mbit,500mbit``) scores it on clusters it never saw, reported
apart in ``RESULTS.md``.

Epochs are exactly ``steps`` long (``N = P * B * steps``), so no iteration is abandoned.
The machine is shared (2 cores, several users): figures are contaminated by others' load.

    python -m bench.groups.cluster [--rates 200mbit] [--shapes 2x2] [--kinds oc20] [--batches 32]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
# score: re-exported (tests/integration/test_bench_groups.py scores runs through this module)
from bench.groups.score import (LOCAL, _fitting, _key, _medians, compare,  # noqa: F401
                                 loading_table, score, scores, summary, summary_text, table)
from bench.ties import WITHIN

from bench.harness import RESULTS, ROOT, module, mpiexec
from bench.harness import record as harness_record

MODULE = "bench.groups.cluster"


BACKENDS = ("onesided", "collective")
NEAR = 0.15  # a configuration within 15% of the best median is a contender for more rounds
#: Open MPI's TCP BTL drops a connection that arrives before the peer's addresses did (its modex;
#: open-mpi/ompi#3035); once (2026-12-05, 2x2@1gbit) a one-sided fetch then waited forever
TCP_RACE = "from an IP address that is\nunexpected"
FETCH_TIMEOUT = 180  # s: a step here takes at most ~2 s; a hung fetch fails in 3 minutes, not 10


def worker(path: str, batch: int, steps: int, profile: str | None, rounds: int = 4,
           max_rounds: int = 12, budget_s: float = 150.0) -> None:
    """`rounds` interleaved rounds of every (W, backend), auto (unconstrained and under a budget
    that excludes W = 1), then more interleaved rounds of the :func:`contenders` while the score
    is unresolved, up to `max_rounds` and `budget_s` seconds of the whole job."""
    from mpi4py import MPI

    from mdloader_plugin.store import budget as mem
    from mdloader_plugin.mpi import groups
    from mdloader_plugin.loader.loader import MDLoader
    from mdloader_plugin.loader.open import choose_group_size
    from mdloader_plugin.store.shard import ShardStore
    from mdloader_plugin.mpi.world import World, abort_on_error

    world = World.detect()
    t0 = time.perf_counter()
    rows = []

    def one_round(rnd: int, keys: set) -> None:  # interleaved: each of `keys` once
        sizes = sorted({w for w, _ in keys})
        for w in (sizes if rnd % 2 == 0 else sizes[::-1]):
            store = ShardStore.from_file(world, path, group_size=w)
            order = BACKENDS if (rnd // 2) % 2 == 0 else BACKENDS[::-1]
            for backend in (b for b in order if (w, b) in keys):
                rows.append({**_measure(world, store, backend, batch, steps, w, MDLoader,
                                        MPI, mem), "round": rnd})
            store.close()

    with abort_on_error(world.comm):
        sizes = groups.valid_sizes(world.node_of)
        every = {(w, b) for w in sizes for b in BACKENDS}
        for rnd in range(rounds):
            one_round(rnd, every)
        # auto as open_store(group_size="auto") runs it, keeping the decision's predictions
        dec = choose_group_size(world, path, "trainset", None, batch, "auto", profile, None)
        store = ShardStore.from_file(world, path, group_size=dec.group_size)
        row = _measure(world, store, "auto", batch, steps, store.group.size, MDLoader, MPI, mem,
                       profile)
        row["predicted"] = [{"backend": c.backend, "group_size": c.group_size,
                             "predicted_s": c.predicted_s, "fits": c.fits}
                            for c in dec.candidates]
        row["layout_backend"] = dec.backend
        autos = [row]
        store.close()
        # auto under a budget W = 1 does not fit (each rank 1.2x the W = 2 store): the choice
        # among the groups that need communication
        tight = [c for c in dec.candidates if c.group_size == 2]
        if tight and 1 in sizes:
            budget = int(tight[0].memory_bytes * 1.2)
            dec = choose_group_size(world, path, "trainset", None, batch, "auto", profile,
                                    budget)
            store = ShardStore.from_file(world, path, group_size=dec.group_size)
            row = _measure(world, store, "auto", batch, steps, store.group.size, MDLoader, MPI,
                           mem, profile)
            row.update(budget=budget, layout_backend=dec.backend, predicted=[
                {"backend": c.backend, "group_size": c.group_size,
                 "predicted_s": c.predicted_s, "fits": c.fits} for c in dec.candidates])
            autos.append(row)
            store.close()
        rnd = rounds
        while rnd < max_rounds:  # sequential: more rounds only while the score is unresolved
            late = time.perf_counter() - t0 >= budget_s
            keys = sorted(contenders(rows, autos)) if world.rank == 0 and not late else []
            keys = world.comm.bcast(keys, root=0)  # rank 0's clock and test decide for all
            if not keys:
                break
            one_round(rnd, {(w, b) for k in keys for w, b in _unpool(k)})
            rnd += 1
    if world.rank == 0:
        print("ROWS " + json.dumps(rows + autos), flush=True)


def _unpool(key: tuple) -> list[tuple]:
    return [(1, b) for b in BACKENDS] if key[1] == LOCAL else [key]


def contenders(rows: list[dict], autos: list[dict], near: float = NEAR) -> set:
    """The (W, backend) keys (W = 1 pooled) worth another interleaved round, or none: for each of
    auto's picks, while the best fitting configuration is not resolved (:func:`compare`, more than
    ``WITHIN`` apart) from the runner-up or from the pick, every fitting configuration within
    `near` of the best median, and the pick, whatever its median."""
    need: set = set()
    for auto in autos:
        fit = _fitting(rows, auto)
        med = _medians(fit)
        ranked = sorted(med, key=med.get)
        pick = _key(auto["group_size"], auto["chosen"])
        best = ranked[0]
        others = [k for k in {ranked[1] if len(ranked) > 1 else None, pick} if k and k != best
                  and k in med]
        if any(med[k] > med[best] * (1 + WITHIN) and compare(fit, best, k)["winner"] is None
               for k in others):
            need |= {k for k in ranked if med[k] <= med[best] * (1 + near)}
            need |= {pick} & set(med)
    return need


AUTO_EPOCHS = 8  # auto runs up to this many epochs, until its online trial has decided


def _measure(world, store, backend, batch, steps, w, MDLoader, MPI, mem, profile=None) -> dict:
    """One loader, one epoch (`steps` steps); ``auto`` runs epochs until its online trial has
    decided (a probe round is 2 x 6 steps: one 8-step epoch left the model's pick unchecked),
    at most ``AUTO_EPOCHS``; its row's step median is its last epoch's."""
    loader = MDLoader(store, batch_size=batch, backend=backend, prefetch=0, collate=len,
                      name=f"W{w}-{backend}", profile=profile)
    model = loader.decision["backend"]
    step_s, fetch, last = [], [], 0
    for epoch in range(AUTO_EPOCHS if backend == "auto" else 1):
        loader.set_epoch(epoch)
        last = len(step_s)
        it = iter(loader)
        for _ in range(len(loader)):
            t0 = time.perf_counter()
            next(it)
            step_s.append(time.perf_counter() - t0)
            world.comm.Barrier()  # the trainer's gradient allreduce: ranks start steps together
        fetch += list(loader.epoch_stats.step_fetch_s)
        online = getattr(loader, "_online", None)
        if online is None or online.trial.result is not None:
            break
    fetch = _max(world, np.array(fetch), MPI)
    step = _max(world, np.array(step_s), MPI)
    traffic = loader.traffic()
    crossed = world.comm.allreduce(traffic["off_node"])
    chosen = loader.decision["backend"] if backend == "auto" else loader.backend_name
    decided = getattr(loader, "_online", None) is None or loader._online.trial.result is not None
    loader.close()
    memory = world.comm.allreduce(store.buffer.nbytes + mem.index_bytes(store.num_samples),
                                  op=MPI.MAX)
    row = {"group_size": w, "backend": backend, "chosen": chosen, "steps": int(fetch.size),
           "fetch_median_s": float(np.median(fetch[last:])),
           "step_median_s": float(np.median(step[last:])), "step_s": [float(t) for t in step],
           "fetch_s": [float(t) for t in fetch],
           "crossed_bytes_per_step": crossed / max(1, fetch.size), "memory_per_rank": memory}
    if backend == "auto":
        row.update(model_backend=model, online_decided=bool(decided))
    return row


def loading_worker(path: str, w: int, rounds: int) -> None:
    """Load the store with group size `w` both ways (``replicate`` read / copy), `rounds`
    interleaved rounds; the slowest rank's load time each, and the bytes read from the file."""
    from mpi4py import MPI

    from mdloader_plugin.store.shard import ShardStore
    from mdloader_plugin.mpi.world import World, abort_on_error

    world = World.detect()
    rows = []
    with abort_on_error(world.comm):
        ShardStore.from_file(world, path, group_size=w, replicate="read").close()  # warm-up
        for rnd in range(rounds):
            for mode in (("read", "copy") if rnd % 2 == 0 else ("copy", "read")):
                world.comm.Barrier()
                t0 = time.perf_counter()
                store = ShardStore.from_file(world, path, group_size=w, replicate=mode)
                world.comm.Barrier()
                dt = world.comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
                rows.append({"round": rnd, "mode": store.meta["replicate"], "load_s": dt,
                             "bytes_read": store.meta["bytes_read_all_ranks"],
                             "dataset_bytes": int(store.nbytes.sum())})
                store.close()
    if world.rank == 0:
        print("ROWS " + json.dumps(rows), flush=True)


def drive_loading(args) -> None:
    """Read-once-and-copy against every group reading: on the emulated cluster (each of
    `args.shapes` at each of `args.rates`) and on this one host (``local``, plain mpiexec)."""
    from mdloader_plugin.devtools.cluster import Cluster

    out_path = RESULTS / "groups_loading.json"
    out = json.loads(out_path.read_text()) if out_path.exists() else {
        "note": "Emulated cluster on a shared 2-core machine: contaminated by others' load; the "
                "file is in the page cache (a file rate far above a parallel file system's)",
        "runs": []}
    work = Path(os.environ.get("TMPDIR", "/tmp")) / "bench-groups-loading"
    work.mkdir(parents=True, exist_ok=True)
    data = work / f"oc20-{args.graphs}.bp"
    if not data.exists():
        subprocess.run([sys.executable, "-m", "mdloader_plugin", "synth", "--kind", "oc20",
                        "--num-graphs", str(args.graphs), "--out", str(data), "--quiet"],
                       check=True, timeout=1800)
    cmd = [sys.executable, "-m", "mpi4py", *module(MODULE), "--loading-worker", str(data),
           str(args.group), str(args.rounds)]

    def record(where, rate, res):
        if res.returncode:
            raise SystemExit(f"bench/groups --loading: {where}@{rate} failed:\n"
                             f"{res.stderr[-2000:]}")
        rows = json.loads(next(ln[5:] for ln in res.stdout.splitlines()
                               if ln.startswith("ROWS ")))
        run = {"shape": where, "rate": rate, "group_size": args.group, "rows": rows,
               "warmup": True,
               "loadavg": os.getloadavg(), "date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                  time.gmtime())}
        out["runs"] = [r for r in out["runs"] if (r["shape"], r["rate"]) != (where, rate)] + [run]
        print(loading_table([run]), flush=True)

    for shape in [s for s in args.shapes.split(",") if s != "local"]:
        hosts, rph = (int(x) for x in shape.split("x"))
        with Cluster.up(hosts=hosts, ranks_per_host=rph, rate=args.rates.split(",")[0],
                        name=f"bl{os.getpid() % 10000:04d}") as cl:
            for rate in args.rates.split(","):
                cl.set_rate(rate)
                record(shape, rate, cl.run(cmd, timeout=1200,
                                           capture_output=True, text=True, cwd=ROOT,
                                           env={"PYTHONUNBUFFERED": "1"}))
    if "local" in args.shapes.split(","):
        record("1x4", "one host", mpiexec(4, cmd[3:], timeout=1200, capture=True, check=False))
    out_path.write_text(json.dumps({**out, "record": harness_record(args)}, indent=1))
    print(f"wrote {out_path}")


def _max(world, arr, MPI):
    out = np.empty_like(arr)
    world.comm.Allreduce(arr, out, op=MPI.MAX)
    return out


def drive(args) -> None:
    from mdloader_plugin.devtools.cluster import Cluster

    RESULTS.mkdir(parents=True, exist_ok=True)
    out_path = RESULTS / args.out
    out = json.loads(out_path.read_text()) if out_path.exists() and args.merge else {
        "note": "Emulated cluster on a shared 2-core machine: contaminated by others' load",
        "runs": []}
    work = Path(os.environ.get("TMPDIR", "/tmp")) / "bench-groups-data"  # kept between runs
    work.mkdir(parents=True, exist_ok=True)
    for shape in args.shapes.split(","):
        hosts, rph = (int(x) for x in shape.split("x"))
        p = hosts * rph
        for rate in args.rates.split(","):
            prof = _profile(shape, rate)
            with Cluster.up(hosts=hosts, ranks_per_host=rph, rate=rate,
                            name=f"bg{os.getpid() % 10000:04d}") as cl:
                for kind in args.kinds.split(","):
                    for batch in (int(b) for b in args.batches.split(",")):
                        data = work / f"{kind}-{p * batch * args.steps}.bp"
                        if not data.exists():
                            subprocess.run([sys.executable, "-m", "mdloader_plugin", "synth",
                                            "--kind", kind, "--num-graphs",
                                            str(p * batch * args.steps), "--out", str(data),
                                            "--quiet"], check=True, timeout=1800)
                        t0 = time.perf_counter()
                        for attempt in (1, 2):  # once more after Open MPI's TCP start-up race
                            res = cl.run([sys.executable, "-m", "mpi4py", *module(MODULE),
                                "--worker",
                                          str(data), str(batch), str(args.steps), prof,
                                          str(args.rounds), str(args.max_rounds),
                                          str(args.config_budget)],
                                         timeout=1800,
                                         capture_output=True, text=True, cwd=ROOT,
                                         env={"PYTHONUNBUFFERED": "1",
                                              "MDLOADER_FETCH_TIMEOUT": str(FETCH_TIMEOUT)})
                            if not (res.returncode and TCP_RACE in res.stderr):
                                break
                            print(f"bench/groups: {shape}@{rate} {kind} B={batch}: Open MPI "
                                  "dropped a TCP connection whose peer it did not know yet "
                                  "(a start-up race); running it again", flush=True)
                        if res.returncode:
                            raise SystemExit(f"bench/groups: {shape}@{rate} {kind} B={batch} "
                                             f"failed:\n{res.stderr[-2000:]}")
                        rows = json.loads(next(ln[5:] for ln in res.stdout.splitlines()
                                               if ln.startswith("ROWS ")))
                        run = {"shape": shape, "rate": rate, "kind": kind, "batch": batch,
                               "profile": Path(prof).name, "rows": rows, "rounds": args.rounds,
                               "max_rounds": args.max_rounds,
                               "config_budget_s": args.config_budget,
                               "rounds_done": 1 + max(r.get("round", 0) for r in rows),
                               "steps": args.steps, "wall_s": time.perf_counter() - t0,
                               "loadavg": os.getloadavg(),
                               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
                        run["score"] = scores(run)
                        run["table"] = table(run)  # bench/report.py puts it in RESULTS.md
                        key = (shape, rate, kind, batch)
                        out["runs"] = [r for r in out["runs"] if (r["shape"], r["rate"],
                                                                  r["kind"], r["batch"]) != key]
                        out["runs"].append(run)
                        out_path.write_text(json.dumps({**out, "record": harness_record(args)},
                                                       indent=1))
                        print(table(run), flush=True)
    out["summary"] = summary(out["runs"])
    out_path.write_text(json.dumps({**out, "record": harness_record(args)}, indent=1))
    print(summary_text(out["summary"]))
    print(f"wrote {out_path}")


def _profile(shape: str, rate: str) -> str:
    """The profile a user would have calibrated on this cluster: one written by the current
    ``mdloader calibrate`` (with its per-node stage, ``profile-SHAPE-RATE-node.json``), else
    ``bench/estimator/backend_choice.py``'s per-shape ones, else
    ``bench/estimator/cluster.py``'s 2-host ones, else ``local``."""
    for name in (f"profile-{shape}-{rate}-node.json", f"profile-{shape}-{rate}.json",
                 f"profile-cluster-{rate}.json" if shape == "2x2" else None):
        if name and (RESULTS / name).exists():
            return str(RESULTS / name)
    return "local"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6]),
               int(sys.argv[7]), float(sys.argv[8]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--loading-worker":
        loading_worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="200mbit")
    ap.add_argument("--shapes", default="2x2")
    ap.add_argument("--kinds", default="oc20")
    ap.add_argument("--batches", default="32")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--loading", action="store_true",
                    help="time read-once-and-copy against every group reading the file "
                         "(--shapes may include local: 4 ranks on this host)")
    ap.add_argument("--graphs", type=int, default=2048, help="--loading: OC20-like graphs")
    ap.add_argument("--group", type=int, default=2, help="--loading: the group size W")
    ap.add_argument("--rounds", type=int, default=4,
                    help="interleaved rounds of every (W, backend), at least")
    ap.add_argument("--max-rounds", type=int, default=12,
                    help="more rounds of the contenders while the score is unresolved, up to")
    ap.add_argument("--config-budget", type=float, default=150.0,
                    help="no new round for a configuration after this many seconds")
    ap.add_argument("--merge", action="store_true",
                    help="keep the other configurations already in results/OUT")
    ap.add_argument("--out", default="groups.json",
                    help="results file under bench/results (groups_heldout.json: clusters the "
                         "estimator was not developed on)")
    args = ap.parse_args()
    drive_loading(args) if args.loading else drive(args)


if __name__ == "__main__":
    main()
