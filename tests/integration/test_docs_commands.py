"""Every command a reader can paste from the documentation is run by a test or marked as one that
needs more than this machine, and the ones that can run here run as printed.

Pages: README.md, docs/**/*.md and the README.md of bench/, recipes/, slurm/. Commands:
tests/common/docs_blocks.py (every line of a ```bash block; the ``$ `` lines of a ```console block).

**The marker convention.** An HTML comment on the line before a code block (invisible on the
rendered page) says who runs its commands:

- ``<!-- test: NAME -->``: another test reads the block by NAME (``docs_blocks.block(page,
  NAME)``) and runs it; this test checks that a test file names it.
- ``<!-- needs: KIND -->``: not run by the tests, because it needs what KIND says:

  ``cluster``: a Slurm allocation or a site's software (``sbatch``, ``srun``, ``module``);
  ``network``: downloads or installs (``pip``, ``git clone``, ``make demo`` on a fresh machine);
  ``root``: the emulated multi-node cluster (``mdloader cluster``, root only);
  ``training``: a training run (minutes on CPU); each recipe or script it names is trained by a
  test (this test checks that a test file names it);
  ``benchmark``: a benchmark run (minutes to hours); tests/integration/test_bench*.py run the
  benchmarks reduced;
  ``synopsis``: a form with placeholders (``SCRIPT``, ``FILE.bp``, ``[--option]``), not a
  command to paste.

- no marker: this test runs the block. Commands belong in ```bash or ```console blocks; a
  command in a ```text or indented block fails the test (mark the block or fence it as bash).

The generated reference pages (docs/reference/, written by tools/gen_reference.py from the CLI's
``--help`` and the docstrings) cannot carry markers: their commands are classified by
:data:`GENERATED` below, and the others run.

**How they run.** In one temporary folder laid out like a clone (``recipes/``, ``slurm/`` and
``mdloader_plugin/`` linked), with this checkout's package and the venv's ``mdloader`` and
``mpiexec`` first on the path, each block as one ``bash -e`` script, in page order; a command
already run (after the substitutions) is not run again. :data:`SETUP` first makes what pages take
from others (the data set of Getting started, fairchem's demo shards, the demo runs' logs).
:data:`SIZES` keeps the run small: at most 2 ranks and smaller data sets, each substitution
listed with the reason.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

import docs_blocks
from mpirun import BIN, ROOT, mpi_env

KINDS = {"cluster", "network", "root", "training", "benchmark", "synopsis"}

#: commands of the generated reference pages that do not run here: (pattern, kind)
GENERATED = [
    (r"^mdloader cluster ", "root"),
    (r"^srun |\$MEMBERWORK", "cluster"),
    (r"mdloader train |mdloader run hydragnn|integrations\.fairchem -c", "training"),
    (r"convert (train\.aselmdb|traj\.extxyz)", "synopsis"),  # files of the reader's own
]

#: (pattern, replacement, why): applied to every command before it runs
SIZES = [
    (r"mpiexec -n ([3-9]|\d\d+)\b", "mpiexec -n 2", "2 cores: at most 2 ranks"),
    (r"--group-size 1,2,4\b", "--group-size 1,2", "group sizes that divide 2 ranks"),
    (r"--kind hydragnn --num-graphs (100000|3001)\b", "--kind hydragnn --num-graphs 301",
     "a synthetic set 10 to 300 times smaller"),
    (r"--kind oc20 --num-graphs 2000\b", "--kind oc20 --num-graphs 40", "slabs of 25-200 KB"),
    (r"--num-graphs 800,600\b", "--num-graphs 80,60", "a synthetic set 10 times smaller"),
    (r"--num-samples (1e8|100000000)\b", "--num-samples 1e6", "an index 100 times smaller"),
    (r"--steps 40\b", "--steps 8", "fewer timed steps"),
    (r"(mdloader calibrate --out \S+)", r"\1 --quick", "the quick calibration (seconds)"),
    (r"--train 256 --val 32\b", "--train 48 --val 16", "a demo set 5 times smaller"),
]

#: what pages take from other pages, made once before they run (these commands, as the pages
#: print them, are then not run again): Getting started's data set, fairchem's demo shards (its
#: converted file removed: the pages convert the shards); and :func:`demo_logs`
SETUP = [
    "mdloader synth --kind hydragnn --num-graphs 3001 --out data/mols.bp",
    "python -m mdloader_plugin.integrations.fairchem.data --out data/oc20 --train 256 --val 32",
    "rm -r data/oc20/oc20.bp",
]

PLACEHOLDER = re.compile(r"<[^>]+>|\[-|\.\.\.|\b(SCRIPT|ARGS|FILE|DATA|NAME)\b|\s[A-Z]\b")
REPO_PATH = re.compile(r"(?:recipes|\.venv/src/hydragnn-[\w]+/examples)/[\w./-]+")


def _trained_name(path: str) -> str:
    """What a test that trains `path` names: an upstream example's path below the HydraGNN tree
    (``examples/multibranch/train.py``), a recipe's file name (``mlip.yaml``)."""
    return "examples/" + path.split("/examples/", 1)[1] if "/examples/" in path \
        else path.rsplit("/", 1)[-1]


