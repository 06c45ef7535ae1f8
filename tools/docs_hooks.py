"""MkDocs hooks (``hooks:`` in mkdocs.yml): the generated parts of the documentation.

A page asks for generated text with one HTML comment on its own line:

* ``<!-- generated: config -->``: every setting, from the code's own tables
  (``mdloader_plugin/core/options.py``, ``integrations/hydragnn/config.py``, the fairchem ``loader``
  group ``integrations/fairchem/conf/loader/mdloader.yaml``, the signatures and ``Args:`` of
  ``MDLoader`` and of fairchem's ``build_loader``);
* ``<!-- generated: cli -->``: every ``mdloader`` command and option, from the argparse parsers;
* ``<!-- api: MODULE ... -->``: a mkdocstrings ``:::`` block for each module (``PACKAGE.*``:
  the package and all its submodules);
* ``<!-- include: PATH -->``: a Markdown file of the repository (``bench/RESULTS.md``), its
  headings one level down and the figures it names shown.

Below a ``generated``/``api`` marker a page may carry the committed text of its expansion, up to
``<!-- end generated -->`` (``tools/gen_reference.py`` writes it, for readers on GitHub); the
site replaces marker and committed text together.

``bench/*.png`` are published at ``bench/`` in the site. ``tests/integration/test_docs.py`` imports
this module to check that the generated references cover every option and command.
"""

from __future__ import annotations

import argparse
import inspect
import re
import textwrap
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "mdloader_plugin"
#: the end of a committed generated block (``tools/gen_reference.py`` writes the block below its
#: marker so the page reads on GitHub; the site replaces marker and block together)
END = "<!-- end generated -->"
MARKER = re.compile(r"^<!-- (generated|api|include): *(.*?) *-->$"
                    r"(?:\n(?:(?!<!-- (?:generated|api|include):)[^\n]*\n)*?" + re.escape(END)
                    + r"$)?", re.M)
#: modules the API reference leaves out: the CLI has its own generated reference; private
#: modules (``_aliases``: the old import paths) are not API
API_EXCLUDE = re.compile(r"^mdloader_plugin\.(cli(\..*)?|.*__main__|(.*\.)?_[a-z]\w*)$")
FAIRCHEM_GROUP = ROOT / PACKAGE / "integrations" / "fairchem" / "conf" / "loader" / "mdloader.yaml"


# -- MkDocs events ---------------------------------------------------------------------------
def on_files(files, config):
    """Publish the benchmark figures (``bench/*.png``) at ``bench/`` in the site."""
    from mkdocs.structure.files import File

    for png in sorted((ROOT / "bench").glob("*.png")):
        files.append(File(f"bench/{png.name}", src_dir=str(ROOT), dest_dir=config["site_dir"],
                          use_directory_urls=config["use_directory_urls"]))
    return files


def on_page_markdown(markdown, page, config, files):
    """Replace each marker comment of a page with its generated Markdown; point the images a
    page shows from ``bench/`` at the published copies (:func:`site_image_links`)."""
    return site_image_links(expand(markdown))


#: an image under the repository's bench/ as a page under docs/ names it for GitHub's web view
BENCH_IMAGE = re.compile(r"(!\[[^\]]*\]\()((?:\.\./)+)(bench/[\w.-]+\.png\))")


def site_image_links(markdown: str) -> str:
    """A page's ``../bench/x.png`` images (right on GitHub, where docs/ sits beside bench/) as
    the site sees them: the figures are published at ``bench/`` inside the site (:func:`on_files`),
    so the same link, relative to the page, goes one folder less up."""
    return BENCH_IMAGE.sub(lambda m: m.group(1) + m.group(2)[3:] + m.group(3), markdown)


def expand(markdown: str) -> str:
    """``markdown`` with every marker replaced."""
    def one(m: re.Match) -> str:
        kind, arg = m.group(1), m.group(2)
        if kind == "generated":
            return {"config": config_reference, "cli": cli_reference}[arg]()
        if kind == "api":
            return api_blocks(arg.split())
        return include(arg)

    return MARKER.sub(one, markdown)


# -- configuration reference -----------------------------------------------------------------
_REQUIRED = object()


def _cell(value) -> str:
    if value is _REQUIRED:
        return "required"
    if value is None:
        return "unset"
    if isinstance(value, str):
        return f"`{value}`" if value else '`""`'
    return f"`{yaml.safe_dump(value, default_flow_style=True).strip().removesuffix('...').strip()}`"


