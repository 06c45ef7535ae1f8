"""Performance estimator: which backend is faster for this job on this machine.

- ``models/``: one cost model a backend (formulas in their docstrings), a registry by name;
- ``profile.py`` + ``profiles/*.json``: machine numbers with sources (perlmutter, frontier, local);
- ``calibrate.py``: micro-benchmarks that measure a profile (``mdloader calibrate``);
- ``choose.py``: the choice at start from the model;
- ``online.py``: the online trial, the decision from the job's measured steps (probe,
  statistics, re-check).

Pure Python and numpy except ``calibrate`` (MPI); the loader owns all communication.
"""

from __future__ import annotations

from .choose import Decision, choose, choose_initial
from .models import MODELS, Workload, get_model, predict, predict_all
from .online import OnlineTrial
from .profile import Profile, ProfileError, available, get_profile

__all__ = ["MODELS", "Decision", "OnlineTrial", "Profile", "ProfileError",
           "Workload", "available", "choose", "choose_initial", "get_model", "get_profile",
           "predict", "predict_all"]
