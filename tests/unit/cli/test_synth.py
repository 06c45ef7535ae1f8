"""``mdloader synth``: --help teaches, a bad argument is one line and exit 2, and a tiny data set
is written with the graphs and splits asked for, the same bytes for the same seed."""

from cli_checks import help_text, one_error_line

from mdloader_plugin.cli import main


def test_help_names_the_kinds_and_an_example(capsys):
    help_text(capsys, "synth", words=("--kind", "--num-graphs", "--out", "--split", "--seed",
                                       "examples:", "mdloader synth --kind hydragnn"))


def test_bad_argument_is_one_line(capsys):
    one_error_line(capsys, ["synth", "--num-graphs", "4"], "--out")
    one_error_line(capsys, ["synth", "--num-graphs", "4", "--out", "x.bp", "--seed", "one"],
                   "--seed", "invalid int value")


def test_tiny_data_set_has_its_splits_and_is_the_same_for_the_same_seed(tmp_path, capsys):
    import numpy as np

    from mdloader_plugin.sources.adios import GraphFile

    paths = [tmp_path / "a.bp", tmp_path / "b.bp"]
    for path in paths:
        assert main(["synth", "--kind", "hydragnn", "--num-graphs", "10", "--split",
                     "0.6,0.2,0.2", "--seed", "3", "--out", str(path), "--quiet"]) == 0
    assert f"wrote {paths[0]}: 10 graphs" in capsys.readouterr().out
    sizes, graphs = [], []
    with capsys.disabled():  # the reader's read watchdog writes to the real stderr
        for path in paths:
            with GraphFile(path) as f:
                sizes.append({s: f.info(s).ndata for s in ("trainset", "valset", "testset")})
                graphs.append(f.read_block("valset", 0, 2).sample(1))
    assert sizes == [{"trainset": 6, "valset": 2, "testset": 2}] * 2
    assert list(graphs[0]) == list(graphs[1]) and "edge_index" in graphs[0]
    for key, value in graphs[0].items():
        assert value.dtype == graphs[1][key].dtype and np.array_equal(value, graphs[1][key]), key
