"""The section of ``bench/RESULTS.md`` about the conversion rate of ``mdloader convert``, and the
figures the docs quote from ``bench/results/convert_rate.json``."""

from __future__ import annotations

import json

from bench.harness import BENCH as HERE
from bench.reporting import Section


def section(d: dict) -> list[str]:
    res = d["convert_rate.json"]
    m, par = res["machine"], res["parameters"]
    lines = [f"OC20-like structures ({par['atoms']} atoms, periodic, radius graph "
             f"{par['radius']:g} A, <= {par['max_neighbours']} neighbours) in `.aselmdb` shards, "
             f"converted by `mdloader convert` with 1 writer (one file) or 2 (`--writers 2`, "
             f"two files read as one) on `{m['host']}` ({m['cpu']}, {m['cores']} cores shared "
             f"with other jobs; load average {m['loadavg_start'][0]} at start, "
             f"{m['loadavg_end'][0]} at end), {m['mpi']}; best of {par['repeats']} interleaved "
             "rounds. Two sets: the one developed on (512 structures, 16 shards: parts of 8 "
             "structures on 4 ranks) and a larger one held out "
             f"({par['structures']:,} structures, {par['shards']} shards)."]
    held = res.get("held_out") or {}
    for title, rows, e in ((f"{par['structures']:,} structures (held out)", res["rows"],
                            res["expected"]),
                           (f"{held.get('structures', 0):,} structures (developed on)",
                            held.get("rows") or [], held.get("expected"))):
        if rows:
            lines += ["", f"**{title}**", ""] + _table(rows) + ["", _expected_text(e)]
    lines += ["", "Writers assemble their files while the other ranks convert (the parts "
              "column: what rank 0 converted itself); \"assemble tail\" is what is left after "
              "the last part. CPU-bound speedup: the one-rank CPU time over the busiest rank's "
              "(the wall-clock columns share 2 cores, so 4 ranks cannot pass 2x; waiting ranks "
              "sleep, so CPU time is work); with more ranks than cores it understates what "
              "free cores give, as every rank's CPU a structure grows (the \"CPU ms a "
              "structure\" column). Work-bound speedup: the same ratio by the work each rank "
              "did (its structures at the one-rank CPU a structure, a writer's 1/W of the "
              "writer timed alone, rank 0's planning): what P free cores would give."]
    return lines


