"""Replica groups' score: is auto's pick (group size W, backend) the fastest, or within the noise
of it, on the step series ``bench/groups/cluster.py`` measured; the run's tables and summary.

Tie-aware: a pick the step series cannot tell from the fastest (``bench/ties.py``) counts as
right; ``fetch_score`` scores the fetch alone.
"""

from __future__ import annotations

import numpy as np

from bench.ties import ALPHA, WITHIN, resolve


TOLERANCE = 0.10  # a pick within 10% of the fastest measured step: inside this machine's noise


LOCAL = "local copy"  # W = 1: both backends run the same code (a local gather, no MPI)


def _key(w: int, backend: str) -> tuple:
    return (w, LOCAL) if w == 1 else (w, backend)


def _fixed(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["backend"] != "auto"]


def _rounds(rows: list[dict], metric: str = "step") -> dict:
    """(W, backend) -> every round's step (or, `metric` "fetch", fetch) median of the fixed rows
    (W = 1 pooled)."""
    got: dict = {}
    for r in _fixed(rows):
        got.setdefault(_key(r["group_size"], r["backend"]), []).append(r[f"{metric}_median_s"])
    return got


def _medians(rows: list[dict], metric: str = "step") -> dict:
    """(W, backend) -> median over rounds of the fixed rows' step (fetch) medians; at W = 1
    both backends' rows are pooled as one configuration (``LOCAL``)."""
    return {k: float(np.median(v)) for k, v in _rounds(rows, metric).items()}


def _series(rows: list[dict], metric: str = "step") -> dict:
    """(W, backend) -> round -> the slowest rank's steps (fetches) in that round (W = 1
    pooled). A row measured before the series was kept stands for its median alone."""
    got: dict = {}
    for r in _fixed(rows):
        by_round = got.setdefault(_key(r["group_size"], r["backend"]), {})
        by_round.setdefault(r.get("round", 0), []).extend(r.get(f"{metric}_s")
                                                         or [r[f"{metric}_median_s"]])
    return got


def compare(rows: list[dict], a: tuple, b: tuple, metric: str = "step") -> dict:
    """:func:`ties.resolve` on two (W, backend) configurations' step series, round by round
    (the rounds interleave every configuration measured in them); ``winner`` is a key or None."""
    ser = _series(rows, metric)
    names = {f"W={k[0]} {k[1]}": k for k in (a, b)}
    blocks = [{n: ser[k].get(rnd, []) for n, k in names.items()}
              for rnd in sorted(set(ser[a]) | set(ser[b]))]
    res = resolve(blocks)
    return {**res, "winner": names.get(res["winner"])}


def _ranked(rows: list[dict], metric: str = "step") -> list[tuple]:
    med = _medians(rows, metric)
    return sorted(med, key=med.get)


def scores(run: dict) -> list[dict]:
    """One score per auto row: unconstrained, and under the budget that excludes W = 1."""
    out = []
    for auto in (r for r in run["rows"] if r["backend"] == "auto"):
        rows = _fitting(run["rows"], auto) + [auto]
        out.append({**score({**run, "rows": rows}),
                    "by_fetch": fetch_score(rows),
                    "budget": auto.get("budget"),
                    "name": f"{run['shape']}@{run['rate']} {run['kind']} B{run['batch']}"
                            + (" (budget)" if "budget" in auto else "")})
    return out


def _fitting(rows: list[dict], auto: dict) -> list[dict]:
    """The fixed rows that fit auto's budget (W = 1 is the one a budget row excludes)."""
    return [r for r in _fixed(rows) if "budget" not in auto or r["group_size"] > 1]


def score(run: dict) -> dict:
    """Auto's (W, backend) against the fixed rows (its pick's own fixed row: auto's row adds the
    online trial's probe steps). At W = 1 the backend is immaterial (``LOCAL``).

    *strict*: the pick is the fastest by median over rounds. *tie_aware*: strict, or within
    ``WITHIN`` of the fastest, or a **tie**: :func:`compare` cannot tell the pick's steps from
    the fastest's. The test is the pick's against the fastest, or, where the pick is the fastest,
    the fastest's against the runner-up: ``tie`` False means the measurement resolved whether the
    pick is right. Also the older measures (``TOLERANCE``, ``within_noise``) and the host-local
    (W = ranks a host) speed-up over the best W = P backend."""
    med = _medians(run["rows"])
    ranked = _ranked(run["rows"])
    best = ranked[0]
    auto = run["rows"][-1]
    pick = _key(auto["group_size"], auto["chosen"])
    full = max(w for w, _ in med)
    at_p = min(v for (w, _), v in med.items() if w == full)
    rph = int(run["shape"].split("x")[1])
    local = [v for (w, _), v in med.items() if w == rph and w != full]
    raw: dict = {}  # without pooling W = 1's two backends
    for r in _fixed(run["rows"]):
        raw.setdefault((r["group_size"], r["backend"]), []).append(r["step_median_s"])
    raw_best = min(raw, key=lambda k: float(np.median(raw[k])))
    rounds = _rounds(run["rows"])
    other = best if pick != best else (ranked[1] if len(ranked) > 1 else None)
    test = compare(run["rows"], pick, other) if pick in med and other else None
    within = med.get(pick, float("inf")) <= med[best] * (1 + WITHIN)
    tie = bool(test and test["winner"] is None)
    return {"within_noise": pick == best or (pick in rounds and
                                             min(rounds[pick]) <= max(rounds[best])),
            "fastest": list(best), "fastest_s": med[best], "pick": list(pick),
            "unpooled_right": (auto["group_size"], auto["chosen"]) == raw_best,
            "pick_s": med.get(pick), "strict": pick == best,
            "within_3pct": within, "tie": tie, "tie_aware": pick == best or within or tie,
            "tested_against": list(other) if other else None,
            "p_value": test["p"] if test else None,
            "rounds": {f"W={k[0]} {k[1]}": len(v) for k, v in rounds.items()},
            "within_tolerance": med.get(pick, float("inf")) <= med[best] * (1 + TOLERANCE),
            "host_local_speedup": at_p / min(local) if local else None}


