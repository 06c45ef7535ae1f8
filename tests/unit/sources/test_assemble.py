"""Parts written into one file while they arrive (:class:`PartAssembler`) give the arrays one
:class:`GraphWriter` writes from every graph: in small blocks, with keys whose varying
dimension shows only late (a key constant in the first parts that varies later in dimension 0,
or only in dimension 1), forced dimensions and graphs without edges."""

from __future__ import annotations

import os

import numpy as np
import pytest
from adios_contents import bp_contents

from mdloader_plugin.core.errors import DataError
from mdloader_plugin.sources.assemble import PartAssembler, assemble
from mdloader_plugin.sources import writer
from mdloader_plugin.sources.writer import GraphWriter


def graphs(n: int, seed: int = 0) -> list[tuple[str, dict]]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        atoms = 4 if i < n // 2 else int(rng.integers(1, 6))  # constant, then varying
        edges = int(rng.integers(0, 7)) if i % 5 else 0
        width = 2 if i < 2 * n // 3 else int(rng.integers(1, 4))  # dim 1 varies late
        out.append(("trainset" if i % 4 else "valset", {
            "pos": rng.normal(size=(atoms, 3)).astype(np.float32),
            "edge_index": rng.integers(0, 9, size=(2, edges)),
            "cell": rng.normal(size=(3, 3)),
            "wide": rng.normal(size=(1, width)).astype(np.float32),
            "energy": np.array([rng.normal()])}))
    return out


@pytest.mark.parametrize("part_size,chunk,memory", [(1, 64, None), (3, 200, 300),
                                                    (7, 1 << 20, 1 << 20)])
def test_parts_in_blocks_equal_one_writer(tmp_path, monkeypatch, part_size, chunk, memory):
    """`memory`: parts held in memory up to that many bytes (None: a file a key), so some keys
    of a part spill to their own file and the others go into its ``data.raw``."""
    monkeypatch.setattr(writer, "PART_MEMORY", memory or 0)
    items = graphs(40)
    vdims = {"edge_index": 1}
    with GraphWriter(tmp_path / "one.bp", {"dataset_name": "t"}, vdims,
                     labels=("trainset", "valset", "testset")) as w:
        for label, g in items:
            w.add(label, g)
    folders = []
    for at in range(0, len(items), part_size):
        w = GraphWriter(tmp_path / "p.out", labels=("trainset", "valset", "testset"),
                        in_memory=memory is not None)
        for label, g in items[at:at + part_size]:
            w.add(label, g)
        folders.append(str(tmp_path / f"part-{at}"))
        w.save_part(folders[-1])
        files = sorted(os.listdir(folders[-1]))
        if memory == 1 << 20:  # nothing spilled: one data file a part
            assert files == ["data.raw", "part.json"]
        elif memory is None:
            assert len(files) == 2 + len({k for _, g in items[at:at + part_size] for k in g})
    if memory == 300:
        assert any(len(os.listdir(f)) > 2 for f in folders)  # some keys spilled
    counts = assemble(str(tmp_path / "parts.bp"), folders, {"dataset_name": "t"}, vdims,
                      ("trainset", "valset", "testset"), chunk_bytes=chunk)
    assert counts == {"trainset": 30, "valset": 10, "testset": 0}
    ref = bp_contents(tmp_path / "one.bp")
    assert ref["@valset/wide/variable_dim"] == repr(np.int64(1))
    assert bp_contents(tmp_path / "parts.bp") == ref


def test_a_second_varying_dimension_is_refused(tmp_path):
    folders = []
    for i, shape in enumerate([(2, 3), (3, 3), (3, 4)]):
        w = GraphWriter(tmp_path / "p.out")
        w.add("trainset", {"a": np.zeros(shape)})
        folders.append(str(tmp_path / f"part-{i}"))
        w.save_part(folders[-1])
    asm = PartAssembler(str(tmp_path / "x.bp"), chunk_bytes=8)
    with pytest.raises(DataError, match="trainset/a varies in more than one dimension"):
        for f in folders:
            asm.add(f)
    asm.discard()


@pytest.mark.parametrize("chunk", [3000, 1 << 20])
def test_long_rows_read_into_place_equal_one_writer(tmp_path, chunk):
    """``edge_index``-like keys of hundreds of edges a graph (rows read straight into the
    block, blocks cut inside parts and across them) and empty graphs between."""
    rng = np.random.default_rng(3)
    items = [{"edge_index": rng.integers(0, 1 << 40, size=(2, 0 if i % 7 == 3 else
                                                               int(rng.integers(256, 700)))),
              "shift": rng.normal(size=(1, int(rng.integers(300, 500)), 3)).astype(np.float32)}
             for i in range(30)]
    vdims = {"edge_index": 1, "shift": 1}
    with GraphWriter(tmp_path / "one.bp", {}, vdims, labels=("trainset",)) as w:
        for g in items:
            w.add("trainset", g)
    folders = []
    for at in range(0, len(items), 4):
        w = GraphWriter(tmp_path / "p.out", labels=("trainset",), in_memory=True)
        for g in items[at:at + 4]:
            w.add("trainset", g)
        folders.append(str(tmp_path / f"part-{at}"))
        w.save_part(folders[-1])
    assemble(str(tmp_path / "parts.bp"), folders, {}, vdims, ("trainset",), chunk_bytes=chunk)
    assert bp_contents(tmp_path / "parts.bp") == bp_contents(tmp_path / "one.bp")
