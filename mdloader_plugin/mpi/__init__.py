"""One MPI idiom a module: the job's topology and collectives (``world``), replica groups
(``groups``), and MDLoader's own progress thread (``progress``)."""