def _table(rows, head=("key", "default", "meaning")) -> str:
    out = [f"| {' | '.join(head)} |", "|" + "---|" * len(head)]
    for name, default, meaning in rows:
        meaning = " ".join(str(meaning).split()).replace("|", "\\|")
        out.append(f"| `{name}` | {_cell(default)} | {meaning} |")
    return "\n".join(out)


def docstring_args(func) -> dict[str, str]:
    """``{name: meaning}`` from the Google-style ``Args:`` section of a docstring
    (``a, b, c: text`` documents three names)."""
    doc = inspect.getdoc(func) or ""
    lines = doc.splitlines()
    try:
        start = next(i for i, ln in enumerate(lines) if ln.strip() == "Args:") + 1
    except StopIteration:
        return {}
    out: dict[str, str] = {}
    names: list[str] = []
    indent = None
    for ln in lines[start:]:
        if not ln.strip():
            continue
        here = len(ln) - len(ln.lstrip())
        if indent is None:
            indent = here
        if here < indent:
            break
        m = re.match(r"([\w, ]+):\s*(.*)", ln.strip()) if here == indent else None
        if m:
            names = [n.strip() for n in m.group(1).split(",")]
            for n in names:
                out[n] = m.group(2)
        else:
            for n in names:
                out[n] += " " + ln.strip()
    return out


def signature_rows(func, doc=None, skip=()) -> list[tuple]:
    """(name, default, meaning) of a function's parameters, meanings from the ``Args:`` of
    ``doc`` (default: the function's own docstring; a class documents its ``__init__``)."""
    args = docstring_args(doc or func)
    rows = []
    for p in inspect.signature(func).parameters.values():
        if p.name in ("self", "cls", *skip) or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        default = None if p.default is p.empty else p.default
        meaning = args.get(p.name, "")
        rows.append((p.name, _REQUIRED if p.default is p.empty else default, meaning))
    return rows


def fairchem_group_rows() -> list[tuple]:
    """(key, default, comment) of the fairchem ``loader: mdloader`` group file's own keys; a
    comment continued on the indented ``#`` lines right below its key is kept whole."""
    values = yaml.safe_load(FAIRCHEM_GROUP.read_text())
    rows = []
    cont = False  # the previous line was a key's comment (or its continuation)
    for ln in FAIRCHEM_GROUP.read_text().splitlines():
        m = re.match(r"^(\w+):\s*([^#\n]*?)\s*(?:#\s*(.*))?$", ln)
        more = re.match(r"^\s+#\s*(.*)$", ln)
        if m and not isinstance(values.get(m.group(1)), dict):
            rows.append((m.group(1), values[m.group(1)], m.group(3) or ""))
            cont = m.group(3) is not None
        elif cont and more:
            key, default, meaning = rows[-1]
            rows[-1] = (key, default, f"{meaning} {more.group(1)}".strip())
        else:
            cont = False
    return rows


def config_rows() -> dict[str, list[tuple]]:
    """Every documented setting, by table: what the configuration reference shows."""
    from mdloader_plugin.core import options
    from mdloader_plugin.integrations.fairchem.loader import build_loader
    from mdloader_plugin.integrations.hydragnn import config as hconfig
    from mdloader_plugin.loader.loader import MDLoader

    rows = lambda table: [(o.name, o.default, o.meaning) for o in table]  # noqa: E731
    return {
        "mdloader": signature_rows(MDLoader.__init__, doc=MDLoader),
        "hydragnn": rows(hconfig.TOP_LEVEL),
        "hydragnn.mdloader": rows(hconfig.MDLOADER_OPTIONS),
        "hydragnn.hydragnn_loader": rows(hconfig.HYDRAGNN_LOADER_OPTIONS),
        "fairchem.loader": fairchem_group_rows(),
        "fairchem.build_loader": signature_rows(build_loader),
        "env": rows(options.ENV),
    }


