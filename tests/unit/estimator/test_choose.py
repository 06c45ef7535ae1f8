"""The initial choice from the cost model (the online decision: test_estimator_online.py)."""

import numpy as np

from mdloader_plugin.estimator import choose_initial, get_profile


def test_choose_initial_picks_cheapest_and_explains():
    d = choose_initial(2048, 4, 1, np.full(100, 12000), get_profile("perlmutter"))
    assert d.backend == min(d.predicted_s, key=d.predicted_s.get) == "onesided"
    assert "perlmutter" in d.reason and "P=2048" in d.reason
    assert d.log_line().startswith("MDLOADER-BACKEND backend=onesided switched=no")
