"""``fluid.incubate``: fleet's collective (data-parallel) mode on MPI."""
