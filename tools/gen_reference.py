"""The generated parts of ``docs/reference/*.md``, committed so the pages read on GitHub too.

    python tools/gen_reference.py           # rewrite the generated blocks from the code
    python tools/gen_reference.py --check   # exit 1, naming the stale pages

A reference page asks for generated text with a marker line (``<!-- generated: config -->``,
``<!-- generated: cli -->``, ``<!-- api: MODULE ... -->``, see ``tools/docs_hooks.py``); this
script writes the text right below it, up to ``<!-- end generated -->``: the configuration and
CLI tables exactly as the site shows them, and for the API pages every public class and function
with its signature and docstring (from the source, by griffe, without importing the package).
On the site the MkDocs hook replaces marker and block with its own expansion (mkdocstrings for
the API). ``tests/integration/test_docs.py`` fails when a committed page is not what this script
writes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]  # this checkout's package, not an installed one

import docs_hooks  # noqa: E402

PAGES = ROOT / "docs" / "reference"


def _signature(fn) -> str:
    parts = []
    for p in fn.parameters:
        if p.name in ("self", "cls"):
            continue
        star = {"var_positional": "*", "var_keyword": "**"}.get(p.kind.value, "")
        parts.append(f"{star}{p.name}" + (f"={p.default}" if p.default is not None else ""))
    return ", ".join(parts)


def _doc(obj, first_only: bool = False) -> str:
    text = (obj.docstring.value.strip() if obj.docstring else "")
    return text.split("\n\n")[0] if first_only else text


def public_members(module):
    """(name, griffe object) of a griffe module's public classes and functions (an imported
    name only when the module exports it)."""
    for name, obj in module.members.items():
        if obj.is_alias and name not in (module.exports or ()):
            continue
        target = obj.final_target if obj.is_alias else obj
        if target.kind.value in ("class", "function") and obj.is_public:
            yield name, target


def api_pages() -> dict[str, list[str]]:
    """``{API page stem: the modules its ``<!-- api: ... -->`` markers document}``."""
    out = {}
    for md in sorted(PAGES.glob("api-*.md")):
        names = [n for m in docs_hooks.MARKER.finditer(md.read_text()) if m.group(1) == "api"
                 for n in m.group(2).split()]
        out[md.stem] = docs_hooks.api_modules(names)
    return out


def griffe_modules(names: list[str]):
    """(module name, griffe module) of every documented module a marker names, read from the
    source (nothing imported)."""
    import griffe

    pkg = griffe.load(docs_hooks.PACKAGE, search_paths=[str(ROOT)])
    for modname in docs_hooks.api_modules(names):
        yield modname, pkg if modname == docs_hooks.PACKAGE else pkg[modname.split(".", 1)[1]]


def api_markdown(names: list[str]) -> str:
    """Every documented module a marker names: its docstring, then each public class (with its
    public methods) and function, signature and docstring, as plain Markdown."""
    out = []
    for modname, module in griffe_modules(names):
        out += [f"## `{modname}`", ""] + ([_doc(module), ""] if _doc(module) else [])
        for name, obj in public_members(module):
            if obj.kind.value == "class":
                init = obj.members.get("__init__")
                sig = _signature(init) if init is not None and not init.is_alias else ""
                out += [f"### class `{name}({sig})`", "", _doc(obj), ""]
                for mname, m in obj.members.items():
                    if m.is_alias or not m.is_public or m.kind.value != "function" \
                            or mname.startswith("_"):
                        continue
                    out += [f"- `{mname}({_signature(m)})`"
                            + (f": {' '.join(_doc(m, True).split())}" if _doc(m) else "")]
                out += [""] if out[-1] != "" else []
            else:
                out += [f"### `{name}({_signature(obj)})`", "", _doc(obj), ""]
    return "\n".join(out).rstrip("\n") + "\n"


def generated(kind: str, arg: str) -> str:
    """The committed text below one marker."""
    if kind == "generated":
        return {"config": docs_hooks.config_reference, "cli": docs_hooks.cli_reference}[arg]()
    if kind == "api":
        return api_markdown(arg.split())
    raise ValueError(f"{kind}: only generated/api markers are committed (got {arg!r})")


def page_text(text: str) -> str:
    """A reference page with every generated block written anew."""
    def one(m) -> str:
        marker = m.group(0).split("\n", 1)[0]
        body = generated(m.group(1), m.group(2)).rstrip("\n")
        return f"{marker}\n\n{body}\n\n{docs_hooks.END}"

    return docs_hooks.MARKER.sub(one, text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    check = ap.parse_args().check
    stale = []
    for page in sorted(PAGES.glob("*.md")):
        text = page.read_text()
        new = page_text(text)
        if new != text:
            stale.append(page)
            if not check:
                page.write_text(new)
                print(f"wrote {page.relative_to(ROOT)}")
    if check:
        for page in stale:
            print(f"{page.relative_to(ROOT)} is stale: run `python tools/gen_reference.py`")
        return 1 if stale else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
