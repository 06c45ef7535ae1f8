"""The job's shared decisions: the warning line that names ranks whose inputs differ, and the
decision made once (one process here; MPI jobs: tests/unit/mpi/test_one_decision.py)."""

import pytest

from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.mpi.agree import (SETTINGS_FIX, agree_settings, compare_inputs, decide_once,
                                       digest, disagreement_line, job_settings, rank_text,
                                       warning_line)


def test_rank_text_spans():
    assert rank_text([0]) == "rank 0"
    assert rank_text([1, 2, 3]) == "ranks 1-3"
    assert rank_text([0, 2, 5, 6, 7]) == "ranks 0,2,5-7"


def test_warning_line_names_every_value_and_its_ranks():
    values = [["a.json", "3"], ["b.json", "3"], ["b.json", "3"], ["b.json", "1"]]
    line = warning_line(["profile", "ranks on the node"], values, "the backend choice")
    assert line == ("MDLOADER-AGREE warning: ranks' inputs to the backend choice differ "
                    "(profile: rank 0 a.json; ranks 1-3 b.json | ranks on the node: ranks 0-2 "
                    "3; rank 3 1); every rank uses rank 0's decision")
    many = warning_line(["x"], [[str(r)] for r in range(10)], "it")
    assert "ranks" not in many.split("(")[1].split(";")[0] and "; and 6 more)" in many


def test_one_process_decides_alone():
    assert decide_once(None, lambda x: x + 1, 1) == 2
    assert compare_inputs(None, {"profile": "a"}) == []
    with pytest.raises(ConfigError):
        decide_once(None, lambda: (_ for _ in ()).throw(ConfigError("bad")))
    assert digest("a") == digest("a") != digest("b") and 0 <= digest("a") < 2**63


def test_disagreement_line_names_each_setting_its_values_and_ranks():
    line = disagreement_line(["seed"], [["0"], ["1"], ["1"]])
    assert line == f"ranks disagree on seed: rank 0 0; ranks 1-2 1: {SETTINGS_FIX}"
    two = disagreement_line(["MDLOADER_FETCH_TIMEOUT", "seed"],
                            [["0 (off)", "0"], ["30", "0"], ["30", "1"]], "fix it")
    assert two == ("ranks disagree on MDLOADER_FETCH_TIMEOUT: rank 0 0 (off); ranks 1-2 30 | "
                   "seed: ranks 0-1 0; rank 2 1: fix it")


def test_agree_settings_on_comm_self_runs_the_checks_and_returns():
    """One rank (COMM_SELF): the checks run, their result comes back, their error is raised as
    it is (nothing to agree with)."""
    from types import SimpleNamespace

    from mpi4py import MPI

    world = SimpleNamespace(comm=MPI.COMM_SELF, rank=0, size=1)
    assert agree_settings(world, {"seed": "0"}, lambda a, b=0: a + b, 1, b=2) == 3
    assert agree_settings(world, {"seed": "0"}) is None
    with pytest.raises(ConfigError, match="bad") as err:
        agree_settings(world, {"seed": "0"}, lambda: (_ for _ in ()).throw(ConfigError("bad")))
    assert not getattr(err.value, "agreed", False)


def test_job_settings_read_equal_meanings_alike(monkeypatch):
    for name in ("MDLOADER_FETCH_TIMEOUT", "MDLOADER_MPI_MAX_COUNT", "HYDRAGNN_MAX_NUM_BATCH"):
        monkeypatch.delenv(name, raising=False)
    unset = job_settings()
    assert unset == {"MDLOADER_FETCH_TIMEOUT": "600", "MDLOADER_MPI_MAX_COUNT": str(2**31 - 1),
                     "HYDRAGNN_MAX_NUM_BATCH": "unset"}
    monkeypatch.setenv("MDLOADER_FETCH_TIMEOUT", "600.0")
    monkeypatch.setenv("MDLOADER_MPI_MAX_COUNT", f" {2**31 - 1}")
    assert job_settings() == unset
    monkeypatch.setenv("MDLOADER_FETCH_TIMEOUT", "-1")  # 0 or less: off, as 0
    monkeypatch.setenv("HYDRAGNN_MAX_NUM_BATCH", "3")
    assert job_settings()["MDLOADER_FETCH_TIMEOUT"] == "0 (off)"
    assert job_settings()["HYDRAGNN_MAX_NUM_BATCH"] == "3"
    monkeypatch.setenv("HYDRAGNN_MAX_NUM_BATCH", "x")  # compared as written; its error follows
    assert job_settings()["HYDRAGNN_MAX_NUM_BATCH"] == "'x'"


def test_loader_settings_name_what_steers_the_schedule():
    import numpy as np

    from mdloader_plugin.loader.args import loader_settings

    a = loader_settings(4, True, 0, False, "auto", 2, np.ones(5), None, None, None)
    b = loader_settings(np.int64(4), 1, np.int64(0), 0, "auto", 2, np.ones(5), None, None, None)
    assert a == b  # numpy scalars and truthy values read as the plain values
    assert loader_settings(4, True, 0, False, "auto", 2, np.arange(5.0), None, None,
                           None)["balance_weights"] != a["balance_weights"]
    assert {"seed", "batch_size", "shuffle", "drop_last", "order", "prefetch", "sampling",
            "balance_weights", "batches", "max_steps", "MDLOADER_FETCH_TIMEOUT",
            "MDLOADER_MPI_MAX_COUNT", "HYDRAGNN_MAX_NUM_BATCH"} <= set(a)


@pytest.mark.mpi
def test_on_real_ranks():
    from mpirun import mpirun

    r = mpirun(4, ["tests/mpi_scripts/agree_checks.py"], timeout=120)
    assert r.returncode == 0 and "agree ok" in r.stdout, r.stdout[-2000:] + r.stderr[-3000:]
