"""MDLoader against ORNL's DDStore: its per-sample gets, its batched reads,
collective against collective."""
