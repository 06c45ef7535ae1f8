"""``mdloader check``: all backends serve identical bytes; every sample exactly once an epoch."""

from __future__ import annotations

import argparse

from ..core.errors import ConfigError

EPILOG = """\
examples:
  mpiexec -n 3 mdloader check data/mols.bp --batch-size 7 --epochs 2
  mpiexec -n 4 mdloader check data/oc20/oc20.bp --batch-size 32 --backends onesided,collective \\
      --drop-last
  mpiexec -n 4 mdloader check data/mols.bp --batch-size 8 --group-size 1,2,4   # replica groups
  mpiexec -n 4 mdloader check mols=data/gfm/molecules.bp data/gfm/slabs.bp data/gfm/bulk.bp \\
      --sampling temperature:temperature=2 --batch-size 8 --epochs 2   # several data sets

On success the last line is
  check ok: P ranks, E epochs, N samples, backends onesided,collective,auto
and the exit code 0; on a difference it names the first epoch/step/rank/sample id and exits 1."""


def register(sub) -> None:
    p = sub.add_parser("check", help="verify backends agree byte for byte and coverage is exact",
                       description=__doc__.split(":", 1)[1].strip(), epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", nargs="+",
                   help="ADIOS2 file in HydraGNN's layout; several (NAME=PATH or PATH, the name "
                        "defaulting to the file's dataset_name) are loaded as one store")
    p.add_argument("--sampling", default=None, metavar="TYPE[:KEY=VALUE,...]",
                   help="how several data sets share an epoch: proportional (default), "
                        "explicit:ratios={a: 1, b: 2}, balanced, temperature:temperature=2, "
                        "weighted:ratios=[1,0.5], weights:weights=[0.7,0.3], "
                        "hydragnn:oversampling=true,num_samples=N")
    p.add_argument("--label", default="trainset", help="which split to load (default: trainset)")
    p.add_argument("--batch-size", type=int, default=32, help="samples per rank per step")
    p.add_argument("--epochs", type=int, default=1, help="epochs to check (default: 1)")
    p.add_argument("--seed", type=int, default=0, help="sampler seed (default: 0)")
    p.add_argument("--backends", default="onesided,collective,auto",
                   help="comma-separated backends to compare (default: all)")
    p.add_argument("--drop-last", action="store_true", help="drop the uneven tail (else pad)")
    p.add_argument("--no-shuffle", action="store_true", help="keep file order")
    p.add_argument("--prefetch", type=int, default=2, help="prefetch depth (default: 2)")
    p.add_argument("--max-memory-per-rank", default=None, metavar="SIZE",
                   help="stop before loading if a rank's store would exceed SIZE (bytes or e.g. "
                        "4GiB); the error says how many ranks would fit")
    p.add_argument("--group-size", "--width", default=None, metavar="W[,W...]",
                   help="replica group sizes to check one after the other (e.g. 1,2,4; 'all' = "
                        "one group of every rank, the default); each must serve the same bytes "
                        "as the first, and the bytes that crossed a node are reported")
    add_scale_arguments(p)
    p.set_defaults(func=run)


def add_scale_arguments(p, order: bool = True) -> None:
    """``--order`` (if `order`), ``--index``, ``--index-share``: the :data:`options.SCALE
    <mdloader_plugin.core.options.SCALE>` settings, described by their table rows."""
    from ..core.options import SCALE, scale_choices

    choices = scale_choices()
    for opt in SCALE:
        if opt.name == "order" and not order:
            continue
        p.add_argument("--" + opt.name.replace("_", "-"), default=opt.default,
                       metavar="|".join(choices[opt.name]),
                       help=f"{_plain(opt.meaning)} (default: {opt.default})")


def _plain(text: str) -> str:
    return text.replace("`", "").replace("%", "%%").removesuffix(" See scale.")


def scale_options(args) -> dict:
    """The validated scale settings of parsed CLI `args` (a bad value names its option)."""
    from ..core.options import check_scale

    given = {k: getattr(args, k) for k in ("order", "index", "index_share") if hasattr(args, k)}
    return check_scale(given, lambda key: "--" + key.replace("_", "-"))


def parse_backends(text: str) -> list[str]:
    from ..backends import BACKENDS

    names = [b.strip() for b in text.split(",") if b.strip()]
    if not names:
        raise ConfigError("--backends is empty; list e.g. onesided,collective,auto")
    for b in names:
        if b != "auto" and b not in BACKENDS:
            raise ConfigError(f"--backends: unknown backend {b!r}; choose from "
                              f"{', '.join(sorted(BACKENDS))}, auto")
    return names