def config_reference() -> str:
    """The generated body of the configuration reference page."""
    r = config_rows()
    return "\n\n".join([
        "## Python: `MDLoader(store, ...)`",
        "Keyword arguments of `mdloader_plugin.loader.loader.MDLoader` (signature and `Args:` of "
        "its "
        "docstring).",
        _table(r["mdloader"], ("argument", "default", "meaning")),
        "## HydraGNN config: MDLoader's keys",
        "Top-level keys MDLoader adds to a HydraGNN config (JSON or YAML); the rest is "
        "HydraGNN's own. Any key can be overridden with `--set KEY=VALUE` "
        "(`integrations/hydragnn/config.py`, `TOP_LEVEL`).",
        _table(r["hydragnn"]),
        "### `mdloader:` section",
        "Unknown keys are refused with the list of options (`MDLOADER_OPTIONS`).",
        _table(r["hydragnn.mdloader"]),
        "### `hydragnn_loader:` section",
        "(`HYDRAGNN_LOADER_OPTIONS`)",
        _table(r["hydragnn.hydragnn_loader"]),
        "## fairchem: the `loader` config group",
        "Keys of `mdloader_plugin/integrations/fairchem/conf/loader/mdloader.yaml` "
        "(`defaults: [loader: mdloader]`, found from any config: "
        "[fairchem](../fairchem.md#the-loader-group-from-any-config)), set on the command line "
        "as `loader.KEY=VALUE`:",
        _table(r["fairchem.loader"]),
        "### `build_loader` arguments",
        "The group's `train_dataloader`/`val_dataloader` call "
        "`mdloader_plugin.integrations.fairchem.loader.build_loader`; any of its arguments can "
        "be set as `loader.train_dataloader.ARG=VALUE`:",
        _table(r["fairchem.build_loader"], ("argument", "default", "meaning")),
        "## Environment variables",
        "Read by the package (`mdloader_plugin/core/options.py`, `ENV`). The Slurm recipes' own "
        "variables (`MDLOADER_LOADER`, `MDLOADER_CONFIG`, ...) are on the "
        "[Slurm page](../slurm.md#site-parameters).",
        _table(r["env"], ("variable", "default", "meaning")),
    ]) + "\n"


# -- CLI reference ---------------------------------------------------------------------------
def parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    """(``mdloader sub ...``, parser) of every command and subcommand, depth first."""
    from mdloader_plugin.cli import build_parser

    out = []

    def walk(prog: str, parser: argparse.ArgumentParser) -> None:
        parser.format_help()  # a framework's parser adds its arguments then (cli/train.py)
        out.append((prog, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(f"{prog} {name}", sub)

    walk("mdloader", build_parser())
    return out


def _option_rows(parser: argparse.ArgumentParser) -> list[tuple]:
    rows = []
    for a in parser._actions:
        if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        name = ", ".join(a.option_strings) or (a.metavar or a.dest)
        optional_nargs = ("?", "*", argparse.REMAINDER)
        required = a.required or (not a.option_strings and a.nargs not in optional_nargs)
        default = _REQUIRED if required else (
            None if a.default in (None, argparse.SUPPRESS) else a.default)
        helptext = (a.help or "") % {"default": a.default, "prog": parser.prog} \
            if a.help and "%(" in a.help else (a.help or "")
        if a.choices and not isinstance(a.choices, dict):
            helptext += f" (choices: {', '.join(map(str, a.choices))})"
        rows.append((name, default, helptext))
    return rows


def cli_reference() -> str:
    """The generated body of the CLI reference page: usage and options of every command."""
    parts = []
    for prog, parser in parsers():
        depth = min(prog.count(" ") + 1, 4)
        parts.append(f"{'#' * (depth + 1)} `{prog}`")
        parser.prog = prog
        parts.append("```text\n" + parser.format_usage().strip() + "\n```")
        if parser.description:
            parts.append(parser.description.strip().replace("\n", " "))
        rows = _option_rows(parser)
        if rows:
            parts.append(_table(rows, ("argument", "default", "meaning")))
        if parser.epilog:
            parts.append("```text\n" + textwrap.dedent(parser.epilog).strip() + "\n```")
    return "\n\n".join(parts) + "\n"


# -- API reference and includes -------------------------------------------------------------
def package_modules() -> list[str]:
    """Every module of the package (from the files, without importing them), sorted."""
    out = []
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out.append(".".join(parts))
    return sorted(set(out))


def api_modules(names: list[str]) -> list[str]:
    """The documented modules a marker names: ``MODULE``, or ``PACKAGE.*`` for a package and
    its submodules."""
    def named(m: str, name: str) -> bool:
        base = name.removesuffix(".*")
        return m == base or (name.endswith(".*") and m.startswith(base + "."))

    return [m for m in package_modules() if not API_EXCLUDE.match(m)
            and any(named(m, n) for n in names)]


def api_blocks(prefixes: list[str]) -> str:
    """One mkdocstrings block a module."""
    return "\n\n".join(f"::: {m}" for m in api_modules(prefixes)) + "\n"


def include(relpath: str) -> str:
    """A repository Markdown file, headings one level down, the figures it names shown."""
    text = (ROOT / relpath).read_text()
    text = re.sub(r"^(#+) ", r"#\1 ", text, flags=re.M)
    out = []
    for ln in text.splitlines():
        out.append(ln)
        if ln.startswith("Figure"):
            for png in re.findall(r"`(bench/[\w.-]+\.png)`", ln):
                out.append(f"\n![{png}]({png})")
    return "\n".join(out) + "\n"
