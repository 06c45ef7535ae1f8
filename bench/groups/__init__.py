"""Replica groups: every group size and backend on the emulated cluster, and on paper."""
