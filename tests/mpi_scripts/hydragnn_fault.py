"""``mdloader train hydragnn`` (the CLI's own ``main``) with rank 1's 3rd ``loss.backward()``
raising ``RuntimeError``, the way a CUDA out-of-memory or a NaN check would.

Usage: hydragnn_fault.py ARGS...   (the CLI's arguments: ``train hydragnn --config ...``)

The fault is injected here, on the test's side: rank 1 wraps ``torch.Tensor.backward`` before
calling the CLI; nothing in the package knows about it.
"""

import sys

import torch
from mpi4py import MPI

from mdloader_plugin.cli import main

if MPI.COMM_WORLD.Get_rank() == 1:
    calls = [0]
    backward = torch.Tensor.backward

    def failing_backward(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] == 3:
            raise RuntimeError("injected fault in rank 1's 3rd backward")
        return backward(self, *args, **kwargs)

    torch.Tensor.backward = failing_backward

sys.exit(main(sys.argv[1:]))
