"""The box's stand-ins for the gangs of issue 43 (conformance/realnode/README.md): each runs the real coordination
layer of its engine (Open MPI through mpi4py, Ray) or, where the engine's own is not published, a stand-in
rendezvous that says so, then prints one verdict line (gang.py) that the box reads from the container's log."""
