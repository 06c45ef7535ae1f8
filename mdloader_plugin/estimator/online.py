"""The online trial: measure both backends on the job's own steps, settle on the faster one.

The cost model's pick (``choose.py``) is only as good as the profile it reads; the job's own steps
are the ground truth. :class:`OnlineTrial` is a pure state machine (no MPI, no clock): the loader
asks it which backend serves the next step, runs that step, and feeds back **the slowest rank's
time from the start of the fetch to a ready batch** (fetch + decode + collate: what the trainer
pays), reduced with MAX over ranks, so every rank sees identical inputs and takes identical
decisions at identical steps. The loader also keeps the backend that is not serving *inactive*
(``Backend.set_active``: its progress thread paused), so each backend is measured in the state it
will run in; a probe beside the other backend's running thread measured the collective 2x too
fast across hosts (measured on the emulated cluster).

Schedule (``window`` steps a block, the first ``warmup`` of each block not counted: a switch
touches cold buffers and caches)::

    round 1:  current x window, other x window         -> decide, or (close) another round
    round 2:  other x window, current x window         (ABBA: drift in the machine's load cancels)
    ...       at most ``max_rounds``, in ABBA pairs after the first (never a trailing odd round)
    then      the winner for ``recheck_after`` steps, then what balances all counted steps (one
              round in reverse order after round 1 alone, else one more ABBA pair), final decision

Statistics: per backend, the mean of its counted steps without the slowest one (one stall is
luck and forgiven; stalls that recur are paid by the trainer and so count); a step over
``stall_factor`` x the backend's median is reported as a stall. Rounds go on while the two
estimates are within ``close`` of each other, and, with ``alpha`` set, while a rank test of the
two backends' counted steps (Mann-Whitney, two-sided, :func:`rank_test_p`) cannot tell them apart
at ``alpha``: a difference inside the step-to-step noise needs more steps, not a decision (with
lognormal noise of sigma 0.5 it cut wrong picks of a 20% slower backend from 15-22% to 1-5%).
The rank test is off by default: tuned on the measured half of
``bench/estimator/backend_choice.py``'s grid
(2026-12-05, after the emulated cluster stopped stalling), it never helped and once cost +71%
(2 hosts x 3 ranks, 100mbit, molecules batch 256: recurring 1-4 s collective stalls, and the
longer probe it asked for let them decide). Up to ``max_rounds``, or ``cheap_rounds`` while the
counted steps took less than ``probe_budget_s`` in all (cheap steps buy statistical power for
almost nothing). A switch needs the other backend faster by more than ``margin``. A probe is skipped
when the model predicts the other backend more than ``skip_ratio`` times slower (not when the
profile never saw a network the job
spans: :func:`blind_to_network`), and abandoned once two counted steps are *each* more than
``abandon_ratio`` times slower (one stall is no reason; no re-check then). Every decision is one
``MDLOADER-BACKEND`` log line (:meth:`OnlineTrial.pop_events`; the loader logs them).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from .choose import Decision


def robust_step(times) -> float:
    """Mean of `times` without the slowest one (all of them when fewer than 3)."""
    t = np.sort(np.asarray(times, dtype=np.float64))
    return float(t[:-1].mean() if t.size >= 3 else t.mean())


def rank_sum(a, b) -> tuple[float, float]:
    """Mann-Whitney rank-sum statistic of samples `a` and `b`: the rank sum of `a` minus its
    expectation, and its variance (average ranks for ties, with the tie correction; (0, 0) when
    there is nothing to rank)."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    n1, n2 = x.size, y.size
    n = n1 + n2
    if not n1 or not n2:
        return 0.0, 0.0
    _, inv, counts = np.unique(np.concatenate([x, y]), return_inverse=True, return_counts=True)
    ranks = (np.cumsum(counts) - (counts - 1) / 2.0)[inv]  # average ranks of ties
    var = n1 * n2 / 12.0 * ((n + 1) - float(np.sum(counts ** 3 - counts)) / (n * (n - 1)))
    return float(ranks[:n1].sum() - n1 * (n + 1) / 2.0), max(var, 0.0)


def rank_test_p(a, b) -> float:
    """Two-sided p-value of the Mann-Whitney rank-sum test of samples `a` and `b` (normal
    approximation with the tie correction; 1.0 when there is nothing to rank). A rank test: one
    stall moves it by one rank, not by its size."""
    from math import erfc, sqrt

    d, var = rank_sum(a, b)
    return float(erfc(abs(d) / sqrt(2.0 * var))) if var > 0 else 1.0


