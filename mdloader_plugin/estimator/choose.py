"""Choosing a backend at start, from the cost model.

:func:`choose_initial` evaluates every cost model for the job (world size, ranks per node, the
samples a rank really gets per step, the data set's record sizes, a machine profile) and picks
the cheapest. The job's own measured steps then decide (``online.py``: :class:`OnlineCheck`).
Each decision yields one log line (``MDLOADER-BACKEND ...``) with the backend, predicted and
measured per-step times and the reason.
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
