"""The GIL-free producer: CPU a step, GIL-held and GIL-free, and the trainer's data-wait."""
