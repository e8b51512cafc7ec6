"""Fleet stacks: Karmada + Volcano Global across this project's clusters (docs/multicluster.md).

A fleet stack file (`stacks/Pulumi.<fleet>.yaml`) holds one structured key, `multinode:fleet`, naming
the host cluster of the Karmada control plane and the member clusters (this project's own stacks, or
existing clusters by a kubeconfig secret), plus the multi-cluster workloads submitted once to Karmada.

  config.py     the FleetConfig model and `load(raw)`: one ConfigError naming every key path
  members.py    each member's own stack file read and checked offline (its pools, its workloads)
  fit.py        which member clusters can hold each workload whole (the single-cluster placement rules)
  manifests.py  the Karmada and Volcano Global objects as plain dicts (Cluster, PropagationPolicy,
                OverridePolicy, Queues, the Volcano Global controllers), the Karmada chart's values
  plan.py       `plan` of a fleet stack (plan.py dispatches here when the file has `multinode:fleet`)

Pure: nothing here imports Pulumi or a cloud SDK (components/fleet.py registers the resources).
"""
