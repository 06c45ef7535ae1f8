"""Which samples each rank takes: the epoch order (``order``), the per-rank plan (``sampler``)
and how several data sets share an epoch (``mixes/``).

``mdloader_plugin.sampling`` was one module before the package was laid out in layers; its public
names are still importable from here."""


from .mixes import (  # noqa: F401  (the package's face)
    DataSets, Mix, MIXES, get_mix, parse_spec,
)

__all__ = ["DataSets", "Mix", "MIXES", "get_mix", "parse_spec"]
