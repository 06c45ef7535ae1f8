"""Several writers' files read as one data set (``mdloader convert --writers W``): every
variable and attribute, read through the joined reader, is the one file's byte for byte, also for
keys whose varying dimension shows only in a later writer's graphs (the writers agree on it); a
missing or mixed file, or writers that disagree, stop with one line."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from adios_contents import bp_contents
from test_assemble import graphs

from mdloader_plugin.core.errors import DataError
from mdloader_plugin.sources.adios import GraphFile
from mdloader_plugin.sources.assemble import PartAssembler, agree_shapes, assemble
from mdloader_plugin.sources.convert import writers as wr
from mdloader_plugin.sources.joined import MANIFEST, write_manifest
from mdloader_plugin.sources.writer import GraphWriter

LABELS = ("trainset", "valset", "testset")
VDIMS = {"edge_index": 1}


def spool(tmp_path, items, part_size: int) -> list[str]:
    folders = []
    for at in range(0, len(items), part_size):
        w = GraphWriter(tmp_path / "p.out", labels=LABELS, in_memory=True)
        for label, g in items[at:at + part_size]:
            w.add(label, g)
        folders.append(str(tmp_path / f"part-{at:04d}"))
        w.save_part(folders[-1])
    return folders


def joined(tmp_path, folders, sizes, writers: int, agree: bool = True) -> str:
    """What `writers` writer ranks leave: a file a run of parts, the manifest."""
    runs = wr.groups([{"start": 0, "stop": n} for n in sizes], writers)
    out = tmp_path / f"joined-{writers}.bp"
    out.mkdir()
    asms = []
    for w, (a, b) in enumerate(runs):
        asms.append(PartAssembler(str(out / f"sub-{w:04d}.bp"), {"dataset_name": "t"}, VDIMS,
                                  LABELS))
        for f in folders[a:b]:
            asms[-1].add(f)
    shapes = agree_shapes([a.shapes_seen() for a in asms], VDIMS, str(out)) if agree else None
    counts = [a.close(shapes) for a in asms]
    got = write_manifest(str(out), [f"sub-{w:04d}.bp" for w in range(len(runs))])
    assert got == {lab: sum(c[lab] for c in counts) for lab in LABELS}
    return str(out)


@pytest.mark.parametrize("writers", [2, 3, 5])
def test_writers_files_read_as_the_one_file(tmp_path, writers):
    items = graphs(40)
    folders = spool(tmp_path, items, 3)
    sizes = [min(3, 40 - at) for at in range(0, 40, 3)]
    assemble(str(tmp_path / "one.bp"), folders, {"dataset_name": "t"}, VDIMS, LABELS)
    out = joined(tmp_path, folders, sizes, writers)
    assert len(os.listdir(out)) == writers + 1
    assert bp_contents(out) == bp_contents(tmp_path / "one.bp")
    with GraphFile(tmp_path / "one.bp") as a, GraphFile(out) as b:
        assert a.labels() == b.labels() and a.global_attributes() == b.global_attributes()
        for label in a.labels():
            n = a.info(label).ndata
            assert a.info(label) == b.info(label)
            for lo, hi in [(0, n), (1, n - 1), (n // 3, n // 3 + 2), (n - 1, n)] if n > 2 else []:
                x, y = a.read_block(label, lo, hi), b.read_block(label, lo, hi)
                for key in x.arrays:
                    assert x.arrays[key].tobytes() == y.arrays[key].tobytes()
                    assert (x.local_offsets[key] == y.local_offsets[key]).all()


def test_writers_that_do_not_agree_on_a_varying_dimension_are_refused(tmp_path):
    """``wide`` varies (in dimension 1) only in the last third of the graphs: a writer of the
    first two thirds alone would store it along dimension 0, so the writers must agree."""
    items = graphs(40)
    folders = spool(tmp_path, items, 4)
    with pytest.raises(DataError, match="varies along dimensions .* writers did not agree"):
        joined(tmp_path, folders, [4] * 10, 2, agree=False)


def test_files_are_opened_when_a_read_needs_them(tmp_path):
    """A rank reading its block opens the files the block spans (and the first, for the
    attributes), not every file."""
    folders = spool(tmp_path, graphs(40), 2)
    out = joined(tmp_path, folders, [2] * 20, 5)
    with GraphFile(out) as f:
        assert f.info("trainset").ndata == 30  # the attributes: the first file's
        assert sorted(f._r.readers) == [0]
        f.read_block("trainset", 28, 30)
        assert sorted(f._r.readers) == [0, 4]
        f.read_block("trainset", 0, 30)
        assert sorted(f._r.readers) == [0, 1, 2, 3, 4]


def test_a_missing_or_mixed_file_is_one_line(tmp_path):
    folders = spool(tmp_path, graphs(24), 4)
    out = joined(tmp_path, folders, [4] * 6, 3)
    shutil.move(os.path.join(out, "sub-0001.bp"), tmp_path / "away.bp")
    with pytest.raises(DataError, match=r"sub-0001.bp: missing \(listed in mdloader-joined"):
        GraphFile(out).read_block("trainset", 0, 18)
    shutil.move(tmp_path / "away.bp", os.path.join(out, "sub-0001.bp"))
    with open(os.path.join(out, MANIFEST)) as f:
        m = json.load(f)
    m["variables"]["trainset/pos"]["extents"][1] += 1  # a file of another conversion
    with open(os.path.join(out, MANIFEST), "w") as f:
        json.dump(m, f)
    with pytest.raises(DataError, match="sub-0001.bp: trainset/pos is not the one mdloader-j"):
        GraphFile(out).read_block("trainset", 0, 18)
    with open(os.path.join(out, MANIFEST), "w") as f:
        f.write("{")
    with pytest.raises(DataError, match="mdloader-joined.json: unreadable"):
        GraphFile(out)


def test_writers_refuse_two_dtypes_or_two_varying_dimensions():
    a = {"trainset/z": ["<f4", [3, 2], [5, 2]]}
    with pytest.raises(DataError, match="trainset/z: dtype/rank float64/2 in one writer"):
        agree_shapes([a, None, {"trainset/z": ["<f8", [3, 2], [3, 2]]}], {}, "o.bp")
    with pytest.raises(DataError, match="varies in more than one dimension"):
        agree_shapes([a, {"trainset/z": ["<f4", [4, 1], [4, 1]]}], {}, "o.bp")
    got = agree_shapes([a, {"trainset/z": ["<f4", [9, 2], [9, 2]]}], {}, "o.bp")
    assert got == {"trainset/z": ["<f4", [3, 2], [9, 2]]}


def test_runs_share_the_structures_and_are_claimed_at_one_pace():
    parts = [{"start": 0, "stop": n} for n in [5, 5, 5, 5, 1, 1, 1, 1, 1, 5]]
    runs = wr.groups(parts, 3)
    assert runs[0][0] == 0 and runs[-1][1] == len(parts)
    assert all(a < b for a, b in runs) and all(x[1] == y[0] for x, y in zip(runs, runs[1:]))
    sizes = [sum(p["stop"] for p in parts[a:b]) for a, b in runs]
    assert max(sizes) - min(sizes) <= 5, sizes
    assert wr.groups(parts[:2], 4) == [(0, 1), (1, 2)]  # at most a run a part
    order = wr.claim_order(list(range(len(parts))), runs)
    assert sorted(order) == list(range(len(parts)))
    firsts = order[:len(runs)]
    assert firsts == [a for a, _ in runs]  # every writer's first part is claimed first
    assert [wr.writer_rank(w, 8, 3) for w in range(3)] == [0, 2, 5]
    assert [wr.mine(r, 8, runs) for r in range(8)] == [0, None, 1, None, None, 2, None, None]


def test_hydragnns_per_graph_reader_reads_the_joined_set_as_the_one_file(tmp_path):
    """``loader: hydragnn`` (HydraGNN's per-graph box reads, the drop-in's dataset): graph by
    graph, the same arrays from the joined data set as from the one file."""
    from mdloader_plugin.integrations.hydragnn.baseline import AdiosGraphDataset

    items = graphs(30)
    folders = spool(tmp_path, items, 3)
    assemble(str(tmp_path / "one.bp"), folders, {"dataset_name": "t"}, VDIMS, LABELS)
    out = joined(tmp_path, folders, [3] * 10, 4)
    for label in ("trainset", "valset"):
        a = AdiosGraphDataset(str(tmp_path / "one.bp"), label, dict)
        b = AdiosGraphDataset(out, label, dict)
        assert len(a) == len(b) > 0
        for i in range(len(a)):
            x, y = a[i], b[i]
            assert x.keys() == y.keys()
            assert all(x[k].tobytes() == y[k].tobytes() for k in x)