def _table(rows: list[dict]) -> list[str]:
    lines = ["| ranks | writers | load (1 min) | structures/s | speedup | efficiency "
             "(speedup/P) | per core (speedup/min(P, cores)) | >= 0.8 P | count+plan s | "
             "parts s | assemble tail s | CPU s, all ranks | CPU ms a structure, all ranks | "
             "CPU s, busiest rank | CPU-bound speedup | work-bound speedup | parts rank 0 / all |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ph = r["phases_s"]
        pr = r.get("parts_per_rank") or [0]
        lines.append(f"| {r['ranks']} | {r.get('writers', 1)} | {r.get('load1_start', '?')} | "
                     f"{r['rate']:.0f} | {r['speedup']:.2f}x | {r['efficiency']:.2f} | "
                     f"{r['per_core_efficiency']:.2f} | {'yes' if r['target_met'] else 'no'} | "
                     f"{ph['count_plan']:.2f} | {ph['parts']:.2f} | {ph['assemble']:.2f} | "
                     f"{r['cpu_total_s']:.1f} | {r.get('cpu_ms_per_structure_all', 0):.2f} | "
                     f"{r['cpu_max_rank_s']:.1f} | {r['cpu_bound_speedup']:.2f}x | "
                     f"{_x(r.get('work_bound_speedup'))} | {pr[0]} / {sum(pr)} |")
    return lines


def _x(v) -> str:
    return "?" if v is None else f"{v:.2f}x"


def _expected_text(e: dict) -> str:
    w = e.get("writers", {})
    per_w = "; ".join(f"{k} writer{'s' * (k != '1')}: {v['speedup']}x (efficiency "
                      f"{v['efficiency']:.2f}, writer-bound from about "
                      f"{v['ranks_until_writer_bound']} ranks)" for k, v in w.items())
    return (f"Expected on a {e['ranks']}-core node from the one-rank CPU times: counting and "
            f"planning {e.get('plan_share_at_1', 0) * 100:.1f}% (a fixed cost), the writer "
            f"{e.get('assembler_share_at_1', 0) * 100:.1f}% (timed alone: "
            f"{e.get('writer_alone_cpu_s', 0):.3f} s of CPU, "
            f"{e.get('writer_mb_per_cpu_s') or 0:.0f} MB/s). Time = plan + max(writer / W, "
            f"(conversion + writer) / P): {per_w}. Amdahl's law with one writer counted as "
            f"serial: {e.get('amdahl_speedup', e['speedup'])}x. With planning fixed, 0.8 P at "
            f"{e['ranks']} ranks needs about {e.get('structures_for_target', 0):,} structures "
            "or more (conversion-bound).")


def _rows(writers: int = 1) -> dict:
    """The rows of `writers` writers by their rank count."""
    return {r["ranks"]: r for r in json.loads(
        (HERE / "results" / "convert_rate.json").read_text())["rows"]
        if r.get("writers", 1) == writers}


def _held(writers: int = 1) -> dict:
    """The held-out set's rows of `writers` writers by their rank count."""
    return {r["ranks"]: r for r in _res()["held_out"]["rows"] if r.get("writers", 1) == writers}


def _res() -> dict:
    return json.loads((HERE / "results" / "convert_rate.json").read_text())


FIGURES_CONVERT = {
    "convert.rate1": lambda: f"{_rows()[1]['rate']:.0f}",
    "convert.rate2": lambda: f"{_rows()[2]['rate']:.0f}",
    "convert.rate4": lambda: f"{_rows()[4]['rate']:.0f}",
    "convert.speedup2": lambda: f"{_rows()[2]['speedup']:.2f}x",
    "convert.speedup4": lambda: f"{_rows()[4]['speedup']:.2f}x",
    "convert.percore4": lambda: f"{_rows()[4]['per_core_efficiency']:.2f}",
    "convert.cpu2": lambda: f"{_rows()[2]['cpu_bound_speedup']:.2f}x",
    "convert.cpu4": lambda: f"{_rows()[4]['cpu_bound_speedup']:.2f}x",
    "convert.cpu_total4": lambda: f"{_rows()[4]['cpu_total_s'] / _rows()[1]['cpu_total_s']:.2f}",
    "convert.expected64": lambda: f"{_res()['expected']['speedup']}x",
    "convert.serial_share": lambda: f"{_res()['expected']['serial_share_at_1'] * 100:.1f}%",
    "convert.amdahl64": lambda: f"{_res()['expected']['amdahl_speedup']}x",
    "convert.writer_bound": lambda: str(_res()['expected']['ranks_until_writer_bound']),
    "convert.cpu_ms1": lambda: f"{_res()['expected']['cpu_ms_per_structure_1']:.1f}",
    "convert.cpu_ms_all2": lambda: f"{_rows()[2]['cpu_ms_per_structure_all']:.1f}",
    "convert.cpu_ms_all4": lambda: f"{_rows()[4]['cpu_ms_per_structure_all']:.1f}",
    "convert.w2.rate4": lambda: f"{_rows(2)[4]['rate']:.0f}",
    "convert.w2.cpu4": lambda: f"{_rows(2)[4]['cpu_bound_speedup']:.2f}x",
    "convert.w2.cpu2": lambda: f"{_rows(2)[2]['cpu_bound_speedup']:.2f}x",
    "convert.w4.expected64": lambda: f"{_res()['expected']['writers']['4']['speedup']}x",
    "convert.w4.efficiency64": lambda: f"{_res()['expected']['writers']['4']['efficiency']:.2f}",
    "convert.w4.writer_bound": lambda: str(
        _res()['expected']['writers']['4']['ranks_until_writer_bound']),
    "convert.plan_share": lambda: f"{_res()['expected']['plan_share_at_1'] * 100:.1f}%",
    "convert.structures": lambda: f"{_res()['parameters']['structures']:,}",
    "convert.small.cpu4": lambda: f"{_held()[4]['cpu_bound_speedup']:.2f}x",
    "convert.structures_for_target": lambda: f"{_res()['expected']['structures_for_target']:,}",
    "convert.plan_ms": lambda: f"{_rows()[1]['rank0_cpu_s']['count_plan'] * 1e3:.0f}",
    "convert.work4": lambda: _x(_rows()[4]["work_bound_speedup"]),
    "convert.w2.work4": lambda: _x(_rows(2)[4]["work_bound_speedup"]),
    "convert.w2.work8": lambda: _x(_rows(2)[8]["work_bound_speedup"]),
    "convert.w2.cpu8": lambda: _x(_rows(2)[8]["cpu_bound_speedup"]),
    "convert.small.speedup2": lambda: _x(_held()[2]["speedup"]),
    "convert.small.work4": lambda: _x(_held()[4]["work_bound_speedup"]),
    "convert.small.work8": lambda: _x(_held()[8]["work_bound_speedup"]),
    "convert.small.w2.work8": lambda: _x(_held(2)[8]["work_bound_speedup"]),
    "convert.small.cpu_ms8": lambda: f"{_held()[8]['cpu_ms_per_structure_all']:.1f}",
    "convert.small.cpu_ms1": lambda: f"{_held()[1]['cpu_ms_per_structure_all']:.1f}",
    "convert.date": lambda: _res()["date"],
    "convert.load": lambda: str(_res()["machine"]["loadavg_start"][0]),
}



RATE = Section(
    "Conversion rate against ranks (mdloader convert, OC20-like .aselmdb shards)",
    ("python -m bench.convert.rate",), ("bench/convert/rate.py",),
    ("convert_rate.json",), section)
