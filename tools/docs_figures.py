"""Quoted benchmark figures in README.md and docs/: rewrite them from the JSON, or check them.

    python tools/docs_figures.py           # rewrite every <!-- figure: KEY -->VALUE<!-- /figure -->
    python tools/docs_figures.py --check   # exit 1, naming page, key, quoted and measured value

``KEY`` is a function of ``bench/figures.py`` (``FIGURES``, merged from
``bench/<topic>/figures.py``) that computes the value from
``bench/results/``. The markers are HTML comments, invisible on GitHub and on the site, so a page
reads as plain prose with the number in it. ``tests/integration/test_bench_report.py`` runs the
check.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's package and bench/ (run as a script from tools/)

from bench import figures  # noqa: E402

#: a quoted value runs to its closing marker, on the same line or (a table) over several; a
#: marker right after a backtick is an example in inline code, not a quote
QUOTE = re.compile(r"(?<!`)<!-- figure: ([\w.-]+) -->(.*?)<!-- /figure -->", re.S)
#: an inline quote may not open a line: Markdown would take the line for an HTML block
LINE_START = re.compile(r"^[ \t]*<!-- figure: ([\w.-]+) -->(?![ \t]*$)", re.M)


def pages() -> list[Path]:
    """The pages that may quote figures: README.md and every Markdown file under docs/."""
    return [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))


def quotes(text: str) -> list[tuple[str, str]]:
    """(key, quoted value) of every figure a page quotes."""
    return QUOTE.findall(text)


def rewrite(text: str) -> str:
    """``text`` with every quoted value replaced by its figure from the JSON."""
    return QUOTE.sub(lambda m: f"<!-- figure: {m.group(1)} -->{figures.value(m.group(1))}"
                               "<!-- /figure -->", text)


def stale() -> list[str]:
    """One line for every quoted figure that differs from the JSON or names no figure."""
    out = []
    for page in pages():
        for key, quoted in quotes(page.read_text()):
            rel = page.relative_to(ROOT)
            if key not in figures.FIGURES:
                out.append(f"{rel}: figure {key!r} is not in bench/figures.py FIGURES")
            elif quoted != figures.value(key):
                out.append(f"{rel}: figure {key} quotes {quoted!r}, the JSON gives "
                           f"{figures.value(key)!r}: run `python tools/docs_figures.py`")
        for m in LINE_START.finditer(page.read_text()):
            out.append(f"{page.relative_to(ROOT)}: figure {m.group(1)} opens a line (Markdown "
                       "reads it as an HTML block): move a word in front of it")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    if ap.parse_args().check:
        bad = stale()
        print("\n".join(bad) or "every quoted figure is what the JSON gives")
        return 1 if bad else 0
    for page in pages():
        text = page.read_text()
        new = rewrite(text)
        if new != text:
            page.write_text(new)
            print(f"rewrote {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
