"""Choosing a backend: once from the cost model at start, then checked against measured steps.

:func:`choose_initial` evaluates every cost model for the job (world size, ranks per node, batch
size, the data set's record sizes, a machine profile) and picks the cheapest.

:class:`OnlineCheck` corrects a wrong model. It is a pure state machine (no MPI): the loader runs
the first ``window`` steps with the chosen backend, then ``window`` steps with the other one
(the probe), feeding each step's time **as the max over ranks** (the loader does the allreduce),
so every rank sees identical inputs and reaches the identical decision at the identical step —
never a divergent switch. It switches only when the other backend's median step is faster by more
than ``margin`` (default 5%): noise must not flip the choice. A probe is skipped when the model
predicts the other backend more than ``skip_ratio`` times slower, and abandoned after two steps
when it measures more than ``abandon_ratio`` times slower, so checking costs little when the
model is clearly right. Each decision yields one log line (``MDLOADER-BACKEND ...``) with the
backend, predicted and measured per-step times and the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .models import Workload, predict_all
from .profile import Profile, get_profile


@dataclass(frozen=True)
class Decision:
    """A backend choice with the per-step predictions it rests on."""

    backend: str
    predicted_s: dict[str, float]
    reason: str
    measured_s: dict[str, float] = field(default_factory=dict)
    switched: bool = False

    def log_line(self) -> str:
        """The one line that records this decision."""
        return (f"MDLOADER-BACKEND backend={self.backend} switched={'yes' if self.switched else 'no'}"
                f" predicted_s={_fmt(self.predicted_s)} measured_s={_fmt(self.measured_s)}"
                f' reason="{self.reason}"')


def _fmt(times: dict[str, float]) -> str:
    return ",".join(f"{k}:{v:.3e}" for k, v in sorted(times.items())) or "-"


def choose(workload: Workload, profile: "Profile | str | None" = None) -> Decision:
    """The backend with the smallest predicted step time for `workload`."""
    prof = get_profile(profile)
    pred = predict_all(workload, prof.params)
    best = min(sorted(pred), key=pred.__getitem__)
    other = min((k for k in pred if k != best), key=pred.__getitem__, default=best)
    ratio = pred[other] / pred[best] if pred[best] > 0 else float("inf")
    reason = (f"model ({prof.name}): {best} predicted {ratio:.2f}x faster than {other} "
              f"for P={workload.world_size} B={workload.batch_size} "
              f"mean record {workload.mean_bytes:.0f} B")
    return Decision(best, pred, reason)


def choose_initial(world_size: int, ranks_per_node: int, batch_size: int,
                   sample_sizes: np.ndarray, profile: "Profile | str | None" = None) -> Decision:
    """Runtime hook for ``backend="auto"``: the model's choice for this job at start."""
    w = Workload.from_sizes(int(world_size), int(batch_size), sample_sizes, int(ranks_per_node))
    return choose(w, profile)


class OnlineCheck:
    """Measure the chosen backend, probe the other, decide once whether to switch.

    Usage (identical on every rank)::

        check = OnlineCheck(decision)
        while not check.done:
            backend = check.backend_for_next_step()
            t = <run one step with backend; allreduce MAX of its time>
            check.record(t)
        final = check.result          # a Decision; log final.log_line() once (rank 0)
    """

    def __init__(self, decision: Decision, window: int = 5, margin: float = 0.05,
                 skip_ratio: float = 10.0, abandon_ratio: float = 2.0):
        if window < 1 or not 0 <= margin < 1:
            raise ValueError(f"window must be >= 1 and margin in [0, 1); got {window}, {margin}")
        self.decision, self.window, self.margin = decision, window, margin
        self.skip_ratio, self.abandon_ratio = skip_ratio, abandon_ratio
        self.current = decision.backend
        others = sorted(k for k in decision.predicted_s if k != self.current)
        self.other = min(others, key=decision.predicted_s.__getitem__) if others else None
        self.times: dict[str, list[float]] = {self.current: []}
        self.result: Decision | None = None
        if self.other is None:
            self._finish(self.current, "only one backend available")

    @property
    def done(self) -> bool:
        return self.result is not None

    def backend_for_next_step(self) -> str:
        """Which backend the loader must use for its next step."""
        if self.done:
            return self.result.backend
        return self.current if len(self.times[self.current]) < self.window else self.other

    def record(self, seconds: float) -> None:
        """Feed the max-over-ranks time of the step just run with `backend_for_next_step()`."""
        if self.done:
            return
        self.times.setdefault(self.backend_for_next_step(), []).append(float(seconds))
        if len(self.times[self.current]) == self.window and self.other not in self.times:
            self._maybe_skip_probe()
        elif self.other in self.times:
            self._maybe_decide()

    # -- internals ---------------------------------------------------------------------------
    def _median(self, name: str) -> float:
        return float(np.median(self.times[name]))

    def _maybe_skip_probe(self) -> None:
        pred = self.decision.predicted_s
        ratio = pred[self.other] / max(pred[self.current], 1e-30)
        if ratio > self.skip_ratio:
            self._finish(self.current, f"kept {self.current}: model predicts {self.other} "
                                       f"{ratio:.1f}x slower, probe skipped")

    def _maybe_decide(self) -> None:
        probe = self.times[self.other]
        cur = self._median(self.current)
        if len(probe) >= min(2, self.window) and self._median(self.other) > self.abandon_ratio * cur:
            self._finish(self.current, f"kept {self.current}: probe of {self.other} measured "
                                       f"{self._median(self.other) / cur:.1f}x slower, abandoned")
        elif len(probe) == self.window:
            self._decide(cur, self._median(self.other))

    def _decide(self, cur: float, oth: float) -> None:
        if oth < cur * (1 - self.margin):
            self._finish(self.other, f"switched to {self.other}: measured {cur / oth:.2f}x faster "
                                     f"than {self.current} (margin {self.margin:.0%})")
        else:
            verdict = "agrees" if oth >= cur else "within margin"
            self._finish(self.current, f"kept {self.current}: measurement {verdict} "
                                       f"({self.other} {oth / cur:.2f}x of {self.current}, "
                                       f"margin {self.margin:.0%})")

    def _finish(self, backend: str, reason: str) -> None:
        measured = {k: float(np.median(v)) for k, v in self.times.items() if v}
        self.result = Decision(backend, dict(self.decision.predicted_s), reason, measured,
                               switched=backend != self.decision.backend)
