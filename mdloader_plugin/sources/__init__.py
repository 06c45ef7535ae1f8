"""Where samples come from: ADIOS2 files in HydraGNN's layout, converters into them, synthetic data.

Nothing here imports MPI: a reader is told which block of samples to read.
"""