def _classify(b: docs_blocks.Block, cmd: str) -> str | None:
    """'run', 'test:NAME', a KIND, or None when a command in a text block has no marker."""
    if b.page.startswith("docs/reference/"):
        return next((kind for pat, kind in GENERATED if re.search(pat, cmd)), "run")
    if b.marker:
        return f"test:{b.marker[1]}" if b.marker[0] == "test" else b.marker[1]
    return "run" if b.lang in docs_blocks.SHELL | {"console"} else None


def _test_sources() -> str:
    here = Path(__file__).resolve()
    return "\n".join(p.read_text() for p in (ROOT / "tests").rglob("*.py") if p != here)


def collected() -> list[tuple]:
    """(block, command, class) of every command of every page."""
    return [(b, c, _classify(b, c)) for b in docs_blocks.all_blocks() for c in b.commands]


def test_every_command_is_run_by_a_test_or_marked():
    found = collected()
    assert len(found) > 100, len(found)  # the collection sees the pages
    tests = _test_sources()
    bad = []
    synopses = {}
    for b, cmd, cls in found:
        if cls is None:
            bad.append(f"{b.where}: `{cmd}` is in a ```{b.lang or 'indented'} block: put it in "
                       "a ```bash (or ```console) block, or mark the block (module docstring)")
        elif cls.startswith("test:"):
            if f'"{cls[5:]}"' not in tests:
                bad.append(f"{b.where}: marked test: {cls[5:]} but no test reads that block")
        elif cls not in KINDS | {"run"}:
            bad.append(f"{b.where}: unknown marker kind {cls!r} (one of {sorted(KINDS)})")
        elif cls == "synopsis" and b.marker:
            synopses[b.where] = synopses.get(b.where, False) or bool(PLACEHOLDER.search(cmd))
        elif cls == "training":
            for path in REPO_PATH.findall(cmd):
                if _trained_name(path) not in tests:
                    bad.append(f"{b.where}: marked training, but no test names {path}")
    bad += [f"{where}: marked synopsis but no command has a placeholder"
            for where, ok in synopses.items() if not ok]
    assert not bad, "\n".join(bad)


def substituted(cmd: str) -> str:
    for pat, new, _why in SIZES:
        cmd = re.sub(pat, new, cmd)
    return cmd


def _key(cmd: str) -> str:
    """A command without its trailing comment: the same command, explained twice, runs once."""
    return re.sub(r"\s+#[^'\"]*$", "", cmd)


