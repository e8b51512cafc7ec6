"""Pulumi ComponentResources wrapping the pure core in `multinode/`."""
