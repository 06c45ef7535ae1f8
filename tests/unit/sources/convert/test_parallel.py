"""Conversion in parts: any cut of the inputs into parts, any number of ranks, an interrupted
run resumed, gives the file one process writes (every variable compared byte for byte); bad
input stops with one line naming the file and structure, and leaves no output."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from mdloader_plugin.core.errors import DataError
from mdloader_plugin.sources import convert
from mdloader_plugin.sources.convert import parallel

from adios_contents import bp_contents  # test_parallel_mpi imports it from here too


def oc20_like(k: int):
    """A small periodic slab with an adsorbate, energy and forces (OC20's fields)."""
    from ase.build import add_adsorbate, fcc111
    from ase.calculators.singlepoint import SinglePointCalculator
    from ase.constraints import FixAtoms

    rng = np.random.default_rng(k)
    a = fcc111("Cu", (2, 2, 2 + k % 2), vacuum=5.0)
    add_adsorbate(a, "O" if k % 3 else "C", 1.7, "fcc")
    a.positions += rng.normal(0, 0.05, a.positions.shape)
    a.set_tags([1] * (len(a) - 1) + [2])
    a.set_constraint(FixAtoms(indices=range(4)))
    a.calc = SinglePointCalculator(a, energy=-1.5 * k, forces=rng.normal(size=(len(a), 3)))
    return a


def write_shards(folder, per_shard=(3, 2, 4)) -> list:
    """An OC20/fairchem-style folder of ``.aselmdb`` shards (ASE's aselmdb backend)."""
    import ase.db

    folder.mkdir(parents=True, exist_ok=True)
    k, out = 0, []
    for s, n in enumerate(per_shard):
        with ase.db.connect(str(folder / f"data.{s:04d}.aselmdb")) as db:
            for _ in range(n):
                a = oc20_like(k)
                db.write(a, sid=k, data={"ref_energy": -0.5 * k})
                out.append(a)
                k += 1
    return out


def test_any_cut_into_parts_gives_the_same_file(tmp_path):
    src = tmp_path / "train"
    write_shards(src)
    one = tmp_path / "one.bp"
    convert.convert(str(src), str(one), split=(0.5, 0.25, 0.25), seed=3,
                    part_size=100, x=["atomic_numbers", "forces"], y=["energy"])
    ref = bp_contents(one)
    assert {"trainset/edge_index", "valset/x", "testset/y"} <= set(ref)
    for size in (1, 2):
        out = tmp_path / f"p{size}.bp"
        convert.convert(str(src), str(out), split=(0.5, 0.25, 0.25), seed=3, part_size=size,
                        x=["atomic_numbers", "forces"], y=["energy"])
        assert bp_contents(out) == ref
        assert not os.path.exists(str(out) + ".parts")


def test_extxyz_ranges_equal_one_pass(tmp_path):
    from ase.io import write

    src = tmp_path / "md.extxyz"
    write(str(src), [oc20_like(k) for k in range(5)], format="extxyz")
    a, b = tmp_path / "a.bp", tmp_path / "b.bp"
    convert.convert(str(src), str(a), part_size=5)
    convert.convert(str(src), str(b), part_size=2)
    assert bp_contents(a) == bp_contents(b)
    assert parallel.make_parts([(str(src), convert.detect(str(src)))], [np.array([5])], 2)[2][
        "start"] == 4


def test_interrupted_run_resumes_without_redoing_parts(tmp_path, monkeypatch):
    src = tmp_path / "train"
    write_shards(src)
    ref = tmp_path / "ref.bp"
    convert.convert(str(src), str(ref), part_size=2)
    out = tmp_path / "out.bp"
    real, calls = parallel.run_parts, []

    def interrupted(comm, work, plan, todo, convert_part, *rest, **kw):
        def part(p, folder):
            if len(calls) == 3:
                raise KeyboardInterrupt  # what Ctrl-C raises
            calls.append(p["first"])
            convert_part(p, folder)
        return real(comm, work, plan, todo, part, *rest, **kw)

    monkeypatch.setattr(parallel, "run_parts", interrupted)
    with pytest.raises(KeyboardInterrupt):
        convert.convert(str(src), str(out), part_size=2)
    assert not out.exists() and len(os.listdir(str(out) + ".parts")) >= 4  # plan + 3 parts
    seen = []
    monkeypatch.setattr(parallel, "run_parts", lambda comm, work, plan, todo, *rest, **kw:
                        seen.extend(todo) or real(comm, work, plan, todo, *rest, **kw))
    convert.convert(str(src), str(out), part_size=2)
    assert seen == [3, 4]  # 5 parts (shards of 3, 2, 4 structures by 2): 3 were done
    assert bp_contents(out) == bp_contents(ref)


def _interrupt_after(monkeypatch, n: int, *args, **kw) -> None:
    """``convert.convert(*args, **kw)`` stopped (Ctrl-C) after `n` parts."""
    real, calls = parallel.run_parts, []

    def interrupted(comm, work, plan, todo, convert_part, *rest, **kw):
        def part(p, folder):
            if len(calls) == n:
                raise KeyboardInterrupt
            calls.append(p["first"])
            convert_part(p, folder)
        return real(comm, work, plan, todo, part, *rest, **kw)

    with monkeypatch.context() as m:
        m.setattr(parallel, "run_parts", interrupted)
        with pytest.raises(KeyboardInterrupt):
            convert.convert(*args, **kw)


def test_parts_of_another_version_are_not_reused(tmp_path, monkeypatch, capsys):
    """A resume whose plan was saved by another version of the converter (another version
    named, or none: what the converter wrote before it named one) starts again, saying so,
    rather than joining parts that version wrote; the file is the one process's."""
    src = tmp_path / "train"
    write_shards(src)
    ref = tmp_path / "ref.bp"
    convert.convert(str(src), str(ref), part_size=2)
    out = tmp_path / "out.bp"
    plan_path = tmp_path / "out.bp.parts" / "plan.json"
    real = parallel.run_parts
    for version in ("another", None):
        _interrupt_after(monkeypatch, 3, str(src), str(out), part_size=2)
        plan = json.loads(plan_path.read_text())
        if version is None:
            plan["fingerprint"].pop("version", None)
        else:
            plan["fingerprint"]["version"] = version
        plan_path.write_text(json.dumps(plan))
        capsys.readouterr()
        seen = []
        monkeypatch.setattr(parallel, "run_parts", lambda comm, work, plan, todo, *rest, **kw:
                            seen.extend(todo) or real(comm, work, plan, todo, *rest, **kw))
        convert.convert(str(src), str(out), part_size=2)
        monkeypatch.undo()
        err = capsys.readouterr().err
        assert seen == [0, 1, 2, 3, 4] and "already done" not in err, err
        assert "written by another version of mdloader convert" in err
        assert bp_contents(out) == bp_contents(ref)
        shutil.rmtree(out)


def test_parts_plan_and_output_are_on_disk_before_they_count(tmp_path, monkeypatch):
    """What a resume or a reader takes as done (a part's folder, the plan, the output) gets its
    name only once every file in it is flushed (``os.fsync``), and the folder holding the new
    name is flushed after the rename: a crash cannot leave a done part with lost contents."""
    src = tmp_path / "train"
    write_shards(src, (3, 2))
    synced, renames = [], []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        synced.append(os.path.realpath(os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(a, b):
        a, b = os.fspath(a), os.fspath(b)
        inside = [a] if not os.path.isdir(a) else [
            os.path.join(d, f) for d, _, fs in os.walk(a) for f in fs] + [a]
        renames.append((b, [p for p in inside if os.path.realpath(p) not in synced],
                        len(synced)))
        real_replace(a, b)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    out = tmp_path / "o.bp"
    convert.convert(str(src), str(out), part_size=1)
    done = [r for r in renames if os.path.basename(r[0]).startswith("part-")
            or os.path.basename(r[0]) == "plan.json" or r[0] == str(out)]
    assert len([r for r in done if "part-" in r[0]]) == 5 and done[-1][0] == str(out), renames
    for name, unsynced, at in done:
        assert not unsynced, (name, unsynced)
        parent = os.path.realpath(os.path.dirname(name))
        assert parent in synced[at:], name  # the rename itself flushed
    assert bp_contents(out)


def test_resume_refuses_other_options(tmp_path, monkeypatch):
    src = tmp_path / "train"
    write_shards(src, (2,))
    work = tmp_path / "o.bp.parts"
    monkeypatch.setattr(parallel, "run_parts", lambda *a, **k: (_ for _ in ()).throw(
        KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        convert.convert(str(src), str(tmp_path / "o.bp"), radius=5.0)
    monkeypatch.undo()
    with pytest.raises(DataError, match="interrupted conversion of other inputs or options"):
        convert.convert(str(src), str(tmp_path / "o.bp"), radius=4.0)
    assert work.exists()
    convert.convert(str(src), str(tmp_path / "o.bp"), radius=4.0, overwrite=True)
    assert not work.exists()


def test_bad_input_one_line_and_no_output(tmp_path):
    src = tmp_path / "train"
    write_shards(src, (2, 3))
    import ase.db

    with ase.db.connect(str(src / "data.0001.aselmdb")) as db:
        db.write(oc20_like(9).copy())  # no calculator: no energy
    out = tmp_path / "o.bp"
    with pytest.raises(DataError, match=r"data\.0001\.aselmdb: structure 3 has no field "
                                        r"'energy' \(asked by --y\)"):
        convert.convert(str(src), str(out), y=["energy"], part_size=2)
    assert not out.exists()
    out.mkdir()
    with pytest.raises(DataError, match="o.bp exists: pass --overwrite"):
        convert.convert(str(src), str(out))
    out.rmdir()
    shard = src / "data.0001.aselmdb"
    shard.write_bytes(shard.read_bytes()[:5000])  # truncated
    with pytest.raises(DataError, match=r"data\.0001\.aselmdb"):
        convert.convert(str(src), str(out))
    assert not out.exists()
    with pytest.raises(DataError, match=r"data\.0000\.aselmdb.*not an \(extended\) XYZ"):
        convert.convert(str(src / "data.0000.aselmdb"), str(out), kind="extxyz")
    assert not out.exists()


def test_two_jobs_write_the_one_process_file(tmp_path, monkeypatch):
    """``jobs=2`` (``--jobs 2``): a forked worker converts parts beside this process; the file
    one process writes; a bad structure stops both with its one line and no output."""
    src = tmp_path / "train"
    write_shards(src, (3, 2, 4))
    opts = dict(split=(0.6, 0.2, 0.2), seed=5, x=["atomic_numbers", "forces"], y=["energy"],
                part_size=1)
    one, two = tmp_path / "one.bp", tmp_path / "two.bp"
    convert.convert(str(src), str(one), **opts)
    log, real = tmp_path / "pids", parallel._claim_loop

    def spy(claims, parts, todo, work, convert_part):  # runs in the worker only
        def part(p, folder):
            with open(log, "a") as f:
                f.write(f"{os.getpid()}\n")
            convert_part(p, folder)
        real(claims, parts, todo, work, part)

    monkeypatch.setattr(parallel, "_claim_loop", spy)
    convert.convert(str(src), str(two), jobs=2, **opts)
    assert bp_contents(two) == bp_contents(one)
    assert not os.path.exists(str(two) + ".parts")
    assert {int(x) for x in log.read_text().split()} - {os.getpid()}  # the worker did parts
    import ase.db

    with ase.db.connect(str(src / "data.0002.aselmdb")) as db:
        db.write(oc20_like(9).copy())  # no calculator: no energy
    bad = tmp_path / "bad.bp"
    with pytest.raises(DataError, match=r"data\.0002\.aselmdb: structure 4 has no field"):
        convert.convert(str(src), str(bad), jobs=2, **opts)
    assert not bad.exists()


def test_parts_are_assembled_while_converting(tmp_path, monkeypatch):
    """Rank 0 adds each finished part to the file before it converts the next (one process:
    convert 0, add 0, convert 1, add 1, ...), rather than all parts after the last."""
    from mdloader_plugin.sources.assemble import PartAssembler

    src = tmp_path / "train"
    write_shards(src, (3, 2))
    events, add, run = [], PartAssembler.add, parallel.run_parts

    def adding(self, folder):
        events.append(("add", os.path.basename(folder)))
        return add(self, folder)

    def running(comm, work, plan, todo, convert_part, *rest, **kw):
        def part(p, folder):
            events.append(("convert", os.path.basename(folder)))
            convert_part(p, folder)
        return run(comm, work, plan, todo, part, *rest, **kw)

    monkeypatch.setattr(PartAssembler, "add", adding)
    monkeypatch.setattr(parallel, "run_parts", running)
    convert.convert(str(src), str(tmp_path / "o.bp"), part_size=1)
    names = [f"part-{i:06d}" for i in range(5)]
    assert events == [(what, n) for n in names for what in ("convert", "add")]
