"""Bad input under real ``mpiexec``: one line naming the problem and what to do, said once, a
non-zero exit, and every rank gone within the time limit.

Table-driven: each case is a command line of the ``mdloader`` CLI (``check``, ``train hydragnn``,
``estimate``) run on 2 ranks with ``python -m mpi4py``, against files derived from the
session's one synthetic data set (truncated, corrupted, wrong dtypes, missing variables, empty or
too-small splits), bad arguments and bad configs/profiles. The assertions are the contract, not
timings: the job ends (``mpiexec`` returns only when every rank has exited) with a non-zero code,
and the output holds exactly one ``mdloader: error:`` line, matching what the case expects.
``tests/unit/loader/test_verify.py`` covers further cases of the same contract (batch size 0,
unknown backend, negative epochs, more ranks than samples, a missing file); they are not repeated
here.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import adios2
import numpy as np
import pytest

from mpirun import ROOT, mdloader

pytestmark = [pytest.mark.mpi]

LIMIT_S = 60  # a loaded 2-core machine starts 4 ranks in 10-20 s; a hang runs into this
DEMO = ROOT / "recipes" / "hydragnn" / "demo.yaml"


def write_layout(path: Path, n: int, *, count_dtype=np.int64, drop: str | None = None) -> Path:
    """A small file in HydraGNN's layout (keys x [n*3, 2] float32, y [n, 1] float64), written
    with ADIOS2 directly so that one detail can be wrong."""
    with adios2.Stream(str(path), "w") as out:
        out.write_attribute("trainset/ndata", np.array(n))
        out.write_attribute("trainset/keys", ["x", "y"])
        out.write_attribute("total_ndata", np.array(n))
        for key, width, rows, dt in (("x", 2, 3, np.float32), ("y", 1, 1, np.float64)):
            if n and drop != key:
                arr = np.arange(n * rows * width, dtype=dt).reshape(n * rows, width)
                out.write(f"trainset/{key}", arr, list(arr.shape), [0, 0], list(arr.shape))
            cnt = np.full(n, rows, dtype=count_dtype)
            off = (np.arange(n) * rows).astype(count_dtype)
            if n:
                out.write(f"trainset/{key}/variable_count", cnt, [n], [0], [n])
                out.write(f"trainset/{key}/variable_offset", off, [n], [0], [n])
            out.write_attribute(f"trainset/{key}/variable_dim", np.array(0))
    return path


@pytest.fixture(scope="module")
def files(synth_file, tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("corpus")
    out = {"synth": synth_file}
    trunc = d / "truncated.bp"
    shutil.copytree(synth_file, trunc)
    data0 = trunc / "data.0"
    data0.write_bytes(data0.read_bytes()[: data0.stat().st_size // 3])
    out["truncated"] = trunc
    corrupt = d / "corrupt.bp"
    shutil.copytree(synth_file, corrupt)
    for name in ("md.idx", "md.0"):
        raw = bytearray((corrupt / name).read_bytes())
        rng = np.random.default_rng(0)
        raw[16:] = rng.integers(0, 256, len(raw) - 16, dtype=np.uint8).tobytes()
        (corrupt / name).write_bytes(bytes(raw))
    out["corrupt"] = corrupt
    (d / "notadios.bp").write_text("this is a text file, not ADIOS2\n")
    out["notadios"] = d / "notadios.bp"
    out["floatcounts"] = write_layout(d / "floatcounts.bp", 8, count_dtype=np.float64)
    out["missingvar"] = write_layout(d / "missingvar.bp", 8, drop="y")
    from mdloader_plugin.sources import synth
    from mdloader_plugin.sources.adios import write_graphs

    out["empty"] = d / "empty.bp"  # an empty split, as `mdloader synth --split 1,0,0` writes it
    write_graphs(out["empty"], {"trainset": list(synth.generate("hydragnn", 1, 0, 4)),
                                "valset": []})
    prof = json.loads((ROOT / "mdloader_plugin/estimator/profiles/local.json").read_text())
    missing = json.loads(json.dumps(prof))
    missing["params"].pop(sorted(missing["params"])[0])
    (d / "missing.json").write_text(json.dumps(missing))
    absurd = json.loads(json.dumps(prof))
    key = next(k for k, v in absurd["params"].items() if "bw" in k or "bandwidth" in k)
    absurd["params"][key]["value"] = 3.0  # 3 bytes a second
    (d / "absurd.json").write_text(json.dumps(absurd))
    out["profile_missing"], out["profile_absurd"] = d / "missing.json", d / "absurd.json"
    return out


def hydragnn(*sets: str) -> list[str]:
    args = ["train", "hydragnn", "--config", str(DEMO), "--set", "Dataset.path={synth}",
            "--set", "NeuralNetwork.Training.num_epoch=1"]
    for s in sets:
        args += ["--set", s]
    return args


# id, ranks, mdloader arguments, extra env, regex the one error line must match
CASES = [
    # files
    ("truncated-adios2", 2, ["check", "{truncated}"], {}, r"truncated"),
    ("corrupted-adios2", 2, ["check", "{corrupt}"], {}, r"corrupt\.bp: .*(corrupt|ADIOS2)"),
    ("not-an-adios2-file", 2, ["check", "{notadios}"], {}, r"not a readable ADIOS2 file"),
    ("unknown-label", 2, ["check", "{synth}", "--label", "valset"], {},
     r"label 'valset' not found \(labels here: trainset\)"),
    ("counts-stored-as-float", 2, ["check", "{floatcounts}"], {},
     r"variable_count has ADIOS2 type 'double'.*int64"),
    ("variable-missing", 2, ["check", "{missingvar}"], {}, r"'trainset/y' is missing"),
    ("zero-samples", 2, ["check", "{empty}", "--label", "valset"], {},
     r"holds no samples.*choose a label"),
    ("prefetch-negative", 2, ["check", "{synth}", "--prefetch", "-2"], {}, r"--prefetch must be"),
    ("bad-size-unit", 2, ["check", "{synth}", "--max-memory-per-rank", "4XB"], {},
     r"--max-memory-per-rank: '4XB' is not a size"),
    ("budget-too-small", 2, ["check", "{synth}", "--max-memory-per-rank", "300KiB"], {},
     r"max_memory_per_rank is 300\.0 KiB.*run with at least \d+ ranks"),
    ("budget-below-index", 2, ["check", "{synth}", "--max-memory-per-rank", "10KiB"], {},
     r"index alone"),
    ("unknown-profile", 2, ["check", "{synth}", "--backends", "auto"],
     {"MDLOADER_PROFILE": "summit"}, r"profile 'summit' is neither a shipped profile"),
    ("profile-missing-key", 2, ["check", "{synth}", "--backends", "auto"],
     {"MDLOADER_PROFILE": "{profile_missing}"}, r"missing\.json: missing key"),
    ("profile-absurd-number", 2, ["check", "{synth}", "--backends", "auto"],
     {"MDLOADER_PROFILE": "{profile_absurd}"}, r"absurd\.json: key .* is absurd"),
    ("estimate-zero-ranks", 2, ["estimate", "--ranks", "0", "--batch-size", "4",
                                "--sample-bytes", "1000"], {}, r"must be an integer >= 1"),
    # configs
    ("config-loader-typo", 2, hydragnn("loader=mdloder"), {},
     r"loader: 'mdloder' is unknown; choose one of mdloader, hydragnn"),
    ("config-section-typo", 2, hydragnn("mdlaoder.backend=onesided"), {},
     r"top-level key 'mdlaoder' is not known; did you mean 'mdloader'"),
    ("config-option-typo", 2, hydragnn("mdloader.batchsize=4"), {},
     r"mdloader\.batchsize is not an option; options: backend"),
    ("config-prefetch-negative", 2, hydragnn("mdloader.prefetch=-1"), {},
     r"mdloader\.prefetch must be an integer >= 0"),
    ("config-batch-size-zero", 2, hydragnn("NeuralNetwork.Training.batch_size=0"), {},
     r"batch_size must be a positive integer, got 0"),
    ("config-budget-too-small", 2, hydragnn("mdloader.max_memory_per_rank=200KiB"), {},
     r"max_memory_per_rank is 200\.0 KiB.*run with at least \d+ ranks"),
]


def fill(text: str, files: dict) -> str:
    return text.format(**{k: str(v) for k, v in files.items()})


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_nonzero_exit_no_hang(case, files, tmp_path):
    name, ranks, args, env, expect = case
    try:
        r = mdloader(ranks, [fill(a, files) for a in args], timeout=LIMIT_S, cwd=tmp_path,
                     env={k: fill(v, files) for k, v in env.items()})
    except subprocess.TimeoutExpired:
        pytest.fail(f"{name}: the job was still running after {LIMIT_S} s (a rank hangs)")
    out = r.stdout + r.stderr
    lines = [ln for ln in out.splitlines() if ln.startswith("mdloader: error:")]
    assert r.returncode != 0, out[-3000:]
    assert len(lines) == 1, f"expected the error once, got {len(lines)}:\n{out[-3000:]}"
    assert re.search(expect, lines[0]), lines[0]
    assert "Traceback" not in out, out[-3000:]


def test_batch_larger_than_data_set_is_one_short_batch(files, tmp_path):
    """DistributedSampler semantics: a batch size above the rank's share gives one short batch
    (every sample served once per epoch), not an error."""
    r = mdloader(2, ["check", str(files["synth"]), "--batch-size", "100000", "--epochs", "2"],
                 timeout=LIMIT_S * 2, cwd=tmp_path)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert "check ok: 2 ranks, 2 epochs, 3001 samples" in r.stdout
