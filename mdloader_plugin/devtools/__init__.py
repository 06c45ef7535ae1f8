"""Test and benchmark infrastructure shipped with the package: the emulated multi-node cluster."""
