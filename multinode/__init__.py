"""multinode: multi-node GPU work on Kubernetes, pure core (no Pulumi resources here)."""
