"""``mdloader plan``: size a job from the data files before submitting it.

Reads the files' metadata and ``variable_count`` arrays only (never a record), so it runs on a
login node in seconds. From them it knows every sample's exact record size, hence for a job of
``P`` ranks, ``K`` a node: the records, index and epoch order a rank holds (the store's own
sharding, :func:`~mdloader_plugin.store.budget.per_rank_bytes`, and the load's peak:
:func:`~mdloader_plugin.store.budget.load_peak`; the index as
:func:`~mdloader_plugin.store.index_build.build_index` builds it), the step buffers and prefetch
queue, a node's total, the load time, and the predicted step time of every backend and replica-group
size on a machine profile (:func:`~mdloader_plugin.estimator.group_size.choose_layout`, the same
choice ``group_size: auto`` makes at run time). When nothing fits the budget it says what to
change. Every split of the file is planned (HydraGNN's driver loads ``trainset``, ``valset`` and
``testset``); the step time is the train split's.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

EPILOG = """\
examples:
  mdloader plan data/mols.bp --ranks 256 --ranks-per-node 4 --profile perlmutter --batch-size 32
  mdloader plan $MEMBERWORK/abc123/oc20.bp --ranks 1024 --ranks-per-node 8 --profile frontier \\
      --group-size auto --max-memory-per-rank 24GiB --json

