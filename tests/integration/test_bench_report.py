"""bench/RESULTS.md and bench/README.md are what bench/report.py makes from bench/results/, every
result is accounted for, and the scripts are where the map says."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from mpirun import ROOT

from bench import report, sections

BENCH = ROOT / "bench"


def test_results_md_is_what_the_json_gives():
    want = report.render()
    have = (BENCH / "RESULTS.md").read_text()
    assert have == want, ("bench/RESULTS.md is not what bench/report.py makes from "
                          "bench/results/: run `python -m bench.report` and commit it")


def test_bench_readme_tables_are_generated():
    have = (BENCH / "README.md").read_text()
    assert have == report.readme_text(have), (
        "bench/README.md's tables are stale: run `python -m bench.report` and commit it")


def test_every_section_is_headed_by_its_command_and_date():
    text = (BENCH / "RESULTS.md").read_text()
    for sec in sections.SECTIONS:
        if not (BENCH / "results" / sec.data[0]).exists():
            continue
        head = f"{'#' * sec.level} {sec.title}\n\n*Produced by* "
        assert head in text, sec.title
        line = text.split(head, 1)[1].split("\n", 1)[0]
        for cmd in sec.commands:
            assert f"`{cmd}`" in line, (sec.title, cmd)
        assert report.when(report.section_dates(sec)) in line


def test_check_mode_fails_on_a_stale_file(tmp_path, monkeypatch):
    """`report.py --check` names the stale file and exits 1; it writes nothing."""
    stale = tmp_path / "RESULTS.md"
    stale.write_text("# edited by hand\n")
    monkeypatch.setattr(report, "OUT", stale)
    monkeypatch.setattr(sys, "argv", ["report.py", "--check"])
    assert report.main() == 1
    assert stale.read_text() == "# edited by hand\n"


def test_stamps_read_every_recorded_format():
    doc = {"machine": {"date": "2026-12-03 06:31 UTC"},
           "rows": [{"utc": "2026-12-05T05:43:42Z"}, {"utc": "2026-12-05T09:37:43Z"}],
           "provenance": {"date": "2026-12-05T08:14:22+00:00"}, "d": {"date": "2026-12-04"},
           "note": "2026-12-01 is not a date field", "date_s": 3.0}
    assert report.stamps(doc) == ["2026-12-03 06:31 UTC", "2026-12-04", "2026-12-05 05:43 UTC",
                                  "2026-12-05 08:14 UTC", "2026-12-05 09:37 UTC"]
    assert report.when(["2026-12-05 05:43 UTC", "2026-12-05 09:37 UTC"]) == \
        "2026-12-05 05:43–09:37 UTC"
    assert report.when(["2026-12-03 05:50 UTC", "2026-12-04"]) == \
        "2026-12-03 05:50 UTC to 2026-12-04"
    assert report.when([]) == "date not recorded in its JSON"


def test_every_result_file_is_read_or_quoted_or_archived():
    """A file under bench/results/ is read by a section, listed as quoted by a page, an input
    (a calibration profile) or a folder of raw runs a section's command names; superseded ones
    are under archive/."""
    read = {n for s in sections.SECTIONS for n in s.data}
    other = [o.data for o in sections.OTHER_RESULTS]
    commands = " ".join(c for s in sections.SECTIONS for c in s.commands)
    loose = []
    for p in sorted((BENCH / "results").iterdir()):
        if p.name == "archive":
            continue
        if p.is_dir():
            ok = (f"bench/results/{p.name}" in commands
                  or any(p.match(o) and o.endswith("*") for o in other))
        else:
            ok = p.name in read or any(p.match(o) for o in other)
        if not ok:
            loose.append(p.name)
    assert not loose, (f"bench/results/ files no section reads and no page quotes: {loose}; "
                       "add a Section or an Other in bench/<topic>/sections.py, or move them to "
                       "bench/results/archive/")
    for o in sections.OTHER_RESULTS:
        assert list((BENCH / "results").glob(o.data)), o.data
        for page in o.cited_by:
            if page.startswith(("docs/", "bench/")):
                assert (ROOT / page).exists(), page


def test_scripts_and_figures_named_exist():
    for s in list(sections.SECTIONS) + list(sections.OTHER_RESULTS):
        for script in s.scripts:
            assert (ROOT / script).is_file(), script
    for s in sections.SECTIONS:
        for fig in s.figures:
            assert (ROOT / fig).is_file(), fig


def _modules() -> set[str]:
    return {".".join(p.relative_to(ROOT).with_suffix("").parts)
            for p in BENCH.rglob("*.py") if p.name != "__init__.py"}


def test_make_bench_runs_the_entry_points_and_every_module_is_placed():
    """tools/bench.sh runs the entry points as modules; every module of bench/ lives in a topic
    folder or is one of the harness's; no benchmark edits sys.path or imports from tests/."""
    bench_sh = (ROOT / "tools" / "bench.sh").read_text()
    ran = set(re.findall(r"-m (bench\.[\w.]+)", bench_sh))
    assert ran == set(sections.ENTRY_POINTS), ran ^ set(sections.ENTRY_POINTS)
    assert not re.search(r"bench/\w+(/\w+)?\.py", bench_sh)
    mods = _modules()
    assert set(sections.ENTRY_POINTS) | set(sections.BY_HAND) <= mods
    top = {m for m in mods if m.count(".") == 1}
    assert top == {"bench.harness", "bench.reporting", "bench.report", "bench.sections",
                   "bench.figures", "bench.ties"}, top
    for p in BENCH.rglob("*.py"):
        text = p.read_text()
        assert "sys.path" not in text, p
        assert not re.search(r"^\s*(from|import) (mpirun|tests)\b", text, re.M), p


