"""Every path of this repository that the code, tests, tools and docs name exists.

A comment or page that cites a test file after it moved, or a file outside
the repository (``FACTS.md`` of a development machine), sends a reader nowhere. This test finds
repository-relative paths (``mdloader_plugin/...``, ``tests/...``, ``docs/...``, ...) in every
tracked text file and fails on those that are not there.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PATH = re.compile(r"(?<![\w/.-])"
                  r"((?:mdloader_plugin|tests|bench|tools|docs|slurm|recipes|requirements)"
                  r"/[\w./-]*\w\.(?:py|md|sh|json|yaml|yml|sbatch|txt|png|c|cfg|toml))")
TEXT = (".py", ".md", ".sh", ".sbatch", ".yaml", ".yml", ".c", ".cfg", ".toml", "Makefile")
# Placeholders in how-to text, files a command writes, and upstream HydraGNN's own docs page.
ALLOWED = re.compile(r"NAME|test_x|^bench/results/|^docs/cost_aware_batching\.md$")


def _tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:  # not a git checkout (an unpacked sdist): walk the tree
        return [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file()]
    return out.stdout.split()


def missing_paths() -> list[str]:
    bad = []
    for rel in _tracked():
        if rel.startswith("bench/results/") or not rel.endswith(TEXT):
            continue
        text = (ROOT / rel).read_text(errors="ignore")
        for path in sorted(set(PATH.findall(text))):
            if not ALLOWED.search(path) and not (ROOT / path).exists():
                bad.append(f"{rel} names {path}")
        if "FACTS.md" in text and rel != "tests/unit/test_file_references.py":
            bad.append(f"{rel} names FACTS.md (a file outside the repository)")
    return bad


def test_every_named_path_exists():
    bad = missing_paths()
    assert not bad, "\n".join(bad)
