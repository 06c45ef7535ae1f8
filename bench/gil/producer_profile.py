"""Where does MDLoader's producer thread spend a step? cProfile inside the thread, at GPU rate.

Runs under ``mpiexec``: every rank drives MDLoader (prefetch 2) with the GPU-rate trainer
stand-in (``bench/gpu/rate.py``: 25 % of the step GIL-held Python, the rest GIL-free) and profiles
only the producer thread (``cProfile`` enabled inside it). Rank 0 prints the data-wait share,
the producer's time per step and its top functions by own time; ``--out`` keeps the stats.

    mpiexec -n 2 python -m mpi4py -m bench.gil.producer_profile --data bench/work/oc20-1024.bp \\
        --batch 32 --step-ms 2 --steps 200 [--backend onesided] [--top 25] [--out prof.pstats]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time



def profiled_producer(prof: cProfile.Profile):
    """Patch ``Producer._run`` so the thread runs under ``prof``."""
    from mdloader_plugin.loader import producer as ld

    run = ld.Producer._run

    def _run(self):
        prof.enable()
        try:
            run(self)
        finally:
            prof.disable()

    ld.Producer._run = _run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--step-ms", type=float, default=2.0)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--backend", default="onesided")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--no-profile", action="store_true", help="time only (no cProfile overhead)")
    ap.add_argument("--out")
    a = ap.parse_args()

    import torch
    import torch_geometric.data  # noqa: F401  (a trainer has it; a first import is seconds)

    from bench.gpu.rate import Trainer, measure
    from bench.gpu.feeders import make
    from mdloader_plugin.core.log import get_logger
    from mdloader_plugin.store.shard import ShardStore
    from mdloader_plugin.mpi.world import World

    torch.set_num_threads(1)
    world = World.detect()
    get_logger(world.rank).setLevel("WARNING")
    prof = cProfile.Profile()
    if not a.no_profile:
        profiled_producer(prof)
    store = ShardStore.from_file(world, a.data)
    it, close = make(a.backend, store, a.data, world, a.batch, [])
    t0 = time.perf_counter()
    res = measure(world, it, Trainer(a.step_ms), a.steps, warm=16)
    wall = time.perf_counter() - t0
    close()
    store.close()
    if world.rank == 0:
        print(f"P={world.size} B={a.batch} step {a.step_ms:g} ms {a.backend}: data-wait "
              f"{100 * res['wait_share_max']:.1f}% (max over ranks), "
              f"{res['wait_ms_per_step_max']:.2f} ms/step waited, "
              f"{a.batch * world.size * a.steps / res['wall_s']:.0f} samples/s", flush=True)
        if not a.no_profile:
            s = io.StringIO()
            st = pstats.Stats(prof, stream=s)
            st.sort_stats("tottime").print_stats(a.top)
            print(f"producer thread, {a.steps + 16} steps in {wall:.2f} s:")
            print(s.getvalue())
            if a.out:
                st.dump_stats(a.out)
    world.close()


if __name__ == "__main__":
    main()
