"""The data-set scale settings (``order``, ``index``, ``index_share``; ``options.SCALE``) reach
the loader from every front end: the HydraGNN config, the fairchem loader group and
``build_loader``, ``mdloader check`` and ``mdloader estimate``; a bad value is one line naming
the key."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.integrations.hydragnn import config
from mdloader_plugin.core.options import SCALE, check_scale

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "recipes" / "hydragnn" / "demo.yaml"
GROUPS = [ROOT / "mdloader_plugin" / "integrations" / "fairchem" / "conf" / "loader"
          / "mdloader.yaml",
          ROOT / "recipes" / "fairchem" / "multi" / "loader" / "mdloader.yaml"]


def _one_line(exc, *words):
    msg = str(exc.value)
    assert "\n" not in msg and all(w in msg for w in words), msg


# -- HydraGNN config ---------------------------------------------------------------------------
def test_hydragnn_defaults_and_overrides():
    cfg = config.load(DEMO)
    assert {k: cfg["mdloader"][k] for k in ("order", "index", "index_share")} == \
        {o.name: o.default for o in SCALE}
    cfg = config.load(DEMO, ["mdloader.order=feistel", "mdloader.index=full"])
    assert (cfg["mdloader"]["order"], cfg["mdloader"]["index"]) == ("feistel", "full")


@pytest.mark.parametrize("override, words", [
    ("mdloader.order=random", ["demo.yaml: mdloader.order: 'random' is unknown",
                               "auto, torch, feistel"]),
    ("mdloader.index=tiny", ["mdloader.index: 'tiny' is unknown", "compact, full"]),
    ("mdloader.index_share=host", ["mdloader.index_share: 'host' is unknown", "rank, node"]),
    ("mdloader.index_share=node", ["mdloader.index_share: node needs the compact index"]),
    ("mdloader.orde=torch", ["mdloader.orde is not an option", "order"]),
])
def test_hydragnn_bad_value_is_one_line_naming_the_key(override, words):
    extra = ["mdloader.index=full"] if override.endswith("=node") else []
    with pytest.raises(ConfigError) as err:
        config.load(DEMO, [override, *extra])
    _one_line(err, *words)


def test_hydragnn_feistel_with_several_files_is_refused():
    with pytest.raises(ConfigError) as err:
        config.load(DEMO, ["Dataset.path=[a.bp, b.bp]", "mdloader.order=feistel"])
    _one_line(err, "mdloader.order: feistel is not available with several Dataset.path")


def test_hydragnn_builder_passes_them_to_store_and_loader(split_file):
    from mdloader_plugin.integrations.hydragnn import loaders

    cfg = config.load(DEMO, [f"Dataset.path={split_file}", "mdloader.order=feistel",
                             "mdloader.index=full", "mdloader.prefetch=0"])
    built = loaders.build_mdloader(cfg, None, lambda rec: rec, labels=("trainset", "valset"))
    try:
        for ld in built:
            assert ld.schedule.order == "feistel"
            assert ld.store.index.describe().startswith("full")
            assert ld.memory_report()["order"] == "feistel"
    finally:
        loaders.close(built)
    cfg = config.load(DEMO, [f"Dataset.path={split_file}", "mdloader.prefetch=0"])
    (ld,) = loaders.build_mdloader(cfg, None, lambda rec: rec, labels=("trainset",))
    try:  # the defaults: torch below 4M samples, the compact index
        assert ld.schedule.order == "torch" and ld.store.index.describe().startswith("compact")
    finally:
        loaders.close([ld])


# -- fairchem ----------------------------------------------------------------------------------
@pytest.mark.parametrize("group", GROUPS, ids=["one-file", "multi"])
def test_fairchem_group_passes_every_scale_key_to_both_loaders(group):
    import yaml

    cfg = yaml.safe_load(group.read_text())
    for opt in SCALE:
        assert cfg[opt.name] == opt.default, (group, opt.name)
        for split in ("train_dataloader", "val_dataloader"):
            assert cfg[split][opt.name] == f"${{loader.{opt.name}}}", (group, split, opt.name)


@pytest.fixture
def fairchem_loader(monkeypatch):
    pytest.importorskip("fairchem.core")
    from mdloader_plugin.integrations.fairchem import loader as fl

    monkeypatch.setattr(fl, "_world", lambda: None)  # one process, no MPI world
    yield fl
    fl.close_all()


def test_fairchem_build_loader_passes_them(fairchem_loader, split_file):
    ld = fairchem_loader.build_loader(split_file, collate_fn=list, batch_size=2, prefetch=0,
                                      order="feistel", index="full")
    assert ld.loader.schedule.order == "feistel"
    assert ld.loader.store.index.describe().startswith("full")
    ld = fairchem_loader.build_loader(split_file, collate_fn=list, batch_size=2, prefetch=0,
                                      order="torch", index_share="rank")
    assert ld.loader.schedule.order == "torch"
    assert ld.loader.store.index.describe().startswith("compact")


@pytest.mark.parametrize("kw, words", [
    ({"order": "shuffled"}, ["loader.order: 'shuffled' is unknown", "auto, torch, feistel"]),
    ({"index": "dense"}, ["loader.index: 'dense' is unknown"]),
    ({"index": "full", "index_share": "node"}, ["loader.index_share: node needs the compact"]),
    # several data sets take feistel now (a keyed permutation a data set, no per-entry list);
    # max_atoms packs its own batches, which feistel cannot order
    ({"order": "feistel", "max_atoms": 100}, ["loader.order: feistel orders batch_size batches"]),
])
def test_fairchem_bad_value_is_one_line_naming_the_key(fairchem_loader, split_file, kw, words):
    with pytest.raises(ConfigError) as err:
        fairchem_loader.build_loader(None if "datasets" in kw else split_file, collate_fn=list,
                                     batch_size=2, **kw)
    _one_line(err, *words)


# -- CLI ---------------------------------------------------------------------------------------
def _cli(*args):
    return subprocess.run([sys.executable, "-m", "mdloader_plugin", *map(str, args)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_estimate_reports_index_and_order_a_rank():
    base = ["estimate", "--ranks", 2048, "--batch-size", 32, "--sample-bytes", 5000,
            "--num-samples", 100_000_000, "--ranks-per-node", 8, "--json"]
    got = {}
    for extra in ([], ["--order", "torch"], ["--index", "full"], ["--index-share", "node"]):
        r = _cli(*base, *extra)
        assert r.returncode == 0, r.stderr
        got[" ".join(extra)] = json.loads(r.stdout)["scale_bytes"]
    assert got[""] == {"index": 412_500_000, "order": 64}  # 4.125 B a sample (bound), feistel
    assert got["--order torch"]["order"] == 400_000_000
    assert got["--index full"]["index"] == 1_600_000_000
    assert got["--index-share node"]["index"] == 412_500_000 // 8  # counted once a node


@pytest.mark.parametrize("args, words", [
    (["--order", "fast"], "--order: 'fast' is unknown; choose one of auto, torch, feistel"),
    (["--index", "full", "--index-share", "node"], "--index-share: node needs the compact"),
])
def test_estimate_bad_value_is_one_line(args, words):
    r = _cli("estimate", "--ranks", 4, "--batch-size", 4, "--sample-bytes", 100, *args)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and words in lines[0], r.stderr


def test_check_scale_fills_defaults_and_names_the_key():
    assert check_scale({"order": None}) == {o.name: o.default for o in SCALE}
    with pytest.raises(ConfigError) as err:
        check_scale({"index": 3}, lambda k: f"here.{k}")
    _one_line(err, "here.index: 3 is unknown")


def test_a_wrapped_user_error_is_reported_as_its_one_line(capsys):
    """Hydra wraps build_loader's ConfigError in an InstantiationException: the CLI still prints
    the ConfigError's line (exit 2), not the wrapper's message with a traceback."""
    from mdloader_plugin.mpi.world import report_error

    try:
        try:
            check_scale({"order": "random"}, lambda k: f"loader.{k}")
        except ConfigError as inner:
            raise RuntimeError("Error in call to target 'build_loader':") from inner
    except RuntimeError as exc:
        code = report_error(exc)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1].endswith("loader.order: 'random' is unknown; choose one "
                                                 "of auto, torch, feistel")
