"""The loader: the iterable of batches (``loader``), opening a store (``open``), the fetch
watchdog (``watchdog``) and the end-to-end check (``verify``).

``mdloader_plugin.loader`` was one module before the package was laid out in layers; its public
names are still importable from here."""


from .loader import (  # noqa: F401  (the package's face)
    EpochStats, LocalSamples, MDLoader,
)

__all__ = ["EpochStats", "LocalSamples", "MDLoader"]
