"""loader/watchdog: a rank that gives no sign of life for MDLOADER_FETCH_TIMEOUT aborts the job
with one line naming it and the ranks waited for (without MPI_THREAD_MULTIPLE: a fetch that
outlives 6 of them, the backstop, so a healthy stall shorter than that is never aborted); 0 turns
it off; a bad value is a ConfigError naming the variable."""

from __future__ import annotations

import re
import threading
import time

import pytest

from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.loader.watchdog import DEFAULT_TIMEOUT_S, ENV_VAR, FetchWatchdog, fetch_timeout

from mpirun import family_missing, mpirun


@pytest.mark.parametrize("value, want", [(None, DEFAULT_TIMEOUT_S), ("", DEFAULT_TIMEOUT_S),
                                         ("  ", DEFAULT_TIMEOUT_S), ("5", 5.0), ("0.5", 0.5),
                                         ("0", 0.0), ("-1", -1.0)])
def test_fetch_timeout_from_the_variable(monkeypatch, value, want):
    if value is None:
        monkeypatch.delenv(ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(ENV_VAR, value)
    assert fetch_timeout() == want
    assert DEFAULT_TIMEOUT_S == 600.0


@pytest.mark.parametrize("value", ["ten", "5s", "1e"])
def test_bad_value_names_the_variable(monkeypatch, value):
    monkeypatch.setenv(ENV_VAR, value)
    with pytest.raises(ConfigError) as e:
        fetch_timeout()
    assert str(e.value) == (f"MDLOADER_FETCH_TIMEOUT={value!r} is not a number of seconds; unset "
                            "it or give e.g. 600 (0 turns the watchdog off)")


class Aborts:
    def __init__(self):
        self.calls = 0
        self.fired = threading.Event()

    def __call__(self):
        self.calls += 1
        self.fired.set()


def test_late_fetch_fires_once_with_one_line(capsys):
    """No heartbeat (no MPI_THREAD_MULTIPLE): only a fetch in progress for 6 timeouts fires."""
    abort = Aborts()
    dog = FetchWatchdog(0.2, abort, rank=3)
    t0 = time.monotonic()
    dog.arm(epoch=2, step=7, backend="collective", waiting_for=lambda: [0, 1, 5])
    assert abort.fired.wait(20), "the watchdog never fired"
    waited = time.monotonic() - t0
    time.sleep(0.3)  # it fires once, then its thread ends
    dog.close()
    assert abort.calls == 1 and waited >= 6 * 0.2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.strip() == (
        "mdloader: error: [rank 3] step 7 of epoch 2: the collective fetch from rank(s) 0, 1, 5 "
        "did not complete in 1.2 s; a rank died, stopped or stalled this long (without "
        "MPI_THREAD_MULTIPLE ranks cannot see each other's heartbeat, so only a fetch this long "
        "counts): aborting the job (the limit is 6 x MDLOADER_FETCH_TIMEOUT)")


def test_fetch_waiting_3_timeouts_does_not_fire(capsys):
    """A peer alive but stalled 3 timeouts (an evaluation) while this rank's fetch waits: no
    rank can tell it from a dead one without the heartbeat, so nothing fires before 6."""
    abort = Aborts()
    dog = FetchWatchdog(0.2, abort, rank=0)
    dog.arm(0, 3, "collective", [1])
    assert not abort.fired.wait(3 * 0.2 + 0.2)
    dog.disarm()
    dog.close()
    assert abort.calls == 0 and capsys.readouterr().err == ""


def test_many_ranks_are_abbreviated(capsys):
    abort = Aborts()
    dog = FetchWatchdog(0.1, abort, rank=0)
    dog.arm(0, 0, "onesided", list(range(1, 21)))
    assert abort.fired.wait(20)
    dog.close()
    assert "rank(s) 1, 2, 3, 4, 5, 6, 7, 8, ... (20 ranks) did not" in capsys.readouterr().err


def test_disarmed_fetches_never_fire(capsys):
    abort = Aborts()
    dog = FetchWatchdog(0.2, abort, rank=0)
    for step in range(10):  # fetches well inside the deadline
        dog.arm(0, step, "onesided", [1])
        time.sleep(0.02)
        dog.disarm()
    assert not abort.fired.wait(0.8)  # 4 timeouts after the last disarm
    dog.close()
    assert abort.calls == 0 and capsys.readouterr().err == ""


def test_close_stops_the_thread():
    dog = FetchWatchdog(600, Aborts(), rank=0)
    assert dog._thread.is_alive()
    t0 = time.monotonic()
    dog.close()
    assert not dog._thread.is_alive() and time.monotonic() - t0 < 5


@pytest.mark.mpi
@pytest.mark.parametrize("family", ["openmpi", "mpich"])
def test_fetch_that_never_completes_aborts_the_job_naming_the_ranks(family):
    if family_missing(family):
        pytest.skip(family_missing(family))
    t0 = time.monotonic()
    r = mpirun(3, ["tests/mpi_scripts/watchdog_hang.py", "hang"], timeout=100,
               env={ENV_VAR: "2"}, family=family)
    wall = time.monotonic() - t0
    out = r.stdout + r.stderr
    assert r.returncode != 0, out[-3000:]
    assert "outlived" not in out and "did not end the job" not in out, out[-3000:]
    # Open MPI's MPI_ABORT banner (a run of dashes) can land on the end of the rank's line: the
    # launcher forwards the rank's stderr and writes its own to the same stream
    lines = [re.sub(r"-{20,}.*$", "", ln[ln.index("mdloader: error:"):])
             for ln in out.splitlines() if "mdloader: error:" in ln]
    assert lines, out[-3000:]
    # rank 1 watches rank 2 (the heartbeat ring): it names it and what its own fetch waits for
    assert lines == [
        "mdloader: error: [rank 1] rank 2 gave no sign of life for 2 s (last seen between steps): "
        "its process died or stopped; this rank's collective fetch of step 0 of epoch 0 waits "
        "for rank(s) 0, 2: aborting the job (raise MDLOADER_FETCH_TIMEOUT if a rank can "
        "legitimately be stopped this long)"], out[-3000:]
    assert wall < 60, wall  # 2 s deadline + start-up, not the stopped rank's 120 s


@pytest.mark.mpi
def test_timeout_0_starts_no_watchdog():
    r = mpirun(2, ["tests/mpi_scripts/watchdog_hang.py", "off"], timeout=100,
               env={ENV_VAR: "0"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "watchdog off ok" in r.stdout


@pytest.mark.mpi
def test_bad_value_stops_every_rank_with_the_variable_named():
    r = mpirun(2, ["tests/mpi_scripts/watchdog_hang.py", "off"], timeout=100,
               env={ENV_VAR: "soon"})
    assert r.returncode != 0
    assert "MDLOADER_FETCH_TIMEOUT='soon' is not a number of seconds" in r.stderr, r.stderr[-3000:]
    assert "watchdog off ok" not in r.stdout


def test_ring_beats_and_never_fires_while_its_successor_beats(capsys):
    """A ring of one (COMM_SELF: the rank watches itself): the beat moves every period, a fetch
    armed for 6 timeouts does not fire (a long fetch is no sign of death), close frees the
    window and leaves the beat at -1 (closed)."""
    from mpi4py import MPI

    abort = Aborts()
    dog = FetchWatchdog(0.2, abort, rank=0, comm=MPI.COMM_SELF)
    assert dog.ring and dog.period == 0.05
    words = dog.words
    dog.arm(1, 4, "collective", [1])
    assert list(words[1:]) == [1, 4]
    beat = int(words[0])
    assert not abort.fired.wait(1.2)
    assert words[0] > beat + 5
    dog.disarm()
    assert words[2] == -1
    dog.stop()
    assert words[0] == -1  # closed: a watcher stops watching this rank
    dog.close()
    assert abort.calls == 0 and capsys.readouterr().err == "" and dog.win is None