def runnable() -> list[tuple[str, list[str]]]:
    """(where, commands) of every block this test runs, duplicates across blocks dropped."""
    seen, out = {_key(substituted(c)) for c in SETUP}, []
    for b in docs_blocks.all_blocks():
        cmds = [substituted(c) for c in b.commands if _classify(b, c) == "run"]
        keep = [c for c in cmds if _key(c) not in seen or c.split()[0] == "export"]
        seen.update(_key(c) for c in keep)
        if keep:
            out.append((b.where, keep))
    return out


def demo_logs(folder: Path) -> None:
    """The HydraGNN demo's two run logs (``logs/gin-demo-*/run.log``, 3 epoch lines each) that
    the compare-logs examples read: the demo's training is what the slow tests run."""
    from mdloader_plugin.core.epochlog import format_epoch_line

    for run, loader, wall in (("gin-demo-hydragnn", "hydragnn", 2.9),
                              ("gin-demo-mdloader", "mdloader", 0.5)):
        lines = [format_epoch_line(run=run, loader=loader, epoch=e, wall_s=wall, steps=10,
                                   backend="onesided" if loader == "mdloader" else "-",
                                   data_wait_s=wall / 4, samples=320) for e in range(3)]
        (folder / "logs" / run).mkdir(parents=True)
        (folder / "logs" / run / "run.log").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    d = tmp_path_factory.mktemp("clone")
    for name in ("recipes", "slurm", "mdloader_plugin"):
        (d / name).symlink_to(ROOT / name)
    env = _env()
    script = "\n".join(substituted(c) for c in SETUP)
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=d, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    demo_logs(d)
    return d


def _env() -> dict:
    env = {k: v for k, v in mpi_env().items() if not k.startswith("MDLOADER_")}
    env.update(PYTHONPATH=str(ROOT), PATH=f"{BIN}{os.pathsep}{env['PATH']}", PWD="",
               OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    return env


@pytest.mark.mpi
@pytest.mark.timeout(900)
def test_the_runnable_commands_run_as_printed(clone):
    blocks = runnable()
    assert len(blocks) > 10
    env, failed = _env(), []
    env["PWD"] = str(clone)
    for where, cmds in blocks:
        script = "\n".join(cmds)
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=clone, env=env,
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            failed.append(f"--- {where} (exit {r.returncode}):\n{script}\n"
                          f"{r.stdout[-1500:]}{r.stderr[-2500:]}")
    assert not failed, "\n".join(failed)


#: what docs/troubleshooting.md quotes of the lines a job prints: each must be on the page and,
#: as one string literal, in the package (a reworded message fails here until the page follows)
LOG_LINES = [
    " samples on ", " on all ranks; memory on rank 0: records ",
    "] memory on rank ", "N-proportional: ",
    "MDLOADER-BACKEND backend=", " predicted_s=", " measured_s=",
    "MDLOADER-EPOCH", "data_wait_s=",
    "MPI was initialised without MPI_THREAD_MULTIPLE: prefetch disabled",
    " did not complete in ", "although every rank is alive: ranks are stuck",
    "MPI world size ", " while loading (", ") but max_memory_per_rank is ",
    "MDLOADER_FETCH_TIMEOUT", "MDLOADER_READ_TIMEOUT",
]


def test_troubleshooting_quotes_what_the_code_prints():
    page = " ".join((ROOT / "docs" / "troubleshooting.md").read_text().split())
    source = "\n".join(p.read_text() for p in (ROOT / "mdloader_plugin").rglob("*.py"))
    assert not [f for f in LOG_LINES if f not in page], "not on the page"
    missing = [f for f in LOG_LINES if f not in source]
    assert not missing, f"docs/troubleshooting.md explains lines no longer printed: {missing}"


if __name__ == "__main__":  # what it sees: PYTHONPATH=tests python tests/integration/THIS_FILE
    for b, cmd, cls in collected():
        print(f"{cls or 'UNMARKED':10} {b.where:40} {substituted(cmd)[:110]}")
