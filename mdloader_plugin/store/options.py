"""The options a store is built with, in one record.

:class:`StoreOptions` travels from the caller (``open_store``, the CLI, a user's own loop)
through :meth:`ShardStore.from_file <mdloader_plugin.store.shard.ShardStore.from_file>` and the
load (:mod:`.load`) to :meth:`ShardStore.from_records
<mdloader_plugin.store.shard.ShardStore.from_records>`. The constructors still take every option
as a keyword (``digests=True``, ``group_size=2`` ...): keywords given beside ``options`` replace
its fields.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class StoreOptions:
    """How a store is built.

    Attributes:
        digests: keep an 8-byte digest of every record (the loader's byte checks).
        max_memory_per_rank: bytes or ``"4GiB"``; the load stops before reading data when a
            rank's load peak would exceed it (:mod:`.budget`). None: no check.
        group_size: replica groups of this many ranks (an int, None for all ranks, or a
            :class:`~mdloader_plugin.mpi.groups.Group`).
        index: ``"compact"`` or ``"full"`` (:mod:`.index`).
        index_share: ``"rank"`` or ``"node"`` (one compact index a node).
        replicate: ``"read"``, ``"copy"`` or None/``"auto"`` (:mod:`.replicate`).
        load_chunk_bytes: bytes of records read and encoded at a time while loading (None: the
            default of :func:`.budget.load_chunk`).
    """

    digests: bool = False
    max_memory_per_rank: int | str | None = None
    group_size: object = None
    index: str = "compact"
    index_share: str = "rank"
    replicate: str | None = None
    load_chunk_bytes: int | None = None

    @classmethod
    def of(cls, options: "StoreOptions | None" = None, **kw) -> "StoreOptions":
        """`options` (default: all defaults) with the keywords given replacing its fields (None
        means not given, as in the constructors' signatures); an unknown keyword is a TypeError
        naming the known ones, as a signature would raise."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(kw) - names)
        if unknown:
            raise TypeError(f"unexpected store option {unknown[0]!r} (options: "
                            f"{', '.join(sorted(names))})")
        base = options if options is not None else cls()
        return replace(base, **{k: v for k, v in kw.items() if v is not None})
