"""What ``bench/report.py`` and ``tools/docs_figures.py`` are made of: a :class:`Section` of
``RESULTS.md``, an :class:`Other` result a page quotes, and the small formatters the figures of
every topic share.

A topic's ``sections.py`` declares its sections and other results; ``bench/sections.py`` puts
them in ``RESULTS.md``'s order. A topic's ``figures.py`` maps the keys pages quote to functions
of the JSON; ``bench/figures.py`` merges them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from bench.harness import load as _load_result


@dataclass(frozen=True)
class Section:
    """One section of RESULTS.md and where its numbers come from."""

    title: str
    commands: tuple[str, ...]
    scripts: tuple[str, ...]
    data: tuple[str, ...]
    body: Callable[[dict], list[str]]
    figures: tuple[str, ...] = ()
    make_bench: str = "yes"  # run by `make bench`? "yes", "no", or the setting that adds it
    level: int = 2


@dataclass(frozen=True)
class Other:
    """A result a documentation page quotes that has no section of its own."""

    data: str
    commands: tuple[str, ...]
    scripts: tuple[str, ...]
    cited_by: tuple[str, ...]


def md(name: str) -> Callable[[dict], list[str]]:
    """A section body: a Markdown file a script wrote under bench/results/, as it stands."""
    def body(d: dict) -> list[str]:
        return d[name].strip("\n").splitlines()
    return body


def markdown(title: str, commands: tuple[str, ...], scripts: tuple[str, ...], stem: str,
             make_bench: str = "no") -> Section:
    """A section that shows ``bench/results/<stem>.md`` as it stands (its numbers in
    ``<stem>.json`` beside it)."""
    return Section(title, commands, scripts, (f"{stem}.md", f"{stem}.json"), md(f"{stem}.md"),
                   make_bench=make_bench)


# -- formatters the figures share ---------------------------------------------------------------
def load(name: str) -> Any:
    """A result under ``bench/results/`` (JSON parsed)."""
    return _load_result(name)


def span(lo: float, hi: float, fmt: str, unit: str = "") -> str:
    a, b = format(lo, fmt), format(hi, fmt)
    return f"{a}{unit}" if a == b else f"{a}–{b}{unit}"


def pct(x: float, digits: int = 0) -> str:
    return f"{x * 100:.{digits}f}%"


def of(n: int, total: int) -> str:
    return f"{n} of {total}"
