"""A calibrated profile records the shape it was measured on (nodes, ranks a node, MPI); a job
beyond that shape is told so once, with how to recalibrate (estimator.profile.shape_note)."""

from mdloader_plugin.estimator.profile import Profile, shape_note

MPICH = "MPI VERSION    : CRAY MPICH version 8.1.30"


def calibrated(nodes: int, rpn: int, mpi: str = MPICH) -> Profile:
    return Profile("calibrated-nid001", {"t_get": 1e-6}, provenance={
        "kind": "calibrated", "nodes": nodes, "ranks_per_node": rpn, "mpi_library": mpi},
        path="/scratch/p.json")


def test_a_job_within_the_shape_is_not_told_anything():
    assert shape_note(calibrated(2, 4), nodes=64, ranks_per_node=4, mpi_library=MPICH) is None
    assert shape_note(calibrated(1, 4), nodes=1, ranks_per_node=4, mpi_library=MPICH) is None
    assert shape_note(calibrated(2, 8), nodes=2, ranks_per_node=2, mpi_library=None) is None


def test_shipped_profiles_have_no_shape_to_exceed():
    shipped = Profile("perlmutter", {"t_get": 1e-6}, provenance={"kind": "published"})
    assert shape_note(shipped, nodes=64, ranks_per_node=4, mpi_library=MPICH) is None


def test_a_one_node_profile_across_nodes_says_so_and_how_to_recalibrate():
    note = shape_note(calibrated(1, 4), nodes=64, ranks_per_node=4, mpi_library=MPICH)
    assert note.startswith("profile /scratch/p.json was calibrated on 1 node x 4 ranks a node; "
                           "this job runs 64 nodes x 4 ranks a node: ")
    assert "one node: its inter-node figures are copies of the intra-node ones" in note
    assert ("recalibrate on two or more nodes with this job's ranks a node: srun -N 2 "
            "--ntasks-per-node 4 python -m mpi4py -m mdloader_plugin calibrate --out "
            "/scratch/p.json") in note
    assert "\n" not in note


def test_more_ranks_a_node_or_another_mpi_are_named():
    note = shape_note(calibrated(2, 2), nodes=2, ranks_per_node=8, mpi_library=MPICH)
    assert "more ranks a node (8) than calibrated (2)" in note and "inter-node" not in note
    note = shape_note(calibrated(2, 4, "Open MPI v5.0.11"), nodes=2, ranks_per_node=4,
                      mpi_library=MPICH)
    assert "another MPI (calibrated with Open MPI v5.0.11)" in note
