"""Keeping a GPU fed: the trainer stand-in at GPU step rates, and HydraGNN on a GPU node."""
