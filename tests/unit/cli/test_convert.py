"""``mdloader convert``: --help teaches (sources, the unpickling warning, examples), a bad
argument is one line and exit 2, and ASE's bundled G2 set converts on one process into the
splits asked for. Each source format and the multi-rank runs: tests/unit/sources/convert/."""

from cli_checks import help_text, one_error_line, run_cli


def test_help_names_sources_warning_and_examples(capsys):
    help_text(capsys, "convert", words=("asedb", "lmdb", "extxyz", "pyg", "g2", "--split",
                                         "--radius", "WARNING: unpickling",
                                         "mdloader convert g2 --out data/g2.bp"))


def test_bad_argument_is_one_line(capsys):
    one_error_line(capsys, ["convert", "g2"], "--out")
    one_error_line(capsys, ["convert", "g2", "--out", "o.bp", "--radius", "far"], "--radius")


def test_g2_converts_into_its_splits(tmp_path):
    from mdloader_plugin.sources.adios import GraphFile

    out = tmp_path / "g2.bp"
    r = run_cli("convert", "g2", "--out", out, "--split", "0.8,0.1,0.1", "--quiet")
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"wrote {out}: 162 graphs" in r.stdout, r.stdout
    with GraphFile(out) as f:
        sizes = [f.info(s).ndata for s in ("trainset", "valset", "testset")]
    assert sum(sizes) == 162 and sizes[0] > sizes[1] > 0 and sizes[2] > 0, sizes
