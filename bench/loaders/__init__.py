"""MDLoader against the loaders users would otherwise pick, and HydraGNN training with each."""
