"""The figures pages quote about loaders side by side, across hosts, and training (``FIGURES``: key
-> function; merged into ``bench.figures.FIGURES``)."""

from __future__ import annotations

import math
from typing import Callable

from bench.loaders import tables as report_tables
from bench.reporting import load as _load, of as _of, pct as _pct, span as _range


def _train(variant_prefix: str) -> list[dict]:
    return [s for s in _load("training.json")["summary"] if s["variant"].startswith(variant_prefix)]


def training_native_wait() -> str:
    return _pct(_train("hydragnn-native")[0]["data_wait_share"])


def training_mdloader_wait() -> str:
    w = [s["data_wait_share"] * 100 for s in _train("mdloader")]
    return _range(min(w), max(w), ".1f", "%")


def training_speedup() -> str:
    native = _train("hydragnn-native")[0]["epoch_s"]
    r = [native / s["epoch_s"] for s in _train("mdloader")]
    return _range(min(r), max(r), ".1f", "x")


def training_mdloader_epoch() -> str:
    e = [s["epoch_s"] for s in _train("mdloader")]
    return _range(min(e), max(e), ".2f", " s")


def training_native_epoch() -> str:
    return f"{_train('hydragnn-native')[0]['epoch_s']:.2f} s"


def training_ranks() -> str:
    return str(_load("training.json")["ranks"])


def _by(name: str) -> tuple[list, dict]:
    rows = _load(name)["rows"]
    keys = sorted({(r["dataset"], r["ranks"], r["batch"]) for r in rows})
    return keys, {(r["dataset"], r["ranks"], r["batch"], r["loader"]): r for r in rows}


def _step_ratio(name: str, base: str) -> list[float]:
    keys, by = _by(name)
    return [by[(*k, base)]["step_median_s"] / by[(*k, "auto")]["step_median_s"]
            for k in keys if k[2] >= 32 and (*k, base) in by and (*k, "auto") in by]


def loaders_vs_file() -> str:
    r = _step_ratio("loaders.json", "file")
    return _range(min(r), max(r), ".0f", "x")


def loaders_vs_ddstore() -> str:
    r = _step_ratio("loaders.json", "ddstore")
    return _range(min(r), max(r), ".1f", "x")


def cluster_1gbit_vs_ddstore() -> str:
    r = _step_ratio("loaders_cluster.json", "ddstore")
    return _range(min(r), max(r), ".1f", "x")


def loaders_auto_right() -> str:
    keys, by = _by("loaders.json")
    right = sum(by[(*k, "auto")].get("chosen_backend") == min(
        ("onesided", "collective"), key=lambda b, k=k: by[(*k, b)]["step_median_s"])
        for k in keys)
    return _of(right, len(keys))


def loaders_date() -> str:
    return _load("loaders.json")["machine"]["date"][:10]


def targets_table() -> str:
    """The targets table of RESULTS.md (one host, across hosts, training)."""
    clusters = [_load(n) for n in ("loaders_cluster.json", "loaders_cluster_200mbit.json")]
    lines = report_tables.targets(_load("loaders.json"), _load("training.json"), clusters)
    return "\n\n" + "\n".join(lines) + "\n\n"


def _cluster_geo(name: str) -> str:
    keys, by = _by(name)
    r = [by[(*k, "auto")]["step_median_s"] / min(by[(*k, "onesided")]["step_median_s"],
                                                  by[(*k, "collective")]["step_median_s"])
         for k in keys if (*k, "onesided") in by and (*k, "collective") in by]
    return f"{math.exp(sum(math.log(x) for x in r) / len(r)) - 1:+.1%}"


def cluster_200mbit_vs_ddstore(dataset: str) -> Callable[[], str]:
    def value() -> str:
        keys, by = _by("loaders_cluster_200mbit.json")
        r = [by[(*k, "ddstore")]["step_median_s"] / by[(*k, "auto")]["step_median_s"]
             for k in keys if k[0] == dataset and k[2] >= 32 and (*k, "ddstore") in by]
        return _range(min(r), max(r), ".1f", "x")
    return value


def _fetch_ratio(name: str, base: str) -> list[float]:
    keys, by = _by(name)
    return [by[(*k, base)]["fetch_median_s"] / by[(*k, "auto")]["fetch_median_s"]
            for k in keys if k[2] >= 32 and (*k, base) in by]


def loaders_vs_file_fetch() -> str:
    r = _fetch_ratio("loaders.json", "file")
    return _range(min(r), max(r), ",.0f", "x")


FIGURES: dict[str, Callable[[], str]] = {
    "targets.table": targets_table,
    "loaders.vs_file_fetch": loaders_vs_file_fetch,
    "cluster_1gbit.auto_geo": lambda: _cluster_geo("loaders_cluster.json"),
    "cluster_200mbit.auto_geo": lambda: _cluster_geo("loaders_cluster_200mbit.json"),
    "cluster_200mbit.vs_ddstore_molecules": cluster_200mbit_vs_ddstore("hydragnn"),
    "cluster_200mbit.vs_ddstore_oc20": cluster_200mbit_vs_ddstore("oc20"),
    "training.native_wait": training_native_wait,
    "training.mdloader_wait": training_mdloader_wait,
    "training.speedup": training_speedup,
    "training.mdloader_epoch": training_mdloader_epoch,
    "training.native_epoch": training_native_epoch,
    "training.ranks": training_ranks,
    "loaders.date": loaders_date,
    "loaders.vs_file": loaders_vs_file,
    "loaders.vs_ddstore": loaders_vs_ddstore,
    "loaders.auto_right": loaders_auto_right,
    "cluster_1gbit.vs_ddstore": cluster_1gbit_vs_ddstore,
}
