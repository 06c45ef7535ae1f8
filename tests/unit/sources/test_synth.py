"""sources/synth: synthetic sets are a pure function of (kind, seed, index): any block of ranks
generates exactly the graphs a whole-set generation would."""

import numpy as np
import pytest

from mdloader_plugin.records import codec
from mdloader_plugin.sources import synth


def as_bytes(graphs):
    return [codec.encode(g).tobytes() for g in graphs]


@pytest.mark.parametrize("kind", ["hydragnn", "mlip"])
def test_blocks_equal_the_whole(kind):
    whole = as_bytes(synth.generate(kind, 11, 0, 40))
    parts = [as_bytes(synth.generate(kind, 11, lo, hi)) for lo, hi in ((0, 7), (7, 23), (23, 40))]
    assert sum(parts, []) == whole
    assert len(set(whole)) == 40  # graphs differ


def test_seed_changes_the_graphs():
    assert as_bytes(synth.generate("hydragnn", 1, 0, 5)) != as_bytes(
        synth.generate("hydragnn", 2, 0, 5))


def test_molecules_are_valid_graphs():
    for g in synth.generate("hydragnn", 3, 0, 20):
        n = g["x"].shape[0]
        assert g["pos"].shape == (n, 3) and g["edge_index"].shape[0] == 2
        assert g["edge_index"].size == 0 or (0 <= g["edge_index"].min()
                                             and g["edge_index"].max() < n)
        assert g["edge_attr"].shape[0] == g["edge_index"].shape[1]


def test_unknown_kind_names_the_choices():
    with pytest.raises(ValueError) as e:
        synth.generate("proteins", 0, 0, 1)
    assert str(e.value) == f"unknown synthetic kind 'proteins'; choose one of {sorted(synth.KINDS)}"


@pytest.mark.parametrize("n, fractions, want", [
    (100, (0.8, 0.1, 0.1), [80, 10, 10]), (7, (0.5, 0.5), [4, 3]),
    (3, (0.9, 0.05, 0.05), [3, 0, 0]),
])
def test_split_counts(n, fractions, want):
    assert synth.split_counts(n, fractions) == want and sum(want) == n
