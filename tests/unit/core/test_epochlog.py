"""core/epochlog: the one per-epoch line, written and read back exactly."""

from mdloader_plugin.core.epochlog import TAG, format_epoch_line, parse_epoch_lines


def test_format_exact_line():
    line = format_epoch_line(run="gin-demo", loader="mdloader", backend="collective", epoch=2,
                             wall_s=3.412, data_wait_s=0.041, steps=25, samples=1600, rank=0)
    assert line == ("MDLOADER-EPOCH run=gin-demo loader=mdloader backend=collective epoch=2 "
                    "wall_s=3.4120 data_wait_s=0.0410 steps=25 samples=1600 "
                    "samples_per_s=468.9 rank=0")


def test_baselines_have_a_dash_backend_and_zero_wall_gives_zero_rate():
    line = format_epoch_line(run="r", loader="hydragnn", backend="", epoch=0, wall_s=0.0,
                             data_wait_s=0.0, steps=0, samples=0)
    assert " backend=- " in line and line.endswith("samples_per_s=0.0")


def test_round_trip_behind_any_prefix_and_other_lines_ignored():
    recs = [dict(run="a", loader="mdloader", backend="onesided", epoch=e, wall_s=1.5 + e,
                 data_wait_s=0.25, steps=10, samples=320) for e in range(3)]
    lines = ["INFO something else", *(f"[rank 0] 12:00:01 {format_epoch_line(**r)}"
                                      for r in recs), f"{TAG} epoch=notanint wall_s=1"]
    got = parse_epoch_lines(lines)
    assert len(got) == 3  # the malformed line is skipped
    for g, r in zip(got, recs):
        assert {k: g[k] for k in r} == r
        assert g["samples_per_s"] == round(r["samples"] / r["wall_s"], 1)
        assert isinstance(g["epoch"], int) and isinstance(g["wall_s"], float)


def test_unknown_keys_are_kept_as_text():
    got = parse_epoch_lines([f"{TAG} run=x epoch=1 future_key=abc"])
    assert got == [{"run": "x", "epoch": 1, "future_key": "abc"}]
