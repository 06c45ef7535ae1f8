"""A TorchTNT callback that writes fairchem's per-epoch times as ``MDLOADER-EPOCH`` lines.

fairchem 2.x logs per-step metrics but no epoch time. `EpochLogCallback` goes in
``runner.callbacks`` and, on rank 0, logs one line per training epoch (through ``logging``, so it
lands on stdout and in the run's ``logs/train.log`` that the MPI launcher adds) with the format of
:mod:`mdloader_plugin.core.epochlog`, which ``mdloader compare-logs`` reads.

Times are measured by the callback itself, the same way for every loader: the epoch's wall time
runs from ``on_train_epoch_start`` to ``on_train_epoch_end`` (training steps only; evaluation comes
after), and data wait is the time spent inside the unit's ``get_next_train_batch`` (wrapped on
this unit instance at ``on_train_start``), which is also where graphs and atoms are counted
(rank 0's share). When the loader is MDLoader, its backend and its own ``fetch_s`` / ``decode_s``
are added; the baseline reports backend ``-``.

With ``step_losses=True`` every rank also logs ``MDLOADER-STEP epoch=E step=S loss=L`` after each
step (full float precision), which tests use to compare runs step by step.
"""

from __future__ import annotations

import logging
import time

from torchtnt.framework.callback import Callback

from ...core.epochlog import format_epoch_line

log = logging.getLogger("fairchem.mdloader")  # propagates to the root handlers fairchem sets up


def _rank() -> int:
    import torch.distributed as dist

    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


class EpochLogCallback(Callback):
    """Log ``MDLOADER-EPOCH`` (rank 0) and optionally ``MDLOADER-STEP`` (every rank) lines."""

    def __init__(self, run: str = "fairchem", loader: str = "fairchem", step_losses: bool = False):
        self.run, self.loader, self.step_losses = run, loader, step_losses
        self._reset()

    def _reset(self) -> None:
        self._t0 = time.perf_counter()
        self._wait = 0.0
        self._steps = self._samples = self._atoms = 0

    def on_train_start(self, state, unit) -> None:
        """Wrap the unit's ``get_next_train_batch`` (an instance attribute, nothing global) so
        every batch is timed and counted the same way whatever the loader is."""
        fetch = unit.get_next_train_batch

        def timed_fetch(state_, data_iter):
            t = time.perf_counter()
            batch = fetch(state_, data_iter)
            self._wait += time.perf_counter() - t
            natoms = getattr(batch, "natoms", None)
            if natoms is not None:
                self._samples += int(natoms.numel())
                self._atoms += int(natoms.sum())
            return batch

        unit.get_next_train_batch = timed_fetch

    def on_train_epoch_start(self, state, unit) -> None:
        self._reset()

    def on_train_step_end(self, state, unit) -> None:
        self._steps += 1
        if self.step_losses:
            loss = getattr(unit, "last_loss", None)
            loss = float(loss.item() if hasattr(loss, "item") else loss)
            log.info("MDLOADER-STEP rank=%d epoch=%d step=%d loss=%r", _rank(),
                     unit.train_progress.num_epochs_completed,
                     unit.train_progress.num_steps_completed, loss)

    def on_train_epoch_end(self, state, unit) -> None:
        wall = time.perf_counter() - self._t0
        stats = dict(getattr(state.train_state.dataloader, "epoch_stats", None) or {})
        extra = {k: f"{stats[k]:.4f}" for k in ("fetch_s", "decode_s") if k in stats}
        if _rank() == 0:
            line = format_epoch_line(
                run=self.run, loader=self.loader, backend=str(stats.get("backend", "-")),
                epoch=unit.train_progress.num_epochs_completed - 1, wall_s=wall,
                data_wait_s=self._wait, steps=self._steps, samples=self._samples,
                atoms=self._atoms, **extra)
            log.info(line)