def validate(args) -> list[str]:
    if args.batch_size <= 0:
        raise ConfigError(f"--batch-size must be a positive integer, got {args.batch_size}")
    if args.epochs <= 0:
        raise ConfigError(f"--epochs must be a positive integer, got {args.epochs}")
    if args.prefetch < 0:
        raise ConfigError(f"--prefetch must be >= 0, got {args.prefetch}")
    from ..core.units import parse_bytes

    parse_bytes(args.max_memory_per_rank, "--max-memory-per-rank")
    parse_group_sizes(args.group_size)
    scale = scale_options(args)
    if scale["order"] == "feistel" and (len(args.data) > 1 or args.sampling is not None):
        raise ConfigError("--order feistel is not available with several data sets (their "
                          "epoch is an expanded list); use auto or torch")
    return parse_backends(args.backends)


def parse_group_sizes(text) -> list:
    """``--group-size 1,2,all`` -> [1, 2, None] (None: all ranks); no option -> [None]."""
    from ..mpi.groups import parse

    if text is None:
        return [None]
    sizes = [parse(t, "--group-size") for t in str(text).split(",") if t.strip()]
    if not sizes or "auto" in sizes:
        raise ConfigError(f"--group-size: list sizes to check, e.g. 1,2,4 (got {text!r}); "
                          "`mdloader estimate --group-size auto` shows what auto would pick")
    return sizes


def run(args) -> int:
    from ..loader.verify import compare_served
    from ..core.log import get_logger
    from ..mpi.world import World, abort_on_error, agree

    world = World.detect()
    log = get_logger(world.rank)
    with abort_on_error(world.comm):
        backends = agree(world, validate, args)  # the same on every rank: rank 0 says it once
        sizes = parse_group_sizes(args.group_size)
        ref, lines = None, []
        for w in sizes:
            first, served, traffic, store = _check_one(world, args, backends, w, log)
            if first is None and ref is not None:
                first = compare_served(ref, served, world.rank, f"group_size {w or world.size} "
                                       f"served other bytes than group_size "
                                       f"{sizes[0] or world.size}")
            ref = ref if ref is not None else served
            firsts = world.comm.allgather(None if first is None else str(first))
            moved = {k: world.comm.allreduce(v) for k, v in traffic.items()}
            lines.append(f"group_size {w or world.size}: {moved['off_node']} bytes crossed a "
                         f"node, {moved['on_node']} stayed on one (all ranks, all backends)")
            if any(f is not None for f in firsts):
                break
    bad = [f for f in firsts if f is not None]
    if bad:
        if world.rank == 0:
            print(f"check FAILED: {bad[0]}", flush=True)
        return 1
    if world.rank == 0:
        extra = ""
        if args.group_size is not None:
            print("\n".join(lines), flush=True)
            extra = ", group sizes " + ",".join(str(w or world.size) for w in sizes)
        print(f"check ok: {world.size} ranks, {args.epochs} epochs, {store.num_samples} samples, "
              f"backends {','.join(backends)}{extra}{_mix_note(store, args.sampling)}",
              flush=True)
    return 0


def _check_one(world, args, backends, group_size, log):
    """Collective: load the store with `group_size`, check it, close it."""
    from ..loader.open import same_data
    from ..loader.verify import run_check
    from ..store.shard import ShardStore

    same_data(world, args.data if len(args.data) > 1 else args.data[0], args.label)
    scale = scale_options(args)
    kw = dict(label=args.label, digests=True, max_memory_per_rank=args.max_memory_per_rank,
              group_size=group_size, index=scale["index"], index_share=scale["index_share"])
    if len(args.data) == 1 and args.sampling is None:
        store = ShardStore.from_file(world, args.data[0], **kw)
    else:
        store = ShardStore.from_files(world, args.data, **kw)
    served, traffic = {}, {}
    w = "" if group_size is None else f" (group_size {group_size})"
    first, _ = run_check(
        store, backends, batch_size=args.batch_size, epochs=args.epochs, seed=args.seed,
        shuffle=not args.no_shuffle, drop_last=args.drop_last, prefetch=args.prefetch,
        progress=lambda e, b: log.info(f"checked epoch {e} with {b}{w}"), served=served,
        traffic=traffic, sampling=args.sampling, order=scale["order"])
    store.close()
    return first, served, traffic, store


def _mix_note(store, sampling) -> str:
    """``; data sets a 30, b 12; sampling temperature: 42 an epoch`` for several data sets."""
    if "dataset_starts" not in store.meta:
        return ""
    import numpy as np

    from ..sampling.mixes import DataSets, parse_spec

    sets = DataSets.of_store(store)
    sizes = ", ".join(f"{n} {s}" for n, s in zip(sets.names, np.asarray(sets.sizes).tolist()))
    return f"; data sets {sizes}; sampling {parse_spec(sampling)['type']}"

