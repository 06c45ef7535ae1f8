"""The loader: the iterable of batches (``loader``), opening a store (``open``), the fetch
watchdog (``watchdog``) and the end-to-end check (``verify``)."""