#: benchmarks without argparse: positional arguments only, or none
NO_OPTIONS = {"bench.fetch.trees_ab", "bench.scale.step_cpu_parts", "bench.groups.model"}


@pytest.mark.parametrize("name", sorted((set(sections.ENTRY_POINTS) | set(sections.BY_HAND))
                                        - NO_OPTIONS))
def test_benchmarks_start_as_modules(name):
    """Every benchmark with options starts as ``python -m bench.<topic>.<name> --help``; those
    without options (NO_OPTIONS: run with a tree's path, or a model run in seconds) are run for
    real by their users."""
    r = subprocess.run([sys.executable, "-m", name, "--help"], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 0 and "usage:" in r.stdout, r.stderr[-2000:]


def _figures_tool():
    sys.path.insert(0, str(ROOT / "tools"))
    import docs_figures as tool

    return tool


def test_quoted_figures_are_what_the_json_gives():
    """Every `<!-- figure: KEY -->VALUE<!-- /figure -->` of README.md and docs/ is the value
    bench/figures.py computes from bench/results/ (so two pages cannot disagree)."""
    tool = _figures_tool()
    bad = tool.stale()
    assert not bad, "\n".join(bad)
    quoted = {k for p in tool.pages() for k, _ in tool.quotes(p.read_text())}
    assert "choice.heldout_right" in quoted and "training.native_wait" in quoted


def test_figure_check_catches_a_stale_or_unknown_quote(tmp_path, monkeypatch):
    tool = _figures_tool()
    page = tmp_path / "page.md"
    right = tool.figures.value("training.native_wait")
    page.write_text("native wait <!-- figure: training.native_wait -->99%<!-- /figure -->, "
                    "<!-- figure: no.such.key -->1<!-- /figure -->\n")
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    monkeypatch.setattr(tool, "pages", lambda: [page])
    bad = tool.stale()
    assert len(bad) == 2 and "'99%'" in bad[0] and repr(right) in bad[0] and "no.such.key" in bad[1]
    page.write_text("native wait\n<!-- figure: training.native_wait -->99%<!-- /figure -->\n")
    assert any("opens a line" in b for b in tool.stale())
    page.write_text("native wait <!-- figure: training.native_wait -->99%<!-- /figure -->\n")
    assert tool.rewrite(page.read_text()) == (
        f"native wait <!-- figure: training.native_wait -->{right}<!-- /figure -->\n")


def test_pages_name_only_scripts_and_results_that_exist():
    """Every `bench/...py` script and `bench/results/...` file README.md and docs/ name exists
    (after a move to another topic or to bench/results/archive/ the pages follow)."""
    missing = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = page.read_text()
        for path in set(re.findall(r"\bbench/[\w/.-]+\.(?:py|json|md|log|png)\b", text)):
            if "*" not in path and "{" not in path and not (ROOT / path).exists():
                missing.append(f"{page.relative_to(ROOT)}: {path}")
    assert not missing, "pages name files that do not exist:\n" + "\n".join(sorted(missing))