def fetch_score(rows: list[dict]) -> dict:
    """:func:`score`'s tie-aware verdict on the fetch alone (the slowest rank's fetch a step,
    what (backend, W) decides): every layout serves the same batches, so the rest of a step
    is the same work for all of them, and on this 2-core machine its time is mostly the
    scheduler's (steps with a 0.2 ms fetch took 1 ms or 10-19 ms, one time slice, by turns)."""
    med = _medians(rows, "fetch")
    ranked = _ranked(rows, "fetch")
    best, auto = ranked[0], rows[-1]
    pick = _key(auto["group_size"], auto["chosen"])
    other = best if pick != best else (ranked[1] if len(ranked) > 1 else None)
    test = compare(rows, pick, other, "fetch") if pick in med and other else None
    within = med.get(pick, float("inf")) <= med[best] * (1 + WITHIN)
    tie = bool(test and test["winner"] is None)
    return {"fastest": list(best), "fastest_s": med[best], "pick": list(pick),
            "pick_s": med.get(pick), "strict": pick == best, "within_3pct": within,
            "tie": tie, "tie_aware": pick == best or within or tie,
            "p_value": test["p"] if test else None}


def summary(runs: list[dict]) -> dict:
    sc = [s for r in runs for s in scores(r)]
    res = [s for s in sc if not s["tie"]]
    fe = [(s["name"], s["by_fetch"]) for s in sc]
    return {"fetch_strict_right": sum(f["strict"] for _, f in fe),
            "fetch_tie_aware_right": sum(f["tie_aware"] for _, f in fe),
            "fetch_resolved_wrong": [n for n, f in fe if not f["tie"] and not f["tie_aware"]],
            "configs": len(sc), "strict_right": sum(s["strict"] for s in sc),
            "unpooled_right": sum(s.get("unpooled_right", False) for s in sc),
            "tie_aware_right": sum(s["tie_aware"] for s in sc),
            "ties": len(sc) - len(res), "resolved": len(res),
            "resolved_right": sum(s["tie_aware"] for s in res), "within": WITHIN, "alpha": ALPHA,
            "resolved_wrong": [s["name"] for s in res if not s["tie_aware"]],
            "tolerance_right": sum(s["within_tolerance"] for s in sc), "tolerance": TOLERANCE,
            "noise_right": sum(s.get("within_noise", s["strict"]) for s in sc)}


def summary_text(s: dict) -> str:
    n = max(1, s["configs"])

    def pct(k):
        return f"{s[k]} of {s['configs']} configurations ({s[k] / n:.0%})"

    return (f"auto picked the fastest fitting (backend, W) in {pct('strict_right')} strictly "
            f"(smallest median over rounds; W = 1's two backends, the same local copy, pooled); "
            f"tie-aware (the fastest, within {s['within']:.0%} of it, or not told apart from it "
            f"by a stratified Mann-Whitney test over the interleaved rounds, alpha "
            f"{s['alpha']}): {pct('tie_aware_right')}, {s['resolved']} resolved of which "
            f"{s['resolved_right']} right"
            + (f" (wrong: {'; '.join(s['resolved_wrong'])})" if s["resolved_wrong"] else "")
            + f", {s['ties']} ties; within {s['tolerance']:.0%}: {pct('tolerance_right')}; "
            f"within the run-to-run noise: {pct('noise_right')}"
            + (f". By the fetch alone (what the layout decides; the rest of a step is the same "
               f"work for every layout): {pct('fetch_strict_right')} strictly, "
               f"{pct('fetch_tie_aware_right')} tie-aware"
               + (f" (wrong: {'; '.join(s['fetch_resolved_wrong'])})"
                  if s["fetch_resolved_wrong"] else "") if "fetch_strict_right" in s else ""))


