"""Which samples each rank takes: the epoch's order (``order``), the schedule of every rank's
steps (``schedule``), a rank's own step plans (``planner``), how several data sets share an epoch
(``mixes/``), batch tables that replace the schedule (``node_budget``, ``max_atoms``) and the
whole-world step the tests compare with (``reference``: tests and benchmarks only)."""