Exit code 0 when the job fits, 1 when it does not (the last line says what to change), 2 on bad
input (a file that is not in HydraGNN's layout, a bad option)."""

#: bytes a step buffer holds a record: the fetched records and, for the collective backend, the
#: records a rank sends (both about one batch)
BUFFER_COPIES = 2


def register(sub) -> None:
    p = sub.add_parser("plan", help="memory, load and step time of a job from the files' "
                                    "metadata, before submitting it",
                       description=__doc__.split("\n\n")[0].split(":", 1)[1].strip(),
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", metavar="FILE.bp",
                   help="HydraGNN-layout ADIOS2 file(s); several: one store over all of them")
    p.add_argument("--ranks", type=int, required=True, help="ranks of the job P")
    p.add_argument("--ranks-per-node", type=int, required=True, help="ranks a node K")
    p.add_argument("--profile", default=None,
                   help="machine profile: perlmutter, frontier, local or a `mdloader calibrate` "
                        "file (default: $MDLOADER_PROFILE or local)")
    p.add_argument("--batch-size", type=int, default=32, help="samples a rank a step (32)")
    p.add_argument("--group-size", "--width", default=None, metavar="auto|W",
                   help="replica groups: auto weighs every valid W; W weighs it against all "
                        "ranks (default: one copy over all ranks)")
    p.add_argument("--max-memory-per-rank", default=None, metavar="SIZE",
                   help="budget a rank (default: half the profile's node memory over K)")
    p.add_argument("--label", action="append", default=None, metavar="SPLIT",
                   help="split(s) to plan (repeatable; default: every split of the file)")
    p.add_argument("--prefetch-mib", type=float, default=None,
                   help="prefetch queue cap (default: $MDLOADER_PREFETCH_MIB or 32)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    from .check import add_scale_arguments

    add_scale_arguments(p)
    p.set_defaults(func=run)


def _labels(files, wanted):
    from ..core.errors import DataError
    from ..sources.adios import GraphFile

    with GraphFile(files[0]) as f:
        have = f.labels()
    if not have:
        raise DataError(f"{files[0]}: no split (no <label>/ndata attribute): the file is not in "
                        "HydraGNN's ADIOS2 layout; write one with `mdloader convert` or "
                        "`mdloader synth`")
    for lab in wanted or ():
        if lab not in have:
            raise DataError(f"{files[0]}: no split {lab!r} (has {', '.join(have)}); pass one of "
                            "those to --label")
    return list(wanted or have)


def plan(args) -> dict:
    """The plan of `args` as a JSON-ready dict (see the module doc)."""
    from ..core.errors import ConfigError, MemoryBudgetError
    from ..core.units import parse_bytes
    from ..estimator.group_size import profile_budget
    from ..estimator.profile import get_profile
    from ..loader.args import prefetch_bytes
    from ..loader.open import _record_sizes, decide_layout, index_sharing
    from ..mpi import groups
    from ..sampling.planner import rank_plan_bytes
    from ..core.units import human
    from ..store.budget import block_records_bytes, load_peak, scale_bytes
    from ..store.index import exact_bytes
    from .check import scale_options

    P, K, B = args.ranks, args.ranks_per_node, args.batch_size
    if P < 1 or K < 1 or P % K or B < 1:
        raise ConfigError(f"--ranks {P} --ranks-per-node {K} --batch-size {B}: need P >= 1, "
                          "K >= 1 dividing P, and B >= 1")
    scale = scale_options(args)
    prof = get_profile(args.profile)
    budget, source = profile_budget(prof, K, parse_bytes(args.max_memory_per_rank,
                                                         "--max-memory-per-rank"))
    want = groups.parse(args.group_size, "--group-size")
    node_of = np.arange(P) // K
    if want not in (None, "auto"):
        groups.check_size(want, node_of)
    widths = groups.valid_sizes(node_of) if want == "auto" else sorted({want or P, P})
    path = list(args.files) if len(args.files) > 1 else args.files[0]
    prefetch = prefetch_bytes(args.prefetch_mib)
    splits = {label: _record_sizes(path, label, None, ())
              for label in _labels(args.files, args.label)}
    train = "trainset" if "trainset" in splits else next(iter(splits))

    def memory(sizes, w, collective) -> dict:  # the fullest rank's store of a split, groups of w
        share = index_sharing(node_of, w, scale["index_share"])
        return {"records_bytes": block_records_bytes(sizes, w),
                "index_bytes": exact_bytes(sizes, w, scale["index"], share),
                "order_bytes": scale_bytes(sizes.size, ranks_per_node=K, **scale)["order"]
                + rank_plan_bytes(-(-sizes.size // P), min(B, -(-sizes.size // P)), collective),
                "buffers_bytes": BUFFER_COPIES * min(B, -(-sizes.size // P))
                * int(sizes.max(initial=0)),
                "prefetch_cap_bytes": prefetch}

    # the choice group_size auto makes at run time (the train split, its budget), or W = P
    sizes = splits[train]
    kw = dict(backend="auto", profile=prof, budget=budget, source=source,
              index=scale["index"], index_share=scale["index_share"], widths=widths)
    try:
        lay, advice = decide_layout(sizes, node_of, B, **kw), None
        cands = lay.candidates
    except MemoryBudgetError as exc:  # nothing fits: its message says what to change
        lay, advice = None, str(exc)
        cands = decide_layout(sizes, node_of, B, **{**kw, "budget": None}).candidates
    w = lay.group_size if lay else P
    coll = lay is None or lay.backend == "collective"
    per_split = {lab: memory(s, w, coll) for lab, s in splits.items()}
    rank = {k: int(sum(m[k] for m in per_split.values())) for k in per_split[train]}
    rank["prefetch_cap_bytes"] = prefetch * len(splits)  # one queue a loader
    total = sum(rank.values())
    # splits load one after another: the last one's load buffers on top of every split's store
    peaks = {lab: load_peak(m["records_bytes"], m["index_bytes"], -(-splits[lab].size // w))
             - m["records_bytes"] - m["index_bytes"] for lab, m in per_split.items()}
    load_bytes = rank["records_bytes"] + rank["index_bytes"] + max(peaks.values())
    if lay is not None and budget is not None and load_bytes > budget:  # killed while loading
        lay, advice = None, (f"the memory budget {human(budget)} a rank ({source}) is below "
                             f"the load's peak, {human(load_bytes)} a rank (every split's "
                             "records and index + the load's buffers): run with more ranks, a "
                             "larger group_size (fewer replica groups), --index-share node, or "
                             "raise the budget")
    return {
        "files": list(args.files), "profile": prof.name, "ranks": P, "ranks_per_node": K,
        "batch_size": B, "scale": scale, "group_size": w,
        "splits": {lab: {"samples": int(s.size), "record_bytes_mean": float(s.mean()),
                         "record_bytes_max": int(s.max(initial=0)),
                         "data_bytes": int(s.sum()), "per_rank": per_split[lab]}
                   for lab, s in splits.items()},
        "per_rank": {**rank, "total_bytes": int(total)},
        "per_node_bytes": int(total * K),
        "load_peak_bytes": int(load_bytes),
        "load_s": _load_seconds(prof, rank["records_bytes"], K, P),
        "step_split": train,
        "step": [{"backend": c.backend, "group_size": c.group_size,
                  "predicted_s": c.predicted_s, "memory_bytes": c.memory_bytes,
                  "fits": budget is None or c.memory_bytes <= budget} for c in cands],
        "budget_bytes": budget, "budget_source": source,
        "fits": lay is not None,
        "choice": ({"backend": lay.backend, "group_size": lay.group_size, "reason": lay.reason}
                   if lay else None),
        "advice": advice,
    }


def _load_seconds(prof, rank_bytes: int, ranks_per_node: int, ranks: int) -> dict:
    """Seconds to load a rank's records: reading them (a node's ranks share its file-system
    bandwidth, ``provenance.fs_read_node_bytes_per_s``; all ranks share the file system's,
    ``fs_read_total_bytes_per_s``), then decoding them into the store at the profile's memory
    bandwidth (``mem.bw``)."""
    node = prof.provenance.get("fs_read_node_bytes_per_s")
    whole = prof.provenance.get("fs_read_total_bytes_per_s")
    decode = rank_bytes / float(prof.params["mem.bw"])
    reads = [rank_bytes * ranks_per_node / float(node)] if node else []
    reads += [rank_bytes * ranks / float(whole)] if whole else []
    read = max(reads) if reads else None
    return {"read_s": read, "decode_s": decode,
            "total_s": None if read is None else read + decode,
            "fs_source": prof.provenance.get("fs_read_source") if reads else
            "the profile has no file-system read figure (provenance.fs_read_node_bytes_per_s)"}


def run(args) -> int:
    from ..core.units import human

    doc = plan(args)
    if args.json:
        print(json.dumps(doc))
        return 0 if doc["fits"] else 1
    P, K = doc["ranks"], doc["ranks_per_node"]
    print(f"plan: {', '.join(doc['files'])} on {P} ranks ({K} a node, {P // K} nodes), "
          f"batch {doc['batch_size']}, profile {doc['profile']}")
    for lab, s in doc["splits"].items():
        m = s["per_rank"]
        print(f"  {lab:<9s} {s['samples']:>10d} samples, {human(s['data_bytes'])} of records "
              f"(mean {s['record_bytes_mean']:.0f} B, max {s['record_bytes_max']} B): a rank "
              f"holds records {human(m['records_bytes'])}, index {human(m['index_bytes'])}, "
              f"order {human(m['order_bytes'])}")
    r = doc["per_rank"]
    print(f"a rank: records {human(r['records_bytes'])} + index {human(r['index_bytes'])} + "
          f"order {human(r['order_bytes'])} + step buffers ~{human(r['buffers_bytes'])} + "
          f"prefetch queue <= {human(r['prefetch_cap_bytes'])} = {human(r['total_bytes'])}; "
          f"a node: {human(doc['per_node_bytes'])}; budget for a split's store (records + "
          f"index): {human(doc['budget_bytes']) if doc['budget_bytes'] else 'none'} a rank "
          f"({doc['budget_source']})")
    print(f"load peak: {human(doc['load_peak_bytes'])} a rank (every split's records and index "
          "+ the load's buffers, the bound the store's budget check uses)")
    ld = doc["load_s"]
    if ld["total_s"] is None:
        print(f"load: decode {ld['decode_s'] * 1e3:.1f} ms a rank; file-system read unknown: "
              f"{ld['fs_source']}")
    else:
        print(f"load: {ld['total_s']:.3f} s a rank (read {ld['read_s']:.3f} s, decode "
              f"{ld['decode_s']:.3f} s; file-system figures: {ld['fs_source'].split(':')[0]}, "
              "see the profile's provenance)")
    print(f"step time of {doc['step_split']} (predicted; memory: that split's store):")
    print(f"  {'W':>6s} {'backend':<11s} {'ms/step':>10s} {'memory a rank':>14s}  fits")
    for c in doc["step"]:
        print(f"  {c['group_size']:6d} {c['backend']:<11s} {c['predicted_s'] * 1e3:10.3f} "
              f"{human(c['memory_bytes']):>14s}  {'yes' if c['fits'] else 'no'}")
    if doc["fits"]:
        ch = doc["choice"]
        print(f"choice: backend {ch['backend']}, group_size {ch['group_size']} ({ch['reason']})")
        return 0
    print(f"does not fit: {doc['advice']}")
    return 1
