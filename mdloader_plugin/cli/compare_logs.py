"""``mdloader compare-logs``: epoch times of several training runs side by side.

Reads the ``MDLOADER-EPOCH`` lines (see :mod:`mdloader_plugin.core.epochlog`) that the HydraGNN and
fairchem integrations write into the trainer's own log, for MDLoader and for the baselines alike,
and prints one row a run: loader, backend, epochs, median epoch seconds, data-wait share and the
speed-up against the first run given. ``--plot`` draws epoch time against epoch for every run.

Choices and their trade-offs:

- The median epoch time, not the mean: the first epoch pays one-off costs (window creation,
  calibration check, allocator warm-up) and would dominate a short run's mean.
- Data-wait share is ``sum(data_wait_s) / sum(wall_s)`` over all epochs (time-weighted), so a
  long epoch counts for what it cost.
- One log may hold several runs (``run=``/``loader=`` differ); each becomes its own row. An epoch
  logged twice in one run (a restarted job appending to the same log) keeps its last line.
- HydraGNN's own ``Epoch: NN, Train Loss ...`` lines carry no times: a log with only those still
  gets a row (its epoch count) with ``n/a`` times and a note saying why. fairchem's own logs have
  per-step metrics only, so a fairchem log needs the integration's epoch lines.
"""

from __future__ import annotations

import argparse
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from ..core.epochlog import TAG, parse_epoch_lines
from ..core.errors import ConfigError, DataError

# HydraGNN 3.0's per-epoch line in logs/<name>/run.log (no time on it).
_HYDRAGNN_EPOCH = re.compile(r"Epoch:\s*(\d+),\s*Train Loss")


@dataclass
class Run:
    """The epochs of one training run, as read from a log."""

    name: str
    loader: str
    source: Path
    epochs: dict[int, dict] = field(default_factory=dict)  # epoch -> record (has wall_s)
    untimed_epochs: int = 0                                  # HydraGNN lines without times

    @property
    def timed(self) -> bool:
        return bool(self.epochs)

    @property
    def num_epochs(self) -> int:
        return len(self.epochs) if self.timed else self.untimed_epochs

    @property
    def backend(self) -> str:
        seen: list[str] = []
        for rec in self.ordered():
            b = str(rec.get("backend", "-"))
            if b not in seen:
                seen.append(b)
        return ",".join(seen) or "-"

    def ordered(self) -> list[dict]:
        return [self.epochs[e] for e in sorted(self.epochs)]

    def walls(self) -> list[float]:
        return [float(r["wall_s"]) for r in self.ordered()]

    def median_s(self) -> float | None:
        return statistics.median(self.walls()) if self.timed else None

    def wait_share(self) -> float | None:
        total = sum(self.walls())
        if not self.timed or total <= 0:
            return None
        return sum(float(r.get("data_wait_s", 0.0)) for r in self.ordered()) / total


def register(sub) -> None:
    p = sub.add_parser(
        "compare-logs", help="compare epoch times of training logs (MDLoader vs baselines)",
        description="Read MDLOADER-EPOCH lines from trainer logs (HydraGNN's logs/<run>/run.log, "
                    "fairchem's run log) and print one row a run: loader, backend, epochs, "
                    "median epoch seconds, data-wait share, speed-up against the first run.",
        epilog="example (baseline first, so the speed-up column is MDLoader's):\n"
               "  mdloader compare-logs logs/gin-demo-hydragnn logs/gin-demo-mdloader "
               "--plot epochs.png",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("logs", nargs="+", metavar="LOG",
                   help="log files, or run directories (HydraGNN's logs/<run>, fairchem's "
                        "<run_dir>/<run>); the first run is the reference for the speed-up")
    p.add_argument("--plot", metavar="FILE.png", help="also draw epoch time per epoch per run")
    p.set_defaults(func=run)


# Where the trainers put their log inside a run directory: HydraGNN, then fairchem (launch.py).
RUN_DIR_LOGS = ("run.log", "logs/train.log")


def resolve_log(text: str) -> Path:
    """The log file behind `text`: the file itself, or the trainer's log in a run directory."""
    path = Path(text)
    if path.is_dir():
        path = next((path / n for n in RUN_DIR_LOGS if (path / n).is_file()), path / "run.log")
    if not path.is_file():
        raise DataError(f"{text}: no such log file (pass a trainer log, e.g. logs/<run>/run.log)")
    return path


def run_name(path: Path) -> str:
    """A name for a run whose lines carry none: the run directory for ``<run>/run.log``."""
    if path.name == "run.log":
        return path.resolve().parent.name
    return path.resolve().parents[1].name if path.name == "train.log" else path.stem


def read_runs(path: Path) -> list[Run]:
    """Every run found in one log file, in the order of their first epoch line."""
    lines = path.read_text(errors="replace").splitlines()
    runs: dict[tuple[str, str], Run] = {}
    for rec in parse_epoch_lines(lines):
        if "wall_s" not in rec or "epoch" not in rec:
            continue
        key = (str(rec.get("run", run_name(path))), str(rec.get("loader", "?")))
        run_ = runs.setdefault(key, Run(key[0], key[1], path))
        run_.epochs[int(rec["epoch"])] = rec
    if runs:
        return list(runs.values())
    untimed = {int(m.group(1)) for m in map(_HYDRAGNN_EPOCH.search, lines) if m}
    if untimed:
        return [Run(run_name(path), "hydragnn", path, untimed_epochs=len(untimed))]
    raise DataError(f"{path}: no {TAG} lines (nor HydraGNN 'Epoch: NN, Train Loss' lines); was "
                    f"it written by `mdloader train ...` or an MDLoader integration?")


def table(runs: list[Run]) -> list[list[str]]:
    """Rows of strings (header first) for `runs`; speed-up is against ``runs[0]``."""
    ref = runs[0].median_s()
    rows = [["run", "loader", "backend", "epochs", "median epoch s", "data-wait share",
             "speed-up"]]
    for r in runs:
        med, share = r.median_s(), r.wait_share()
        speed = f"{ref / med:.2f}x" if ref is not None and med else "n/a"
        rows.append([r.name, r.loader, r.backend if r.timed else "-", str(r.num_epochs),
                     f"{med:.3f}" if med is not None else "n/a",
                     f"{100 * share:.1f}%" if share is not None else "n/a", speed])
    return rows


def render(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
                     for row in rows)


def plot(runs: list[Run], out: str) -> None:
    """Epoch wall time against epoch, one line per timed run, written as a PNG to `out`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    timed = [r for r in runs if r.timed]
    if not timed:
        raise DataError("--plot: none of the logs has epoch times to draw")
    fig, ax = plt.subplots(figsize=(7, 4))
    for r in timed:
        ax.plot(sorted(r.epochs), r.walls(), marker="o",
                label=f"{r.name} ({r.loader}, {r.backend})")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("epoch")
    ax.set_ylabel("epoch wall time (s)")
    ax.set_ylim(bottom=0)
    ax.set_title("Epoch time per run")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    try:
        fig.savefig(out, dpi=100)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--plot {out}: cannot write the PNG ({exc})") from None
    finally:
        plt.close(fig)


def run(args) -> int:
    runs = [r for text in args.logs for r in read_runs(resolve_log(text))]
    print(render(table(runs)))
    for r in runs:
        if not r.timed:
            print(f"note: {r.source}: HydraGNN's 'Epoch: NN, Train Loss' lines carry no times; "
                  f"train with `mdloader train hydragnn` to get {TAG} lines")
    if args.plot:
        plot(runs, args.plot)
        print(f"wrote {args.plot}")
    return 0
