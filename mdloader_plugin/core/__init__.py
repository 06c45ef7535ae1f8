"""The bottom layer: errors, settings, the logger and the epoch log line. No MPI, no torch."""
