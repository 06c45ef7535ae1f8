"""core/units: the one parser and printers of byte sizes."""

import numpy as np
import pytest

from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.core.units import human, mib, parse_bytes


@pytest.mark.parametrize("value, want", [
    ("4GiB", 4 * 2**30), ("512MiB", 512 * 2**20), ("8GB", 8 * 10**9), ("1.5k", 1500),
    ("20KiB", 20480), (" 3 mb ", 3 * 10**6), ("1e3", 1000), ("7", 7), ("2TiB", 2 * 2**40),
    (4096, 4096), (np.int64(9), 9), (2.5e3, 2500),
])
def test_parse_bytes_units(value, want):
    got = parse_bytes(value)
    assert got == want and isinstance(got, int)


@pytest.mark.parametrize("value", [None, "", "   "])
def test_parse_bytes_empty_means_no_budget(value):
    assert parse_bytes(value) is None


@pytest.mark.parametrize("value, words", [
    ("4 parsecs", ["max_memory_per_rank: '4 parsecs' is not a size", "e.g. 4GiB"]),
    ("GiB", ["'GiB' is not a size"]),
    (0, ["max_memory_per_rank must be positive, got 0"]),
    ("-1GiB", ["'-1GiB' is not a size"]),
    (-5, ["must be positive, got -5"]),
    (float("inf"), ["must be positive, got inf"]),
    (True, ["expected bytes or a size like '4GiB', got True"]),
])
def test_parse_bytes_errors_name_value_and_fix(value, words):
    with pytest.raises(ConfigError) as e:
        parse_bytes(value)
    msg = str(e.value)
    assert "\n" not in msg and all(w in msg for w in words), msg


def test_parse_bytes_names_the_setting():
    with pytest.raises(ConfigError, match=r"^--budget: 'x' is not a size"):
        parse_bytes("x", what="--budget")


@pytest.mark.parametrize("n, want", [
    (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"), (2**20, "1.0 MiB"),
    (12.5 * 2**20, "12.5 MiB"), (3 * 2**30, "3.0 GiB"), (2**42, "4096.0 GiB"),
])
def test_human(n, want):
    assert human(n) == want


@pytest.mark.parametrize("n, want", [(0, "0.0 MiB"), (2**20, "1.0 MiB"), (3 * 2**30, "3072.0 MiB"),
                                     (100, "0.0 MiB"), (int(1.25 * 2**20), "1.2 MiB")])
def test_mib_keeps_one_unit(n, want):
    assert mib(n) == want
