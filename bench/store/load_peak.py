"""Load peak: how far a rank's memory rises while ``ShardStore.from_file`` loads its block, over
the records + index that ``max_memory_per_rank`` counts.

For every (kind, graphs, ranks) cell a synthetic file (``mdloader synth --kind KIND``; written
once under ``--tmp``, reused when present) is loaded by ``mpiexec -n RANKS`` ranks. Each rank
first loads a 64-graph file of the same kind and closes it (imports, ADIOS2's engine, MPI's first
window and collectives: costs a process pays once, whatever the data's size), then resets its peak
resident size (``/proc/self/clear_refs`` = 5) just before ``from_file``, reads ``VmRSS`` before and
``VmHWM`` (the peak since the reset) and ``VmRSS`` after, and reports:

* ``peak_ratio``: (VmHWM - VmRSS before) / (records + index), the load peak over what the
  budget counts (the store's ``memory_report()``);
* ``steady_ratio``: (VmRSS after - VmRSS before) / (records + index), what stays;
* ``predicted_peak``: the load peak the budget check predicts (``store/budget.load_peak``),
  and whether the measured peak stayed under it.

The max over ranks is kept. The sizes of ``--held-out`` are run the same way but reported apart:
the factor the budget uses was not tuned on them.

    python -m bench.store.load_peak [--kinds hydragnn,oc20] [--graphs hydragnn=50000,200000:100000]
                              [--ranks 1,4] [--tmp /tmp/mdloader-load-peak] [--out JSON]

Worker (one rank of a cell): ``python -m mpi4py -m bench.store.load_peak --worker FILE``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from bench.harness import RESULTS, ROOT, mpiexec, module, record

OUT = RESULTS / "load_peak.json"
WARM = 64  # graphs of the warm-up file
TARGET = 1.3  # the load peak a rank may reach, over records + index
DEFAULT_GRAPHS = "hydragnn=50000,200000:100000;oc20=2000,8000:4000"


def _status(field: str) -> int:
    """A ``/proc/self/status`` size in bytes (``VmRSS``, ``VmHWM``)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def worker(path: str, chunk: int | None, warm: str | None) -> None:
    """One rank: load `warm` (a small file: the process's fixed costs), then `path`, measured;
    print the ranks' rows (rank 0 gathers)."""
    import gc

    from mdloader_plugin.mpi.world import World
    from mdloader_plugin.store.shard import ShardStore

    world = World.detect()
    kw = {} if chunk is None else {"load_chunk_bytes": chunk}
    if warm:
        ShardStore.from_file(world, warm, **kw).close()
    gc.collect()
    world.comm.Barrier()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    before = _status("VmRSS")
    t0 = time.perf_counter()
    store = ShardStore.from_file(world, path, **kw)
    load_s = time.perf_counter() - t0
    peak, after = _status("VmHWM"), _status("VmRSS")
    rep = store.memory_report()
    counted = rep["records_bytes"] + rep["index_bytes"]
    row = {"rank": world.rank, "records_bytes": rep["records_bytes"],
           "index_bytes": rep["index_bytes"], "growth_peak": peak - before,
           "growth_after": after - before, "peak_ratio": (peak - before) / counted,
           "steady_ratio": (after - before) / counted, "load_s": load_s,
           "predicted_peak": rep.get("load_peak_bytes")}
    rows = world.comm.gather(row, root=0)
    store.close()
    if world.rank == 0:
        print("ROWS " + json.dumps(rows), flush=True)


def machine() -> str:
    return (f"{platform.node()}, {os.cpu_count()} cores, "
            f"{platform.processor() or platform.machine()}"
            f", load average {os.getloadavg()[0]:.2f} at start")


def mpi_library() -> str:
    from mpi4py import MPI

    return MPI.Get_library_version().splitlines()[0].strip().rstrip("\x00")


def synth(tmp: Path, kind: str, n: int) -> Path:
    path = tmp / f"{kind}-{n}.bp"
    if not path.exists():
        subprocess.run([sys.executable, "-m", "mdloader_plugin", "synth", "--kind", kind,
                        "--num-graphs", str(n), "--out", str(path), "--quiet"], check=True,
                       cwd=ROOT)
    return path


