# Sourced by the tools/ scripts that start MPI jobs with the Open MPI wheel: run as root on a
# container, oversubscribe a small machine, no UCX one-sided component, one OpenMP thread a rank.
# Every value can be overridden from the environment.
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
export PRTE_MCA_rmaps_default_mapping_policy=${PRTE_MCA_rmaps_default_mapping_policy:-:oversubscribe}
export OMPI_MCA_osc=${OMPI_MCA_osc:-^ucx}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
