"""Issue 16: same-host terms measured on a per-node sub-communicator (``Profile.node``).

A calibration across several hosts with more than one rank a host cannot identify the same-host
terms from its whole-job series; ``calibrate`` measures them again on each node's ranks and
stores them as ``node_params``, which a job or replica group inside one node is priced with."""

import json

import numpy as np
import pytest

from mdloader_plugin.store import budget as mem
from mdloader_plugin.estimator import ProfileError, Workload, get_profile, predict
from mdloader_plugin.estimator.calibrate import NODE_KEYS, wants_node_stage
from mdloader_plugin.estimator.choose import choose_initial, node_params
from mdloader_plugin.estimator.group_size import choose_layout
from mdloader_plugin.estimator.models import required_params
from mpirun import mpirun

OLD = "tests/data/profile-2x2-1gbit-no-node.json"  # written before node_params existed


def _with_node(tmp_path, node: dict, base="perlmutter", prov=None):
    doc = get_profile(base).to_json()
    doc["node_params"] = {k: {"value": v, "source": "test"} for k, v in node.items()}
    if prov is not None:
        doc["provenance"] = prov
    path = tmp_path / "node.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_old_profiles_load_without_node_terms_and_write_none():
    prof = get_profile(OLD)
    assert prof.node == {} and "node_params" not in prof.to_json()


def test_node_terms_round_trip(tmp_path):
    path = _with_node(tmp_path, {"coll.t_peer_intra": 2e-3, "os.t_step": 5e-6})
    prof = get_profile(path)
    assert prof.node == {"coll.t_peer_intra": 2e-3, "os.t_step": 5e-6}
    assert prof.node_sources["os.t_step"] == "test"
    again = tmp_path / "again.json"
    prof.write(again)
    assert get_profile(str(again)).node == prof.node


@pytest.mark.parametrize("node,match", [({"os.t_warp": 1e-6}, "not a cost-model parameter"),
                                        ({"os.t_step": 3.0}, "absurd"),
                                        ({"coll.bw_intra": "fast"}, "must be a number")])
def test_bad_node_terms_fail_in_one_line(tmp_path, node, match):
    with pytest.raises(ProfileError, match=match):
        get_profile(_with_node(tmp_path, node))


def test_node_stage_only_across_nodes_with_two_ranks_on_each():
    assert wants_node_stage(np.array([0, 0, 1, 1]))
    assert wants_node_stage(np.array([0, 0, 0, 1, 1, 1]))
    assert not wants_node_stage(np.array([0, 0, 0, 0]))  # one node: the whole run is the node
    assert not wants_node_stage(np.array([0, 1, 2, 3]))  # one rank a node: nothing to measure
    assert not wants_node_stage(np.array([0, 0, 1]))     # a node of one rank
    assert set(NODE_KEYS) <= set(required_params())


def test_node_terms_apply_only_inside_one_node(tmp_path):
    prof = get_profile(_with_node(tmp_path, {"coll.t_peer_intra": 2e-3, "os.t_flush_intra": 7e-4}))
    inside = node_params(prof, 4, 4)
    assert inside["coll.t_peer_intra"] == 2e-3 and inside["os.t_flush_intra"] == 7e-4
    assert inside["coll.t_peer_inter"] == prof.params["coll.t_peer_inter"]  # the rest unchanged
    for w, r in ((8, 4), (1, 4)):  # across nodes; one rank (no MPI at all)
        assert node_params(prof, w, r) == prof.params


def test_measured_node_terms_replace_the_bound(tmp_path):
    """An old cross-node calibration takes the per-peer cost at its node-side bound inside a
    node; one with node_params uses what was measured there."""
    old = get_profile(OLD)
    bound = node_params(old, 2, 2)["coll.t_peer_intra"]
    assert bound > 10 * old.params["coll.t_peer_intra"]
    doc = old.to_json()
    doc["node_params"] = {"coll.t_peer_intra": {"value": 4e-6, "source": "test"}}
    path = tmp_path / "measured.json"
    path.write_text(json.dumps(doc))
    assert node_params(get_profile(str(path)), 2, 2)["coll.t_peer_intra"] == 4e-6


def test_layout_and_initial_choice_price_a_host_local_group_with_node_terms(tmp_path):
    """The same whole-job numbers, two node measurements: the host-local group's pick (and the
    loader's initial backend inside it) follows what was measured inside the node, while the
    groups across nodes keep the whole-job prediction."""
    sizes = np.full(512, 6000)

    def pick(path):
        return choose_layout([1, 2, 4], 2, 4, 6000.0, 0.0, lambda w: mem.per_rank_bytes(sizes, w),
                             int(mem.per_rank_bytes(sizes, 2) * 1.2), "test", path)

    fast_coll = {"coll.t_step": 1e-6, "coll.t_peer_intra": 1e-6, "coll.t_sync": 1e-6,
                 "os.t_step": 5e-3, "os.t_flush_intra": 5e-3}
    slow_coll = {"coll.t_step": 5e-3, "coll.t_peer_intra": 5e-3, "coll.t_sync": 1e-6,
                 "os.t_step": 1e-6, "os.t_flush_intra": 1e-6}
    a = pick(_with_node(tmp_path, fast_coll, OLD, get_profile(OLD).provenance))
    by = {(c.backend, c.group_size): c.predicted_s for c in a.candidates}
    assert (a.group_size, a.backend) == (2, "collective"), a.log_lines()
    b = pick(_with_node(tmp_path, slow_coll, OLD, get_profile(OLD).provenance))
    assert (b.group_size, b.backend) == (2, "onesided"), b.log_lines()
    by_b = {(c.backend, c.group_size): c.predicted_s for c in b.candidates}
    for key in (("onesided", 4), ("collective", 4)):
        assert by[key] == by_b[key] == predict(key[0], Workload(4, 4, 6000.0, 0.0, 2),
                                               get_profile(OLD).params)
    path = _with_node(tmp_path, slow_coll, OLD, get_profile(OLD).provenance)
    assert choose_initial(2, 2, 4, np.full(64, 6000), path).backend == "onesided"


@pytest.mark.mpi
def test_calibrate_across_pretend_nodes_stores_node_terms(tmp_path):
    """On one host with node_of split [0, 0, 1, 1] the per-node stage runs on each pair of
    ranks and its fits land in node_params with their sources; on one node it does not run."""
    out = tmp_path / "two.json"
    r = mpirun(4, ["tests/mpi_scripts/calibrate_nodes.py", "0,0,1,1", out], timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "calibrate: [node] Gets, Alltoallv and backend steps on each node's 2 ranks" in r.stdout
    prof = get_profile(str(out))
    assert set(prof.node) == set(NODE_KEYS) - {"coll.pairwise"}  # 2 ranks cannot tell it
    assert all(prof.node_sources[k].startswith("node sub-communicator of 2 ranks: ")
               for k in prof.node)
    assert prof.provenance["node_ranks"] == 2
    assert "node_get_intra" in prof.provenance["fit_rel_rms"]
    assert "node_alltoallv" in prof.provenance["fit_rel_rms"]
    one = tmp_path / "one.json"
    r = mpirun(2, ["tests/mpi_scripts/calibrate_nodes.py", "0,0", one], timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "[node]" not in r.stdout and get_profile(str(one)).node == {}
