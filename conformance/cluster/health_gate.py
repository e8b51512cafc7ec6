"""The release health gate, played against the cluster box (issue 44, scenario 3): daytwo.go runs
`health_gate.py <stack file> <kubeconfig>` while nodes are cordoned and reads the JSON this prints.

It is the gate's own code, as `multinode release` runs it (multinode/release/pipeline.py, stage health-gate:
`judge(cluster.list_nodes(), pools)`): the nodes read from the box's real API server through the product's
adapters.KubernetesCluster, the pools and their spare nodes from the stack file (health.pools_for_stack_file).
Only the Pulumi stages before it (refresh, preview, up, outputs) are not run: the kubeconfig is the box's.
Prints [{"pool", "nodes", "spareNodes", "unhealthy", "pass", "message"}, ...]; exit 0, or 2 with one line on bad input.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: health_gate.py <stack file> <kubeconfig>", file=sys.stderr)
        return 2
    from multinode.errors import ConfigError
    from multinode.release.adapters import KubernetesCluster
    from multinode.release.health import judge, pools_for_stack_file

    try:
        pools = pools_for_stack_file(Path(argv[1]))
    except ConfigError as e:
        print(f"health_gate.py: {e}", file=sys.stderr)
        return 2
    cluster = KubernetesCluster(Path(argv[2]).read_text())
    print(json.dumps([h.to_json() for h in judge(cluster.list_nodes(), pools)]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
