"""The backend estimator: its accuracy on one host and across emulated hosts,
its picks on varied clusters, per-rank cost and scale on paper."""
