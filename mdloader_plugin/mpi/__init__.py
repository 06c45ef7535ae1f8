"""One MPI idiom a module: the job's topology (``world``), the collectives MDLoader builds on
(``collectives``), checks of the launch (``launch_checks``), errors into exits and aborts
(``abort``), torch.distributed's rendezvous (``rendezvous``), replica groups (``groups``), and
MDLoader's own progress thread (``progress``)."""