def run_cell(path: Path, ranks: int, chunk: int | None, warm: Path) -> dict:
    args = [*module("bench.store.load_peak"), "--worker", path, "--warm", warm]
    args += [] if chunk is None else ["--chunk", chunk]
    out = mpiexec(ranks, args, timeout=1800, capture=True, check=False)
    line = [x for x in out.stdout.splitlines() if x.startswith("ROWS ")]
    if out.returncode or not line:
        raise SystemExit(f"{path} on {ranks} ranks failed (rc {out.returncode}):\n"
                         f"{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    rows = json.loads(line[0][5:])
    worst = max(rows, key=lambda r: r["peak_ratio"])
    return {"ranks": ranks, "records_bytes": worst["records_bytes"],
            "index_bytes": worst["index_bytes"], "growth_peak": worst["growth_peak"],
            "growth_after": max(r["growth_after"] for r in rows),
            "peak_ratio": round(worst["peak_ratio"], 3),
            "steady_ratio": round(max(r["steady_ratio"] for r in rows), 3),
            "predicted_peak": worst["predicted_peak"],
            "under_prediction": (None if worst["predicted_peak"] is None else
                                 all(r["growth_peak"] <= r["predicted_peak"] for r in rows)),
            "load_s": round(max(r["load_s"] for r in rows), 2)}


def parse_graphs(text: str) -> dict[str, tuple[list[int], list[int]]]:
    """``kind=a,b:c;kind2=...`` -> {kind: (measured sizes, held-out sizes)}."""
    out = {}
    for part in filter(None, text.split(";")):
        kind, _, sizes = part.partition("=")
        main, _, held = sizes.partition(":")
        out[kind] = ([int(x) for x in main.split(",") if x],
                     [int(x) for x in held.split(",") if x])
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--warm", help=argparse.SUPPRESS)
    ap.add_argument("--chunk", type=int, help="load chunk bytes (default: the store's)")
    ap.add_argument("--kinds", default="hydragnn,oc20")
    ap.add_argument("--graphs", default=DEFAULT_GRAPHS,
                    help="per kind: measured sizes, then held-out ones after ':'")
    ap.add_argument("--ranks", default="1,4")
    ap.add_argument("--tmp", default="/tmp/mdloader-load-peak")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--label", default="", help="a note kept in the JSON (e.g. 'before')")
    ap.add_argument("--before", action="append", default=[], metavar="JSON",
                    help="a run of the code before (same cells) kept beside this one")
    ap.add_argument("--rows-from", action="append", default=[], metavar="LOG",
                    help="take the rows from these logs of this script instead of running")
    a = ap.parse_args(argv)
    if a.worker:
        return worker(a.worker, a.chunk, a.warm)
    tmp = Path(a.tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    graphs = parse_graphs(a.graphs)
    t_start = time.time()
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t_start)),
            "machine": machine(), "mpi": mpi_library(), "target": TARGET, "label": a.label,
            "parameters": {"kinds": a.kinds, "graphs": a.graphs, "ranks": a.ranks,
                           "chunk": a.chunk}, "record": record(a)}
    rows = [json.loads(x) for log in a.rows_from for x in Path(log).read_text().splitlines()
            if x.startswith('{"kind"')]
    if rows:  # rows of earlier runs: the bound the budget uses now, from what they measured
        from mdloader_plugin.store import budget

        meta["bound"] = "recomputed from the rows' records and index with today's load_peak"
        for r in rows:
            r["predicted_peak"] = budget.load_peak(r["records_bytes"], r["index_bytes"],
                                                   -(-r["graphs"] // r["ranks"]))
            r["under_prediction"] = r["growth_peak"] <= r["predicted_peak"]
    for kind in ([] if a.rows_from else a.kinds.split(",")):
        sizes, held = graphs[kind]
        warm = synth(tmp, kind, WARM)
        for n in sizes + held:
            path = synth(tmp, kind, n)
            for p in (int(x) for x in a.ranks.split(",")):
                row = {"kind": kind, "graphs": n, "held_out": n in held,
                       **run_cell(path, p, a.chunk, warm)}
                print(json.dumps(row), flush=True)
                rows.append(row)
    meta["loadavg_end"] = os.getloadavg()[0]
    doc = {"meta": meta, "rows": rows}
    if a.before:
        runs = [json.loads(Path(b).read_text()) for b in a.before]
        doc["before"] = {"meta": runs[0]["meta"], "rows": [r for x in runs for r in x["rows"]]}
    Path(a.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {a.out}")


def table(data: dict) -> list[str]:
    """Markdown lines: the measured cells, then the held-out ones (with the code before's peak
    where a run of it is kept)."""
    out = []
    before = {(r["kind"], r["graphs"], r["ranks"]): r
              for r in data.get("before", {}).get("rows", [])}
    for held, title in ((False, "Measured"), (True, "Held out (not used to set the bound)")):
        rows = [r for r in data["rows"] if r["held_out"] == held]
        if not rows:
            continue
        out += [f"**{title}**", "", "| kind | graphs | ranks | records + index a rank | load "
                "peak | peak / (records + index) | before | after load / (records + index) | "
                "under the bound the budget uses | load s |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            counted = (r["records_bytes"] + r["index_bytes"]) / 2**20
            pred = {None: "–", True: "yes", False: "**no**"}[r["under_prediction"]]
            old = before.get((r["kind"], r["graphs"], r["ranks"]))
            out.append(f"| {r['kind']} | {r['graphs']:,} | {r['ranks']} | {counted:.1f} MiB | "
                       f"{r['growth_peak'] / 2**20:.1f} MiB | {r['peak_ratio']:.2f}x | "
                       f"{'–' if old is None else format(old['peak_ratio'], '.2f') + 'x'} | "
                       f"{r['steady_ratio']:.2f}x | {pred} | {r['load_s']} |")
        out.append("")
    worst = max(r["peak_ratio"] for r in data["rows"])
    met = "met" if worst <= data["meta"]["target"] else "**missed**"
    out.append(f"Target <= {data['meta']['target']}x: {met} (worst cell {worst:.2f}x). "
               f"{data['meta']['mpi']}; {data['meta']['machine']}; {data['meta']['date']}"
               + (f"; before: {data['before']['meta']['date']}" if before else "") + ".")
    return out


def _result() -> dict:
    return json.loads(OUT.read_text())


def worst(held_out: bool | None = None) -> float:
    """The largest peak / (records + index) over the cells (or the held-out ones only)."""
    return max(r["peak_ratio"] for r in _result()["rows"]
               if held_out is None or r["held_out"] == held_out)


#: the figures docs/how-it-works.md quotes (bench/figures.py merges them)
FIGURES_LOAD_PEAK = {
    "load_peak.table": lambda: "\n\n" + "\n".join(table(_result())) + "\n",
    "load_peak.date": lambda: _result()["meta"]["date"][:10],
    "load_peak.worst": lambda: f"{worst(False):.2f}x",
    "load_peak.worst_held_out": lambda: f"{worst(True):.2f}x",
    "load_peak.before": lambda: "–".join(f"{x:.1f}x" for x in (
        min(r["peak_ratio"] for r in _result()["before"]["rows"]),
        max(r["peak_ratio"] for r in _result()["before"]["rows"]))),
}


if __name__ == "__main__":
    main()