def stalls(times, factor: float) -> int:
    """Steps slower than `factor` x the median."""
    t = np.asarray(times, dtype=np.float64)
    return int(np.count_nonzero(t > factor * np.median(t))) if t.size else 0


def blind_to_network(profile, num_nodes: int) -> bool:
    """True when the job spans nodes but the profile was calibrated on one node: its inter-node
    figures are copies of intra-node ones, so the model's ratio must not excuse skipping the
    probe (measured: such a profile predicted one-sided 31x faster across emulated hosts, where
    collective was faster)."""
    prov = getattr(profile, "provenance", None) or {}
    return (num_nodes > 1 and prov.get("kind") == "calibrated"
            and int(prov.get("nodes", 1)) < 2)


class OnlineTrial:
    """Measure the chosen backend, probe the other, decide (and re-check once) whether to switch.

    Usage (identical on every rank)::

        trial = OnlineTrial(decision)
        while not trial.done:
            backend = trial.backend_for_next_step()   # make it active, the others inactive
            t = <one step with backend to a ready batch; allreduce MAX>
            trial.record(t)
            for d in trial.pop_events(): log(d.log_line())
        trial.result.backend                          # serve with it from now on
    """

    def __init__(self, decision: Decision, window: int = 6, margin: float = 0.05,
                 skip_ratio: float = 10.0, abandon_ratio: float = 3.0, *, warmup: int = 1,
                 close: float = 0.15, max_rounds: int = 4, recheck_after: int = 100,
                 stall_factor: float = 4.0, alpha: float | None = None,
                 cheap_rounds: int = 16, probe_budget_s: float = 2.0):
        if window < warmup + 1 or warmup < 0 or not 0 <= margin < 1 or max_rounds < 1 \
                or (alpha is not None and not 0 < alpha < 1):
            raise ValueError(f"need window > warmup >= 0, margin in [0, 1), max_rounds >= 1, "
                             f"alpha in (0, 1) or None; got window={window} warmup={warmup} "
                             f"margin={margin} max_rounds={max_rounds} alpha={alpha}")
        self.alpha, self.probe_budget_s = alpha, probe_budget_s
        self.cheap_rounds = max(cheap_rounds, max_rounds)
        self.decision, self.window, self.warmup, self.margin = decision, window, warmup, margin
        self.skip_ratio, self.abandon_ratio, self.close = skip_ratio, abandon_ratio, close
        # rounds come in ABBA pairs after the first, so a drift cancels: a limit of 3 means 4
        max_rounds += max_rounds > 1 and max_rounds % 2
        self.cheap_rounds += self.cheap_rounds > 1 and self.cheap_rounds % 2
        self.max_rounds, self.recheck_after, self.stall_factor = (max_rounds, recheck_after,
                                                                  stall_factor)
        self.current = decision.backend
        others = sorted(k for k in decision.predicted_s if k != self.current)
        self.other = min(others, key=decision.predicted_s.__getitem__) if others else None
        self.times: dict[str, list[float]] = {self.current: []}
        self.result: Decision | None = None  # the latest decision (interim until `done`)
        self.done = False
        self.rounds, self.rechecked = 0, False
        self._queue: deque = deque()  # (backend, counted) of the coming steps
        self._events: list[Decision] = []
        if self.other is None:
            self._finish(self.current, "only one backend available", final=True)
        elif self._skip():
            pass
        else:
            self.times[self.other] = []
            self._plan_round(self.current, self.other)

    # -- the loader's side -------------------------------------------------------------------
    def backend_for_next_step(self) -> str:
        """Which backend the loader must use for its next step."""
        if self.done:
            return self.result.backend
        return self._queue[0][0]

    def record(self, seconds: float) -> None:
        """Feed the max-over-ranks time of the step just run with `backend_for_next_step()`."""
        if self.done:
            return
        name, counted = self._queue.popleft()
        if counted:
            self.times[name].append(float(seconds))
            if self._abandon(name):
                return
        if not self._queue:
            self._round_over()

    def pop_events(self) -> list[Decision]:
        """Decisions taken since the last call (each is one log line)."""
        out, self._events = self._events, []
        return out

    # -- internals ---------------------------------------------------------------------------
    def _plan_round(self, first: str, second: str) -> None:
        self.rounds += 1
        for name in (first, second):
            self._queue.extend([(name, False)] * self.warmup
                               + [(name, True)] * (self.window - self.warmup))

    def _skip(self) -> bool:
        pred = self.decision.predicted_s
        ratio = pred[self.other] / max(pred[self.current], 1e-30)
        if ratio > self.skip_ratio:
            self._finish(self.current, f"kept {self.current}: model predicts {self.other} "
                                       f"{ratio:.1f}x slower, probe skipped", final=True)
            return True
        return False

    def _abandon(self, name: str) -> bool:
        keep = self.current if self.result is None else self.result.backend
        probe = self.times[name]
        if name == keep or not self.times[keep] or len(probe) < 2:
            return False
        # the fastest counted step: one stall among the first two (a median of two is their
        # mean) read as 9x slower and abandoned winning probes (issue 15, 4 hosts x 1 rank)
        ratio = float(np.min(probe)) / robust_step(self.times[keep])
        if ratio <= self.abandon_ratio:
            return False
        self._queue.clear()
        self._finish(keep, f"kept {keep}: probe of {name} measured {ratio:.1f}x slower, "
                           "abandoned", final=True)
        return True

    def _round_over(self) -> None:
        keep = self.current if self.result is None else self.result.backend
        probe = _other_of(keep, self.times)
        est = {k: robust_step(v) for k, v in self.times.items() if v}
        ratio = est[probe] / est[keep]
        # A decision is taken after round 1 (AB: far from close) or after a whole ABBA pair,
        # never after a trailing odd round (ABBAAB): there the probe's steps sit later on
        # average than the kept backend's, and a drift of the machine's speed biases the ratio
        # (+2% at 1%/step;
        # tests/unit/estimator/test_online.py::test_abba_rounds_cancel_a_linear_drift).
        unpaired = self.rounds > 1 and self.rounds % 2
        if self.result is None and (unpaired or (self.rounds < self._cap() and (
                abs(ratio - 1) < self.close or not self._told_apart(keep, probe)))):
            first, second = (keep, probe) if self.rounds % 2 == 0 else (probe, keep)
            self._plan_round(first, second)
            return
        recheck = self.result is not None
        winner = probe if ratio < 1 - self.margin else keep
        self._finish(winner, self._reason(keep, probe, winner, est, recheck),
                     final=recheck or self.recheck_after <= 0)
        if not self.done:
            # The re-check keeps every counted step balanced: after round 1 alone (AB) one round
            # in reverse order (BA) completes an ABBA (a gap between the pairs does not matter
            # for a linear drift); after a whole pair, another pair. One round of (winner,
            # loser) would measure the loser last.
            self._queue.extend([(winner, False)] * self.recheck_after)
            if self.rounds % 2:
                self._plan_round(self.other, self.current)
            else:
                loser = _other_of(winner, self.times)
                self._plan_round(winner, loser)
                self._plan_round(loser, winner)

    def _told_apart(self, keep: str, probe: str) -> bool:
        """The rank test separates the two backends' counted steps at ``alpha`` (always, when
        ``alpha`` is None: the estimates alone decide)."""
        return self.alpha is None or rank_test_p(self.times[keep], self.times[probe]) < self.alpha

    def _cap(self) -> int:
        """Rounds the first decision may take: ``cheap_rounds`` while the counted steps took
        less than ``probe_budget_s``, else ``max_rounds``."""
        spent = sum(sum(v) for v in self.times.values())
        return self.cheap_rounds if spent < self.probe_budget_s else self.max_rounds

    def _reason(self, keep: str, probe: str, winner: str, est: dict, recheck: bool) -> str:
        what = "re-check" if recheck else "measured"
        n = ", ".join(f"{k} {len(v)} steps" + (f" ({s} stalls)" if (s := stalls(
            v, self.stall_factor)) else "") for k, v in sorted(self.times.items()))
        if winner != keep:
            head = f"switched to {winner}: {what} {est[keep] / est[winner]:.2f}x faster than {keep}"
        else:
            verdict = "agrees" if est[probe] >= est[keep] else "within margin"
            head = (f"kept {keep}: {what} {verdict} ({probe} {est[probe] / est[keep]:.2f}x of "
                    f"{keep})")
        return (f"{head}; step to a ready batch, mean without the slowest, {self.rounds} "
                f"round(s), margin {self.margin:.0%}; {n}")

    def _finish(self, backend: str, reason: str, final: bool) -> None:
        measured = {k: robust_step(v) for k, v in self.times.items() if v}
        self.result = Decision(backend, dict(self.decision.predicted_s), reason, measured,
                               switched=backend != self.decision.backend)
        self.done = final
        self._events.append(self.result)


def _other_of(name: str, times: dict) -> str:
    return next(k for k in times if k != name)



__all__ = ["OnlineTrial", "blind_to_network", "rank_sum", "rank_test_p",
           "robust_step", "stalls"]