def _verdict(sc: dict) -> str:
    """A score in words: the tie-aware verdict with its test, then the older measures."""
    p = f"p = {sc['p_value']:.2g}" if sc.get("p_value") is not None else "untested"
    vs = sc.get("tested_against")
    test = f"{p} against W={vs[0]} {vs[1]}" if vs else p
    if sc["strict"]:
        return f"right ({'a tie with the runner-up' if sc.get('tie') else 'resolved'}: {test})"
    if sc.get("within_3pct"):
        return f"within {WITHIN:.0%} ({test})"
    if sc.get("tie"):
        return f"a tie ({test})"
    older = ("within the run-to-run noise" if sc.get("within_noise") else
             f"within {TOLERANCE:.0%}" if sc["within_tolerance"] else "")
    return f"WRONG, resolved ({test})" + (f"; by the older measures {older}" if older else "")


def table(run: dict) -> str:
    rows = run["rows"]
    sc = score({**run, "rows": [r for r in rows if "budget" not in r]})
    la = run.get("loadavg")
    done = run.get("rounds_done")
    rounds = (f"{run.get('rounds', 1)} interleaved round(s) of {run.get('steps', '?')} steps"
              + (f", then the contenders up to round {done}" if done and done > run["rounds"]
                 else ""))
    lines = [f"### {run['shape']} @ {run['rate']}, {run['kind']}, batch {run['batch']} "
             f"(auto's profile: {run.get('profile', 'local')}; {rounds}; "
             f"load average {la[0]:.1f}; {run.get('date', '?')})" if la else
             f"### {run['shape']} @ {run['rate']}, {run['kind']}, batch {run['batch']} "
             f"(auto's profile: {run.get('profile', 'local')})", "",
             "| W | backend | rounds | fetch ms (median, slowest rank) | step ms | MB across hosts "
             "a step | memory a rank MiB |", "|---|---|---|---|---|---|---|"]
    merged = {}
    for r in rows:  # fixed rows: medians over rounds; auto's row as it is
        key = (r["group_size"], r["backend"], "budget" in r)
        merged.setdefault(key, []).append(r)
    agg = []
    for rs in merged.values():
        agg.append({**rs[0], "n": len(rs), **{k: float(np.median([r[k] for r in rs])) for k in
                                              ("fetch_median_s", "step_median_s")}})
    for r in agg:
        name = r["backend"] if r["backend"] != "auto" else f"auto -> {r['chosen']}" + (
            " (budget)" if "budget" in r else "") + (
            f" (model: {r['model_backend']}; {'checked' if r['online_decided'] else 'unchecked'}"
            f", {r['steps']} steps)" if "model_backend" in r else "")
        lines.append(f"| {r['group_size']} | {name} | {r['n'] if r['backend'] != 'auto' else '-'}"
                     f" | {r['fetch_median_s'] * 1e3:.2f} | "
                     f"{r['step_median_s'] * 1e3:.2f} | {r['crossed_bytes_per_step'] / 1e6:.2f} "
                     f"| {r['memory_per_rank'] / 2**20:.1f} |")
    hl = sc["host_local_speedup"]
    lines += ["", f"fastest fixed (median over rounds): W={sc['fastest'][0]} {sc['fastest'][1]} "
              f"({sc['fastest_s'] * 1e3:.1f} ms); host-local groups "
              + (f"{hl:.1f}x faster than W = P" if hl else "n/a (one rank a host: W=1)")
              + f"; auto chose W={sc['pick'][0]} {sc['pick'][1]} ("
              + (f"its fixed row {sc['pick_s'] / sc['fastest_s']:.2f}x the fastest"
                 if sc["pick_s"] else "no fixed row") + "): " + _verdict(sc)]
    for b in (x for x in scores(run) if x["budget"]):
        lines.append(f"under a budget of {b['budget'] / 2**20:.1f} MiB a rank (W = 1 does not "
                     f"fit): fastest fitting W={b['fastest'][0]} {b['fastest'][1]} "
                     f"({b['fastest_s'] * 1e3:.1f} ms), auto chose W={b['pick'][0]} "
                     f"{b['pick'][1]} ("
                     + (f"{b['pick_s'] / b['fastest_s']:.2f}x" if b["pick_s"] else "no fixed row")
                     + "): " + _verdict(b))
    return "\n".join(lines)


def loading_table(runs: list[dict]) -> str:
    """Markdown: load time (median over rounds, slowest rank) and bytes read, read vs copy.
    A job's first load (imports, first file open: 4-6x slower) is a warm-up, left out."""
    lines = ["| layout | link | W | mode | load s (median; all rounds) | read from the file MB "
             "| load average |", "|---|---|---|---|---|---|---|"]
    for run in runs:
        rows = run["rows"] if run.get("warmup") else run["rows"][1:]  # first load: warm-up
        for mode in ("read", "copy"):
            ts = sorted(r["load_s"] for r in rows if r["mode"] == mode)
            if not ts:
                continue
            mb = next(r["bytes_read"] for r in run["rows"] if r["mode"] == mode) / 1e6
            lines.append(f"| {run['shape']} | {run['rate']} | {run['group_size']} | {mode} | "
                         f"{float(np.median(ts)):.2f} ({', '.join(f'{t:.2f}' for t in ts)}) | "
                         f"{mb:.0f} | {run['loadavg'][0]:.1f} |")
    return "\n".join(lines)
