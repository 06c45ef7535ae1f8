"""The code blocks of the documentation and the commands in them, for the tests that run them.

A *page* is README.md, a file under docs/ or the README.md of bench/, recipes/ or slurm/. A
*block* is a fenced code block (```bash, ```console, ```text, ...) or an indented one. A
*command* is what a reader can paste into a shell:

- every line of a ```bash / ```sh / ```shell block (comments and blank lines aside);
- in any other block, a line starting ``$ `` (the rest of the block is output) and a line that
  starts like a command (``mdloader ``, ``mpiexec ``, ``srun ``, ... after optional
  ``VAR=value`` words, or after ``example: `` in the CLI's generated help);

a line ending in a backslash continues on the next. The HTML comment on the line before a
block says who runs it (see tests/integration/test_docs_commands.py for the convention):
``<!-- test: NAME -->`` (a test reads the block by NAME) or ``<!-- needs: KIND -->`` (not run
here, KIND says why).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SHELL = {"bash", "sh", "shell"}
MARKER = re.compile(r"^<!-- (test|needs): ([^>]*?) -->$")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
# a command word at the start of a line of a non-shell block
COMMAND_START = re.compile(
    r"^(?:example(?: \([^)]*\))?: )?(?:[A-Z_][A-Z0-9_]*=\S* )*"
    r"(mdloader|mpiexec|srun|sbatch|python|pip|make|git|bash|source|module|export)\s")


def pages() -> list[Path]:
    """Every documentation page, README.md first."""
    found = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for top in ("bench", "recipes", "slurm"):
        found += sorted((ROOT / top).rglob("README.md"))
    return [p for p in found if p.is_file()]


@dataclass
class Block:
    page: str          # repository-relative path
    line: int          # 1-based line of the block's first code line
    lang: str          # the fence's info string ("" for an indented block)
    text: str          # the code, dedented
    marker: tuple | None = None      # ("test", NAME) or ("needs", KIND...) from the line above
    commands: list = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def _marker_above(lines: list[str], i: int):
    """The marker comment on the last non-blank line before line `i`, if any."""
    j = i - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    m = MARKER.match(lines[j].strip()) if j >= 0 else None
    return (m.group(1), m.group(2).strip()) if m else None


def parse(path: Path) -> list[Block]:
    """The code blocks of one page, in order."""
    rel = str(path.relative_to(ROOT))
    lines = path.read_text().splitlines()
    out, i = [], 0
    prev_blank = True
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m:
            indent, fence, lang = len(m.group(1)), m.group(2), m.group(3)
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(fence):
                j += 1
            body = [ln[indent:] if not ln[:indent].strip() else ln.lstrip()
                    for ln in lines[i + 1:j]]
            out.append(Block(rel, i + 2, lang, "\n".join(body) + "\n", _marker_above(lines, i)))
            i, prev_blank = j + 1, False
            continue
        if prev_blank and lines[i].startswith("    ") and lines[i].strip() and \
                not _in_list(lines, i):
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or not lines[j].strip()):
                j += 1
            body = [ln[4:] for ln in lines[i:j]]
            while body and not body[-1].strip():
                body.pop()
            out.append(Block(rel, i + 1, "", "\n".join(body) + "\n", _marker_above(lines, i)))
            i, prev_blank = j, False
            continue
        prev_blank = not lines[i].strip()
        i += 1
    for b in out:
        b.commands = commands(b)
    return out


def _in_list(lines: list[str], i: int) -> bool:
    """Whether an indented line continues a list item (then it is not a code block)."""
    j = i - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    return j >= 0 and (re.match(r"^\s*([-*+]|\d+\.)\s", lines[j]) is not None
                       or lines[j].startswith("  ") and not lines[j].startswith("    "))


def _joined(lines: list[str]) -> list[tuple[str, bool]]:
    """Lines with backslash continuations joined; (line, starts with "$ ")."""
    out, cur = [], None
    for ln in lines:
        if cur is not None:
            cur = cur[:-1].rstrip() + " " + ln.strip()
        else:
            cur = ln.rstrip()
        if not cur.endswith("\\"):
            out.append(cur)
            cur = None
    if cur is not None:
        out.append(cur)
    return out


def commands(b: Block) -> list[str]:
    """The pasteable commands of a block (see the module's docstring)."""
    found = []
    raw = b.text.splitlines()
    if b.lang in SHELL:
        for ln in _joined(raw):
            s = ln.strip()
            if s and not s.startswith("#"):
                found.append(s[2:] if s.startswith("$ ") else s)
        return found
    i = 0
    while i < len(raw):
        s = raw[i].strip()
        if s.startswith("$ ") or COMMAND_START.match(s):
            j = i
            while raw[j].rstrip().endswith("\\") and j + 1 < len(raw):
                j += 1
            cmd = _joined([raw[k].strip() for k in range(i, j + 1)])[0]
            cmd = re.sub(r"^example(?: \([^)]*\))?: ", "", cmd)
            found.append(cmd[2:] if cmd.startswith("$ ") else cmd)
            i = j + 1
        else:
            i += 1
    return found


def all_blocks() -> list[Block]:
    return [b for p in pages() for b in parse(p)]


def block(page: str, name: str) -> str:
    """The code of the block marked ``<!-- test: name -->`` on `page` (under docs/ unless it
    names README.md or another top-level folder)."""
    path = ROOT / page if "/" in page or page == "README.md" else ROOT / "docs" / page
    for b in parse(path):
        if b.marker == ("test", name):
            return b.text
    raise AssertionError(f"{page}: no block marked <!-- test: {name} -->")
