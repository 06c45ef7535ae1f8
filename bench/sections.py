"""The sections of ``bench/RESULTS.md``, in order: where each one's numbers come from.

To add a benchmark's section, append one :class:`Section` to ``SECTIONS``: a title, the exact
command that writes its data, the script, the files it reads under ``bench/results/`` (the first
one decides whether the section appears), the figures it names and a ``body(data)`` function
returning Markdown lines (``data``: ``{file name: parsed JSON or Markdown text}``). Have the
script record a ``date`` (``YYYY-MM-DD HH:MM UTC``) in its JSON: the section's header shows it.
Then ``python -m bench.report`` and commit ``RESULTS.md`` and ``bench/README.md`` with the JSON.
A result that a page quotes but that has no section goes in ``OTHER_RESULTS``; a superseded one
goes to ``bench/results/archive/`` (``tests/integration/test_bench_report.py`` checks that every
file under ``bench/results/`` is one of these).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from bench.estimator import backend_choice
from bench.ddstore import figures as ddstore_figures
from bench.convert import rate as convert_rate
from bench import figures
from bench.gpu import demo as gpu_demo
from bench.gil import targets as gil_free
from bench.gpu import rate as gpu_rate
from bench.groups import cluster as groups_bench
from bench.groups import model as groups_model
from bench.fairchem import figures as fairchem_figures
from bench.store import load_peak
from bench.estimator import rank_cost_figures
from bench.loaders import tables as t


@dataclass(frozen=True)
class Section:
    """One section of RESULTS.md and where its numbers come from."""

    title: str
    commands: tuple[str, ...]
    scripts: tuple[str, ...]
    data: tuple[str, ...]
    body: Callable[[dict], list[str]]
    figures: tuple[str, ...] = ()
    make_bench: str = "yes"  # run by `make bench`? "yes", "no", or the setting that adds it
    level: int = 2


@dataclass(frozen=True)
class Other:
    """A result a documentation page quotes that has no section of its own."""

    data: str
    commands: tuple[str, ...]
    scripts: tuple[str, ...]
    cited_by: tuple[str, ...]


CLUSTERS = ("loaders_cluster.json", "loaders_cluster_200mbit.json")


def _targets(d: dict) -> list[str]:
    return t.targets(d["loaders.json"], d["training.json"],
                     [d[n] for n in CLUSTERS if d.get(n)])


def _loaders(d: dict) -> list[str]:
    res = d["loaders.json"]
    m = res["machine"]
    lines = [f"{'Full' if res['full'] else 'Reduced'} grid on `{m['host']}` ({m['cpu']}, "
             f"{m['cores']} cores shared with other jobs; load average {m['loadavg_start'][0]} "
             f"at start, {m['loadavg_end'][0]} at end), Python {m['python']}, Open MPI 5 wheel; "
             f"{res['steps']} measured steps x {res.get('repeats', 1)} interleaved rounds for "
             "the store-based loaders, 1 round for the others; the same plans and seed for every "
             "loader except PyG local."
             + (t._merged_note(m["merged_with"]) if m.get("merged_with") else ""), ""]
    lines += t.loader_tables(res)
    same = {r["loader"]: r["same_batches"] for r in res["rows"] if r["same_batches"] is not None}
    bad = sorted(k for k, v in same.items() if not v)
    return lines + ["", "Same graphs at every step as MDLoader collective: "
                    + ("all plan-driven loaders" if not bad else f"NOT for {', '.join(bad)}"),
                    "", "Figures: `bench/loaders_hydragnn.png`, `bench/loaders_oc20.png`, "
                    "`bench/loaders_memory.png`."]


def _clusters(d: dict) -> list[str]:
    out: list[str] = []
    for n in CLUSTERS:
        if d.get(n):
            out += t.cluster_table(d[n]) + [""]
    return out[:-1]


def _fetch_cost(d: dict) -> list[str]:
    return ["Before: the tree at b5124e3; after: the kept code (14c71fe); owners of a small step "
            "from the index's vectorised lookup; batch 128 added.", ""] + t.fetch_cost_tables(
        d["loaders_fetch_i21_before.json"], d["loaders_fetch_i21_after.json"],
        (d["fetch_profile_i21_n2.json"], d["fetch_profile_i21_n4.json"]),
        before_what="the tree before this round, b5124e3")


def _gpu_rate(fig: str, page: str) -> Callable[[dict], list[str]]:
    def body(d: dict) -> list[str]:
        return gpu_rate.tables(next(iter(d.values()))) + [
            "", f"Figure: `{fig}`; method and reading: {page}."]
    return body


def _groups(name: str) -> Callable[[dict], list[str]]:
    def body(d: dict) -> list[str]:
        g = d[name]
        out = ["Every group size W x backend in interleaved rounds (more rounds for the "
               "contenders while the score is unresolved), then `group_size: auto` with "
               "`backend: auto` as users run it, for epochs until its online check has decided "
               f"(its step median: the last epoch's). {g['note']}.", ""]
        for run in g["runs"]:
            out += [groups_bench.table(run) if "rounds" in run else run["table"], ""]
        if g["runs"]:
            out += [groups_bench.summary_text(groups_bench.summary(g["runs"])) + "."]
        return out
    return body


def _loading(d: dict) -> list[str]:
    g = d["groups_loading.json"]
    return ["OC20-like slabs, W = 2 (two groups), load time of the store (slowest rank; median "
            "over interleaved rounds, a job's first load left out as warm-up). "
            f"{g['note']}.", "", groups_bench.loading_table(g["runs"])]


def _training(d: dict) -> list[str]:
    return t.training_table(d["training.json"]) + ["", "Figure: `bench/training.png`."]


def _estimator(d: dict) -> list[str]:
    est = d["estimator_accuracy.json"]
    s = est["summary"]
    m, o = s["model"], s["online"]
    return [f"{s['configs']} configurations ({'quick' if est.get('quick') else 'full'} grid, "
            f"{est.get('steps', '?')} steps a backend): the model alone picked the faster backend "
            f"in {m['right_pick_fraction']:.1%}, regret geo-mean {m['regret_geomean']:.1%}, worst "
            f"{m['regret_worst']:.0%}; with the online check (re-scored on the same "
            f"measurements) {o['right_pick_fraction']:.0%}, regret geo-mean "
            f"{o['regret_geomean']:.1%}, worst {o['regret_worst']:.0%}.", "",
            "Figures: `bench/estimator_pred_vs_meas.png`, "
            "`bench/estimator_crossover_perlmutter.png` (model output)."]


def _estimator_cluster(d: dict) -> list[str]:
    est = d["estimator_cluster.json"]
    out = [f"{est['hosts']} emulated hosts, batch {est['batches']} a rank, {est['steps']} "
           "measured steps a configuration; auto's pick at start (model) and after its online "
           "check, against the backend measured faster.", "",
           "| link | configs | model right | model regret geo / worst | online right | "
           "online regret geo / worst |", "|---|---:|---:|---:|---:|---:|"]
    for rate, s in est["summary"].items():
        m, o = s["model"], s["online"]
        out.append(f"| {rate} | {s['configs']} | {m['right_pick_fraction']:.0%} | "
                   f"{m['regret_geomean']:+.1%} / {m['regret_worst']:+.0%} | "
                   f"{o['right_pick_fraction']:.0%} | {o['regret_geomean']:+.1%} / "
                   f"{o['regret_worst']:+.0%} |")
    return out + ["", "Figure: `bench/estimator_cluster.png`."]


def _backend_choice(d: dict) -> list[str]:
    return backend_choice.results_section(d["backend_choice.json"]) + [
        "", "Figure: `bench/backend_choice.png`."]


def _scale(d: dict) -> list[str]:
    return t.scale_table(d["scale_perlmutter.json"]) + [
        "", "Figure: `bench/scale_perlmutter.png` (labelled MODEL OUTPUT)."]


def _multi(d: dict) -> list[str]:
    m = d["multi.json"]
    out = [f"{m['ranks']} ranks, batch {m['batch']} a rank, files of {m['sizes']} graphs in one "
           f"store against one file of {sum(m['sizes'])}; {m['steps']} steps x {m['rounds']} "
           "interleaved rounds, fetch median of the slowest rank (target: within 10%).", "",
           "| backend | 3 files ms | 1 file ms | ratio |", "|---|---:|---:|---:|"]
    for b, r in m["backends"].items():
        out.append(f"| {b} | {r['median_ms']['multi']:.3f} | {r['median_ms']['single']:.3f} | "
                   f"{r['ratio']:.3f} |")
    return out


def _md(name: str) -> Callable[[dict], list[str]]:
    """A Markdown file a script wrote under bench/results/, as it stands."""
    def body(d: dict) -> list[str]:
        return d[name].strip("\n").splitlines()
    return body


def _markdown(title: str, commands: tuple[str, ...], scripts: tuple[str, ...], stem: str,
              make_bench: str = "no") -> Section:
    """A section that shows ``bench/results/<stem>.md`` as it stands (its numbers in
    ``<stem>.json`` beside it)."""
    return Section(title, commands, scripts, (f"{stem}.md", f"{stem}.json"), _md(f"{stem}.md"),
                   make_bench=make_bench)


_SR = "bench/scale/regression.py"
_SR_TITLE = "Compact index and scalable order, before/after"


def _regression(title: str, args: str, stem: str, scripts: tuple[str, ...] = (_SR,)) -> Section:
    """One of the compact-index before/after sections: ``python -m bench.scale.regression
    ARGS`` wrote ``bench/results/<stem>.md``."""
    return _markdown(f"{_SR_TITLE}{title}", (f"python {_SR} {args}",), scripts, stem)

def _fairchem(d: dict) -> list[str]:
    """Atoms a batch against max_atoms (fairchem's sampler, MDLoader, the rule before) and the
    bytes a sample of fairchem's 4-data-set mix."""
    m = d["fairchem_batches.json"]["mix"]
    return [f"{fairchem_figures.when()}: atoms a batch in tenths of max_atoms "
            "(one epoch, one rank's view of all batches).", fairchem_figures.table().strip(), "",
            f"fairchem's 4-data-set mix (temperature 2, seeded per-set permutations), "
            f"N = {m['num_samples']:.0e}, P = {m['ranks']}: {m['bytes_per_sample']:.2f} B a "
            f"sample of N-proportional state with the {m['order']} order; "
            f"{m['list_bytes_per_sample']:.2f} B with the expanded list kept."]


def _rank_cost(d: dict) -> list[str]:
    """CPU a step of one rank against P (today's code and the code before), the targets, and
    the 2-8 rank A/B."""
    res, small = d["rank_cost.json"], d.get("rank_cost_small.json")
    out = [f"{res['meta']['machine']}; thread CPU ms a step, median of {res['meta']['steps']} "
           f"steps, fastest of {res['meta'].get('rounds', 1)} rounds, b = 32, N = 1e8 "
           "(`legacy`: the whole [P, b] table a step).", "",
           "| backend | weights | data sets | code | " +
           " | ".join(f"P={p}" for p in (64, 512, 2048, 8192)) + " |",
           "|---|---|---:|---|" + "---:|" * 4]
    keys = []
    for r in res["rows"]:
        k = (r["backend"], r["weights"], r["datasets"], r["code"])
        if k not in keys:
            keys.append(k)
    for k in keys:
        by = {r["ranks"]: r["step_cpu_ms_median"] for r in res["rows"]
              if (r["backend"], r["weights"], r["datasets"], r["code"]) == k}
        out.append(f"| {k[0]} | {'atoms' if k[1] else '-'} | {k[2]} | {k[3]} | " +
                   " | ".join(f"{by.get(p, float('nan')):.2f}" for p in (64, 512, 2048, 8192))
                   + " |")
    out += ["", "Targets:", ""]
    for name, v in res["targets"].items():
        out.append(f"* {name}: " + ", ".join(f"{a} {b:.3g}" if isinstance(b, float) else
                                             f"{a} {b}" for a, b in v.items()))
    if "balance" in res:
        out += ["", "Balance: max over mean of the per-rank atoms a step (N = 1e6, 5 steps):", "",
                *rank_cost_figures.balance().strip().splitlines()]
    if "heldout" in res:
        out += ["", "Held out: weighted steps at other batch sizes and N:", "",
                *rank_cost_figures.heldout().strip().splitlines()]
    if small:
        out += ["", "2-8 ranks, new / legacy ms a step (fastest of 7 interleaved rounds; the "
                "ratio: median of the rounds' ratios):", ""]
        for r in small["rows"]:
            out.append(f"* {r['backend']}, weights={r['weights']}, {r['datasets']} data set(s), "
                       f"P={r['ranks']}: {r['new_ms']:.2f} / {r['legacy_ms']:.2f} "
                       f"({r['new_over_legacy']:.2f})")
    return out


SECTIONS: list[Section] = [
    Section("Targets", ("make bench", "BENCH_CLUSTER=1 make bench"),
            ("bench/loaders/compare.py", "bench/loaders/training.py", "bench/loaders/tables.py"),
            ("loaders.json", "training.json") + CLUSTERS, _targets),
    Section("Loaders side by side, one host",
            ("python -m bench.loaders.compare --ranks 2,4,8 --steps 12 --repeats 3",),
            ("bench/loaders/compare.py", "bench/loaders/baselines.py", "bench/ddstore/real.py"),
            ("loaders.json",), _loaders,
            ("bench/loaders_hydragnn.png", "bench/loaders_oc20.png", "bench/loaders_memory.png")),
    Section("Why targets are missed (read with the numbers above)",
            ("python -m bench.loaders.compare --ranks 2,4,8 --steps 12 --repeats 3",),
            ("bench/loaders/tables.py",), ("loaders.json",), lambda d: list(t.NOTES)),
    Section("Across hosts (emulated cluster)",
            ("python -m bench.loaders.compare --cluster 2x2@1gbit --steps 16 --repeats 3 "
             "--out bench/results/loaders_cluster.json",
             "python -m bench.loaders.compare --cluster 2x2@200mbit --steps 16 --repeats 3 --profile "
             "bench/results/profile-cluster-200mbit.json "
             "--out bench/results/loaders_cluster_200mbit.json"),
            ("bench/loaders/compare.py",), CLUSTERS, _clusters, make_bench="BENCH_CLUSTER=1"),
    Section("Fixed per-step cost: fetch against the real DDStore and the memcpy floor",
            ("python -m bench.loaders.compare --loaders onesided,auto,ddstore-real --batches "
             "4,32,128,256 --steps 12 --repeats 2 --pss-every 3 "
             "--out bench/results/loaders_fetch_i21_{before,after}.json",
             "mpiexec -n {2,4} python -m mpi4py -m bench.fetch.profile --between collate "
             "--steps 15 --batches 32,128,256 --out bench/results/fetch_profile_i21_n{2,4}.json"),
            ("bench/loaders/compare.py", "bench/fetch/profile.py"),
            ("loaders_fetch_i21_after.json", "loaders_fetch_i21_before.json",
             "fetch_profile_i21_n2.json", "fetch_profile_i21_n4.json"), _fetch_cost,
            make_bench="no"),
    Section("Batched reads: DDStore 954ef59's get_batch (methods 0 and 1) against MDLoader, "
            "fetch only",
            ("python -m bench.ddstore.batched --rounds 5 --steps 6",
             "python -m bench.ddstore.batched --cluster 2x2@1gbit --rounds 5 --steps 6 --merge"),
            ("bench/ddstore/batched.py", "bench/ddstore/layouts.py", "bench/ddstore/figures.py",
             "tools/build_ddstore.sh"),
            ("ddstore_batched.json",), lambda d: ddstore_figures.table(d["ddstore_batched.json"])),
    Section("Keeping a GPU fed (trainer stand-in at GPU step rates, 2 shared cores)",
            ("python -m bench.gpu.rate --steps 10 --repeats 1",), ("bench/gpu/rate.py",
                                                                   "bench/gpu/feeders.py"),
            ("gpu_rate.json",), _gpu_rate("bench/gpu_rate.png", "`docs/gpu-feeding.md`"),
            ("bench/gpu_rate.png",)),
    Section("A producer that does not need the trainer's GIL (compiled kernels)",
            ("python -m bench.gil.targets --steps 200 --repeats 2 --rounds 3 --ranks 1,2",
             "git worktree add /tmp/t 12a65ad && PYTHONPATH=/tmp/t python /tmp/t/bench/"
             "producer_cost.py --producer process --kernels auto --rounds 1 --steps 100 "
             "--out bench/results/producer_cost_process.json"),
            ("bench/gil/targets.py", "bench/gil/producer_cost.py", "bench/gpu/rate.py"),
            ("producer_cost.json", "gpu_rate_gilfree.json", "gpu_rate_gilfree_numpy.json",
             "producer_cost_process.json", "gpu_rate_gilfree_queue.json"),
            lambda d: gil_free.tables(d["producer_cost.json"], d.get("gpu_rate_gilfree.json"),
                                      d.get("gpu_rate_gilfree_numpy.json"),
                                      d.get("producer_cost_process.json"),
                                      d.get("gpu_rate_gilfree_queue.json"))
            + ["Method and reading: `docs/gil-free-batches.md`."],
            ("bench/gpu_rate_gilfree.png", "bench/gpu_rate_gilfree_numpy.png")),
    Section("Keeping a GPU fed, with a core a rank (16-core H200 node)",
            ("python -m bench.gpu.rate --steps 50 --repeats 2 "
             "--out bench/results/gpu_rate_h200.json --figure bench/gpu_rate_h200.png",),
            ("bench/gpu/rate.py", "bench/gpu/feeders.py"), ("gpu_rate_h200.json",),
            _gpu_rate("bench/gpu_rate_h200.png", "`docs/gpu-feeding.md`"),
            ("bench/gpu_rate_h200.png",), make_bench="no"),
    Section("HydraGNN on a GPU (one H200 node)",
            ("bash tools/gpu_demo.sh",
             "python -m bench.gpu.demo bench/results/gpu_demo_epochs.log --machine ... --date "
             "2026-12-04"), ("tools/gpu_demo.sh", "bench/gpu/demo.py"), ("gpu_demo.json",),
            lambda d: gpu_demo.table(d["gpu_demo.json"]),
            make_bench="on a CUDA node"),
    Section("Replica groups across hosts: the grid the estimator was developed on",
            ("python -m bench.groups.cluster --rates 200mbit,1gbit --shapes 2x2,4x1 --kinds hydragnn,oc20 "
             "--batches 4,32,256",), ("bench/groups/cluster.py", "bench/ties.py"), ("groups.json",),
            _groups("groups.json"), make_bench="BENCH_CLUSTER=1"),
    Section("Replica groups across hosts: held out (shapes and rates the estimator was not "
            "developed on)",
            ("python -m bench.groups.cluster --rates 300mbit,500mbit --shapes 3x2,4x1 --kinds "
             "hydragnn,oc20 --batches 4,32,256 --out groups_heldout.json",),
            ("bench/groups/cluster.py", "bench/ties.py"), ("groups_heldout.json",),
            _groups("groups_heldout.json"), make_bench="no"),
    Section("Replica groups: read once and copy, or every group reads",
            ("python -m bench.groups.cluster --loading",), ("bench/groups/cluster.py",),
            ("groups_loading.json",), _loading, make_bench="no"),
    Section("Replica groups on paper: Perlmutter and Frontier, 64-2048 ranks (model output)",
            ("python -m bench.groups.model",), ("bench/groups/model.py",),
            ("groups_model.json",), lambda d: groups_model.table(d["groups_model.json"])),
    Section("Training (HydraGNN)", ("python -m bench.loaders.training",), ("bench/loaders/training.py",),
            ("training.json",), _training, ("bench/training.png",)),
    Section("Backend choice on one host (estimator accuracy)",
            ("python -m bench.estimator.accuracy",),
            ("bench/estimator/accuracy.py", "bench/estimator/plots.py"),
            ("estimator_accuracy.json",), _estimator,
            ("bench/estimator_pred_vs_meas.png", "bench/estimator_crossover_perlmutter.png")),
    Section("Backend choice across 2 emulated hosts (estimator accuracy)",
            ("python -m bench.estimator.cluster",), ("bench/estimator/cluster.py",),
            ("estimator_cluster.json",), _estimator_cluster, ("bench/estimator_cluster.png",),
            make_bench="BENCH_CLUSTER=1"),
    Section("Backend choice on varied clusters (tune half and held-out half)",
            ("for c in 2x1@100mbit 2x2@1gbit 4x1@300mbit 3x1@500mbit 3x2@300mbit 2x3@100mbit; do "
             "python -m bench.estimator.backend_choice --shapes $c --batches 1,16,256,512 --rounds 6 "
             "--max-rounds 16 --seq-budget 150 --config-budget 60 --append; done",),
            ("bench/estimator/backend_choice.py", "bench/estimator/choice_worker.py", "bench/ties.py"),
            ("backend_choice.json",), _backend_choice, ("bench/backend_choice.png",),
            make_bench="BENCH_CLUSTER=1"),
    Section("Several data sets in one store", ("mpiexec -n 4 python -m mpi4py bench/probes/"
                                               "multi.py --steps 15 --rounds 3",),
            ("bench/fetch/multi.py",), ("multi.json",), _multi, make_bench="no"),
    Section("Progress across hosts under MPICH: MDLoader's poller and MPICH_ASYNC_PROGRESS",
            ("python -m bench.fetch.async_progress --rounds 2",),
            ("bench/fetch/async_progress.py",), ("async_progress.json",),
            lambda d: figures.async_progress_lines(d["async_progress.json"]), make_bench="no"),
    Section("Scale on paper (model output)", ("python -m bench.estimator.scale_model",), ("bench/estimator/scale_model.py",),
            ("scale_perlmutter.json",), _scale, ("bench/scale_perlmutter.png",)),
    Section("Per-rank cost against the number of ranks (mdloader rank-cost, one process)",
            ("python -m bench.estimator.rank_cost", "python -m bench.estimator.rank_cost --small-only"),
            ("bench/estimator/rank_cost.py",), ("rank_cost.json", "rank_cost_small.json"), _rank_cost,
            ("bench/rank_cost.png",)),
    Section("fairchem: max_atoms as a cap, and the 4-data-set mix's state",
            ("python -m bench.fairchem.batches",), ("bench/fairchem/batches.py",),
            ("fairchem_batches.json",), _fairchem),
    Section("Conversion rate against ranks (mdloader convert, OC20-like .aselmdb shards)",
            ("python -m bench.convert.rate",), ("bench/convert/rate.py",),
            ("convert_rate.json",), convert_rate.section),
    Section("Load peak: memory while a store loads, over records + index",
            ("python -m bench.store.load_peak",), ("bench/store/load_peak.py",), ("load_peak.json",),
            lambda d: load_peak.table(d["load_peak.json"])),
    _markdown("Data-set scale: index and order per rank",
              ("python -m bench.scale.dataset --samples 20000000",), ("bench/scale/dataset.py",),
              "dataset_scale", make_bench="yes"),
    _markdown(f"{_SR_TITLE}: loaders, training, per-step cost (first run; its loaders "
              "table superseded by the same-harness re-run at b5124e3 below)",
              ("python -m bench.scale.step",
               f"python {_SR} --pre A.json,B.json --cur C.json,D.json --train-pre T.json "
               "--train-cur U.json --step bench/results/scale_step.json"),
              (_SR, "bench/scale/step.py"), "scale_regression"),
    _regression(": the two 4-rank cells re-checked (older harness; superseded by the re-checks "
                "at b5124e3 below)", "--ab bench/results/scale_regression_ab",
                "scale_regression_ab", (_SR, "bench/scale/collective_step_cpu.py")),
    _regression(" at b5124e3: loaders, reduced grid, same harness",
                "--pre bench/results/scale_regression_grid/pre_1.json,bench/results/"
                "scale_regression_grid/pre_4.json --cur bench/results/scale_regression_grid/"
                "cur_2.json,bench/results/scale_regression_grid/cur_3.json "
                "--out bench/results/scale_regression_grid", "scale_regression_grid"),
    _regression(" at b5124e3: OC20, 4 ranks, batch 4",
                "--ab bench/results/scale_regression_oc20_ab --title 'Before/after the compact "
                "index at b5124e3: OC20, 4 ranks, batch 4, same harness' "
                "--out bench/results/scale_regression_oc20", "scale_regression_oc20_ab"),
    _regression(" at b5124e3: molecules, 2 ranks, batch 32, collective",
                "--ab bench/results/scale_regression_h2x32_ab --title 'Before/after the compact "
                "index at b5124e3: hydragnn, 2 ranks, batch 32, collective, same harness' "
                "--out bench/results/scale_regression_h2x32", "scale_regression_h2x32_ab"),
]

OTHER_RESULTS: list[Other] = [
    Other("backend_choice_auto_real.log", ("python -m bench.estimator.backend_choice --shapes 3x1@500mbit "
                                           "--auto-real ...",),
          ("bench/estimator/backend_choice.py",), ("docs/choosing-a-backend.md",)),
    Other("ddstore_coll_ab_n2.json", ("PYTHONPATH=build/ddstore-954ef59 mpiexec -n 2 python -m "
                                      "mpi4py bench/ddstore/collective_ab.py --dataset hydragnn "
                                      "--batches 4 --steps 150",),
          ("bench/ddstore/collective_ab.py",), ("docs/benchmarks.md",)),
    Other("coll_progress.json", ("python -m bench.fetch.coll_progress",),
          ("bench/fetch/coll_progress.py",), ("docs/how-it-works.md",)),
    Other("fetch_ab_i21.json", ("mpiexec -n 2 python -m mpi4py -m bench.fetch.trees_ab TREE OUT",),
          ("bench/fetch/trees_ab.py",), ("docs/gpu-feeding.md",)),
    Other("gpu_demo_epochs.log", ("bash tools/gpu_demo.sh",), ("tools/gpu_demo.sh",),
          ("docs/gpu-feeding.md",)),
    Other("gpu_rate_h200_process.log", ("python -m bench.gpu.rate --loaders "
                                        "onesided-process,auto-process ...",),
          ("bench/gpu/rate.py",), ("docs/gpu-feeding.md",)),
    Other("gpu_rate_producer.json", ("python -m bench.gpu.rate --steps 100 --repeats 2 --out "
                                     "bench/results/gpu_rate_producer.json",),
          ("bench/gpu/rate.py",), ("docs/gpu-feeding.md",)),
    Other("producer_cost_ab.json", ("python -m bench.gil.producer_cost --before 619021b "
                                    "--rounds 4",),
          ("bench/gil/producer_cost.py",), ("docs/gpu-feeding.md",)),
    Other("producer_cost_ab_onejoin.json", ("python -m bench.gil.producer_cost --before HEAD~1 "
                                            "--rounds 4",),
          ("bench/gil/producer_cost.py",), ("docs/gpu-feeding.md",)),
    Other("scale_step.json", ("python -m bench.scale.step",), ("bench/scale/step.py",),
          ("bench/results/scale_regression.md",)),
    Other("profile-*.json", ("mdloader calibrate (on each emulated cluster, by bench/groups/cluster.py, "
                             "bench/estimator/backend_choice.py, bench/estimator/cluster.py)",),
          ("bench/groups/cluster.py", "bench/estimator/backend_choice.py"),
          ("the auto runs of the sections above (their inputs)",)),
]

#: scripts ``make bench`` (tools/bench.sh) runs; every other script of bench/ is a helper they
#: import, and one-off probes (A/B of two trees, profiles) live in bench/probes/
ENTRY_POINTS = ("loaders.py", "ddstore_batched.py", "rank_cost.py", "fairchem_batches.py",
                "convert_rate.py", "load_peak.py", "gpu_rate.py", "gil_free.py", "gpu_demo.py",
                "training.py", "scale.py",
                "groups_model.py", "dataset_scale.py", "scale_step.py", "estimator_accuracy.py",
                "estimator_cluster.py", "backend_choice.py", "groups.py", "report.py")
HELPERS = ("baselines.py", "bench_plots.py", "choice_worker.py", "ddstore_real.py",
           "ddstore_layouts.py", "ddstore_figures.py",
           "estimator_plots.py", "gpu_feeders.py", "plan_loader.py", "ties.py", "report_tables.py",
           "sections.py", "figures.py", "rank_cost_figures.py", "fairchem_figures.py")
