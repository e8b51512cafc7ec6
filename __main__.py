"""The Pulumi program of this repository's stacks: the package's program (multinode/program.py)."""
from multinode.program import main

main()
