"""What each config key means, for the package's typed args and its schema (`multinode schema`).

One entry per field of every model in multinode/config.py, keyed `<Model>.<camelCase key>`, plus one per
model. The shape (types, defaults, allowed values, required) is read from the pydantic models themselves
by tools/gen_args.py, which writes components/args.py; tests/test_package.py fails when a field has no
entry here, when an entry names no field, or when components/args.py is not what the generator writes.
The README's config reference says the same things for stack files.
"""
from __future__ import annotations

MODELS: dict[str, str] = {
    "StackConfig": "The whole stack: the cluster, its GPU node pools, storage, add-ons, fabric and workloads "
                   "(the `multinode:` keys of a stack file).",
    "ClusterRef": "The existing cluster to attach to (clusters are looked up, never created).",
    "NodePool": "A pool of identical GPU nodes with the fabric of its machine.",
    "PoolUpgrade": "How the cloud replaces a pool's nodes on an upgrade, gang-aware (multinode/upgrades.py).",
    "MachineSpec": "A machine described explicitly instead of by catalog name.",
    "CapacityReservation": "A capacity reservation or capacity block the pool's nodes are launched into.",
    "FabricConfig": "Fabric overrides; every default comes from the catalog entry of the pool's machine.",
    "Addons": "The cluster add-ons: schedulers, Kyverno, the cloud's device plugin or network operator.",
    "Addon": "One add-on's Helm release: whether it is installed, its version, namespace and extra values.",
    "Storage": "ReadWriteMany checkpoint storage, kept through destroy and replace unless allowDelete.",
    "Queue": "A Volcano queue.",
    "NetworkTopology": "Volcano network-topology constraint of a training job's gang.",
    "Role": "A prefill or decode role of a disaggregated Grove / Dynamo deployment.",
    "Disaggregated": "The prefill and decode roles of a disaggregated deployment.",
    "Workload": "A multi-node inference or training workload placed on one node pool.",
    "VolcanoAddon": "Volcano's Helm release, plus its scheduler's preemption.",
    "PriorityClassSpec": "A PriorityClass the stack creates; workloads name it in priorityClassName.",
    "GroupPlacement": "lws-inference: keep each LWS group (or subgroup) inside one topology domain.",
    "NimProbes": "NIM on lws-inference: which of the NIM chart's probes the leader gets.",
    "Preflight": "Multi-node gangs: DCGM diagnostics and an NCCL all-reduce in init containers before the workload "
                 "starts (docs/preflight.md).",
    "Autoscaling": "lws-inference: an HPA scaling the LeaderWorkerSet's groups (the NIM chart's autoscaling).",
    "Dataset": "Training kinds: an existing PersistentVolumeClaim with the training data, mounted in every rank.",
    "KeyRef": "One key of an existing Secret or ConfigMap.",
    "FieldRef": "A field of the pod itself, through the downward API.",
    "ValueFrom": "Where an env value comes from: exactly one of secretKeyRef, configMapKeyRef, fieldRef.",
    "EnvValue": "An env value read at pod start instead of a literal.",
    "NameRef": "An existing Secret or ConfigMap by name.",
    "EnvFromSource": "An existing Secret or ConfigMap whose keys become env: exactly one of secretRef, configMapRef.",
    # not a config model: the args of the standalone GpuNodePool component (POOL_KEYS of StackConfig + a pool)
    "GpuNodePool": "A GPU node pool with its fabric on an existing cluster.",
}

FIELDS: dict[str, str] = {
    # StackConfig
    "StackConfig.cloud": "The cloud of the cluster: aws, azure, gcp, oci, or existing (any cluster by kubeconfig).",
    "StackConfig.cluster": "The existing EKS / AKS / GKE / OKE cluster to attach to.",
    "StackConfig.kubeconfig": "Secret: the kubeconfig of the cluster, required for cloud `existing`.",
    "StackConfig.hfToken": "Secret: Hugging Face token for model downloads (required for a gated model such as "
                           "meta-llama/..., unless the workload's env sets HF_TOKEN).",
    "StackConfig.ngcApiKey": "Secret: NGC API key for NIM images and models.",
    "StackConfig.imagePullSecret": "Secret: a .dockerconfigjson document for private images.",
    "StackConfig.nodePools": "GPU node pools (at least one).",
    "StackConfig.fabric": "Fabric overrides (the defaults come from the machine catalog).",
    "StackConfig.addons": "Add-ons to install and their versions / values.",
    "StackConfig.storage": "ReadWriteMany checkpoint storage.",
    "StackConfig.queues": "Volcano queues.",
    "StackConfig.priorityClasses": "PriorityClasses the stack creates (Volcano job priority and preemption).",
    "StackConfig.workloads": "The inference and training workloads.",
    "StackConfig.manifests": "Bring your own Kubernetes objects, applied as-is and checked by the policy pack "
                             "(each needs apiVersion, kind, metadata.name).",
    # ClusterRef
    "ClusterRef.name": "The EKS / AKS / GKE cluster name (required except on oci and existing).",
    "ClusterRef.region": "aws, oci: the cluster's region.",
    "ClusterRef.location": "azure: the region; gcp: the region or zone of the cluster.",
    "ClusterRef.resourceGroup": "azure: the resource group of the AKS cluster.",
    "ClusterRef.project": "gcp: the project of the GKE cluster.",
    "ClusterRef.compartmentId": "oci: the compartment OCID of the OKE cluster.",
    "ClusterRef.clusterId": "oci: the OKE cluster OCID.",
    "ClusterRef.vpcId": "aws: the VPC, when not the cluster's.",
    "ClusterRef.network": "gcp: the primary VPC network, when not the cluster's.",
    "ClusterRef.gkeVersion": "gcp: the cluster's GKE version (1.X.Y-gke.Z), checked against the GPUDirect "
                             "minimum of TCPX / TCPXO machines.",
    "ClusterRef.nodeRepair": "aws: EKS node auto repair on the managed node groups plus the eks-node-monitoring-agent "
                             "add-on; gcp: node pool auto-repair. Default true (docs/node-health.md).",
    # NodePool
    "NodePool.name": "The pool's name: a DNS label, unique in the stack.",
    "NodePool.machine": "A catalog machine (see the README's machine catalog); or give machineSpec.",
    "NodePool.machineSpec": "Describe a machine that is not in the catalog.",
    "NodePool.nodeCount": "Nodes in the pool (1-512).",
    "NodePool.zone": "Availability zone / GCP zone / OCI availability domain (required on gcp, oci); in the "
                     "cluster's region (aws, gcp, oci).",
    "NodePool.subnetId": "aws: the one subnet (one AZ) of the pool; oci: the OKE worker subnet.",
    "NodePool.capacityReservation": "A capacity reservation or block the nodes are launched into.",
    "NodePool.diskSizeGb": "Boot disk size in GB.",
    "NodePool.labels": "Extra node labels.",
    "NodePool.nodeSelector": "existing: the labels that select the pool's nodes (required on existing).",
    "NodePool.imageId": "oci: the GPU image OCID (required on oci).",
    "NodePool.bootstrap": "oci: how a node joins OKE (oke-package or oke-install).",
    "NodePool.gpuNetworkCidr": "gcp: the IPv4 range (/20 or larger) the pool's GPU subnets are cut from.",
    "NodePool.localNvme": "aws: `raid0` stripes the instance store at boot and puts kubelet / containerd on it.",
    "NodePool.upgrade": "How the cloud replaces the pool's nodes on an upgrade (gang-aware surge or blue-green).",
    # PoolUpgrade
    "PoolUpgrade.strategy": "surge (surge = the largest gang, maxUnavailable 0 where the cloud allows) or blueGreen "
                            "(aws, azure: a machine change creates the new pool first; refused on gcp, oci, "
                            "existing and AWS capacity blocks).",
    "PoolUpgrade.drainTimeoutMinutes": "How long a node drain may wait on disruption budgets "
                                       "(AKS drainTimeoutInMinutes, 5-1440 on azure).",
    "PoolUpgrade.soakMinutes": "Wait after each drained batch before the next (AKS nodeSoakDurationInMinutes, "
                               "0-30).",
    "PoolUpgrade.surge": "Nodes an upgrade adds at once (EKS maxUnavailable, at most 100); default the largest "
                         "gang on the pool, capped at 100 on aws (a standalone GpuNodePool knows no workloads: set "
                         "it there); not on an AWS capacity block (upgraded at desired size 0).",
    # MachineSpec
    "MachineSpec.name": "The machine type name as the cloud spells it.",
    "MachineSpec.gpus": "GPUs per node (1-64).",
    "MachineSpec.gpuModel": "The GPU model, e.g. H100.",
    "MachineSpec.gpuMemoryGb": "Memory per GPU in GB (for the model-fit check).",
    "MachineSpec.fabric": "The machine's GPU fabric.",
    "MachineSpec.fabricNics": "Fabric NICs per node.",
    "MachineSpec.bandwidthGbps": "Fabric bandwidth per node in Gbit/s.",
    "MachineSpec.vcpus": "vCPUs per node, for the placement check (unset: not checked).",
    "MachineSpec.memoryGib": "Memory per node in GiB, for the placement check (unset: not checked).",
    # CapacityReservation
    "CapacityReservation.id": "The reservation's id (a GCP projects/P/zones/Z/reservations/N id names its zone).",
    "CapacityReservation.type": "reservation, or aws capacityBlock.",
    "CapacityReservation.nodes": "How many nodes the reservation holds, when known (checked against nodeCount).",
    "CapacityReservation.zone": "Where it holds them (checked against the pool's zone and the cluster's region).",
    # FabricConfig
    "FabricConfig.enabled": "Inject the fabric into multi-node pods.",
    "FabricConfig.kind": "existing only: the fabric the nodes have.",
    "FabricConfig.devicesPerGpu": "Override the catalog's fabric devices per GPU.",
    "FabricConfig.rdmaMode": "azure: the RDMA device plugin mode, shared or sriov.",
    "FabricConfig.pinTransport": "Pin NCCL to the fabric so it fails instead of falling back to sockets.",
    "FabricConfig.socketInterface": "The bootstrap interface NCCL and GLOO use (exact names, comma-separated, e.g. "
                                     "eth0): NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME in the fabric policy.",
    "FabricConfig.webhookTimeoutSeconds": "Kyverno webhook timeout in seconds (1-30).",
    "FabricConfig.rdmaResourceName": "InfiniBand: the RDMA device resource, [prefix/]name (prefix rdma), e.g. "
                                     "hca_shared_devices_a; default rdma/shared_ib (shared) or rdma/ib (sriov).",
    "FabricConfig.docaDriverVersion": "azure/oci: DOCA-OFED driver container version for the NicClusterPolicy; "
                                      "`host` when the node image provides it.",
    # Addons
    "Addons.volcano": "Volcano (gang scheduling of training jobs, queues, network topology).",
    "Addons.lws": "LeaderWorkerSet (multi-node inference groups).",
    "Addons.grove": "Grove (PodCliqueSets for disaggregated inference; needs KAI).",
    "Addons.kai": "KAI-Scheduler (Grove's gang scheduler).",
    "Addons.kyverno": "Kyverno (the fabric policies).",
    "Addons.networkOperator": "azure, oci: NVIDIA Network Operator (RDMA device plugin, DOCA-OFED).",
    "Addons.gpuOperator": "NVIDIA GPU Operator (off by default).",
    "Addons.efaDevicePlugin": "aws: the EFA device plugin.",
    "Addons.nvidiaDevicePlugin": "aws, azure: NVIDIA's device plugin advertising nvidia.com/gpu.",
    "Addons.dynamo": "The Dynamo platform operator (off by default).",
    "Addons.trainer": "Kubeflow Trainer v2 (the trainjob workload kind; off by default).",
    "Addons.nvsentinel": "NVIDIA NVSentinel: GPU (DCGM), NIC and syslog health monitors on the GPU pools "
                         "(docs/node-health.md).",
    # Addon
    "Addon.enabled": "Install this add-on.",
    "Addon.provided": "The cluster already runs this add-on: treat it as present, install nothing of it (no "
                      "release, no CRDs). Needs enabled (the default); values are refused with it.",
    "Addon.version": "The chart version (default: the pinned release, see docs/addons-fabric.md); with provided "
                     "true, the version the cluster runs (kyverno: at least 1.17.0 for the fabric policies).",
    "Addon.namespace": "The namespace of the release.",
    "Addon.values": "Helm values merged over the project's (escape hatch); keys are checked against the chart's "
                    "values.yaml in schemas/ (docs/addons-fabric.md).",
    # Storage
    "Storage.kind": "fsx-lustre, efs (aws); azure-files, azure-lustre (azure); filestore, gcp-lustre (gcp); "
                    "oci-fss (oci); existing.",
    "Storage.name": "The storage's name: the claim's, and every storage resource's unless resourceName is set.",
    "Storage.resourceName": "The name every storage resource is created under (Pulumi names, file system / share / "
                            "instance names, PV and claim); default: name. Set it to the old name before renaming "
                            "`name`, and nothing is replaced.",
    "Storage.sizeGib": "Capacity in GiB (required for cloud file systems).",
    "Storage.throughput": "fsx-lustre, azure-lustre: MB/s per TiB.",
    "Storage.tier": "The file system's tier / SKU where the cloud has one.",
    "Storage.allowDelete": "Only then may destroy remove the data (default: protected and retained).",
    "Storage.existingClaim": "existing: an existing ReadWriteMany claim to mount.",
    "Storage.existingStorageClass": "existing: a storage class to provision a new claim from.",
    "Storage.subnetId": "aws / azure: the subnet of the file system (required for azure-lustre).",
    "Storage.namespace": "The claim's namespace.",
    "Storage.mountPath": "Where workloads mount the claim.",
    # Queue
    "Queue.name": "The queue's name.",
    "Queue.weight": "The queue's share weight (1-65535).",
    "Queue.gpus": "The queue's capability in nvidia.com/gpu.",
    "Queue.priority": "The queue's priority: Volcano serves higher-priority queues first.",
    # VolcanoAddon (its other keys are Addon's)
    "VolcanoAddon.preemption": "Add Volcano's preempt action: a job of a higher PriorityClass evicts lower ones "
                               "in the same queue.",
    # PriorityClassSpec
    "PriorityClassSpec.name": "The PriorityClass's name.",
    "PriorityClassSpec.value": "Its priority (at most 1000000000; higher is scheduled first).",
    "PriorityClassSpec.preemptionPolicy": "Whether its pods preempt lower-priority pods.",
    "PriorityClassSpec.description": "What the class is for.",
    # GroupPlacement
    "GroupPlacement.topologyKey": "The node label naming the topology domain (e.g. a block or rack label).",
    "GroupPlacement.subGroupSize": "Keep subgroups of this many pods in one domain instead of the whole group.",
    # NetworkTopology
    "NetworkTopology.mode": "hard (never cross the tier) or soft (prefer).",
    "NetworkTopology.highestTierAllowed": "The highest HyperNode tier a gang may span.",
    # Role
    "Role.nodes": "Nodes per replica of the role.",
    "Role.gpusPerNode": "GPUs per node (default: the machine's).",
    "Role.tensorParallel": "Tensor-parallel size (default: fill the role's GPUs).",
    "Role.pipelineParallel": "Pipeline-parallel size.",
    "Role.replicas": "Replicas of the role.",
    # Disaggregated
    "Disaggregated.prefill": "The prefill role.",
    "Disaggregated.decode": "The decode role.",
    # Workload
    "Workload.name": "The workload's name: a DNS label, unique in the stack.",
    "Workload.kind": "What runs it: lws-inference, grove-inference, dynamo, volcano-training, indexed-job, trainjob, "
                     "mpijob or nccl-test.",
    "Workload.nodePool": "The node pool it runs on.",
    "Workload.engine": "The engine (vllm, sglang, nim, trtllm, torchrun, deepspeed, mpirun, by kind).",
    "Workload.model": "The model to serve or train (a Hugging Face id or path).",
    "Workload.modelParamsB": "The model's size in billions of parameters, when not a built-in model.",
    "Workload.precision": "The weights' precision (for the model-fit check).",
    "Workload.image": "The container image (default: the engine's pinned image).",
    "Workload.namespace": "The workload's namespace.",
    "Workload.nodes": "Nodes per replica (the gang size).",
    "Workload.gpusPerNode": "GPUs per node (default: the machine's).",
    "Workload.tensorParallel": "Tensor-parallel size (default: fill the GPUs).",
    "Workload.pipelineParallel": "Pipeline-parallel size.",
    "Workload.replicas": "Replicas (gangs) of the workload.",
    "Workload.port": "The serving port.",
    "Workload.startupTimeoutMinutes": "How long the engine may take to start before its probes fail it.",
    "Workload.shmSizeGi": "Size of /dev/shm in GiB.",
    "Workload.queue": "The Volcano queue of a training job.",
    "Workload.env": "Extra environment variables on every container of the workload: a text value (never a "
                    "credential: refused) or {valueFrom: {secretKeyRef | configMapKeyRef | fieldRef}}.",
    "Workload.envFrom": "Existing Secrets / ConfigMaps whose keys become env on every container of the workload.",
    "KeyRef.name": "The existing Secret's / ConfigMap's name.",
    "KeyRef.key": "The key inside it.",
    "KeyRef.optional": "The pod starts without the variable when the key is missing.",
    "FieldRef.fieldPath": "A downward API field: metadata.name, metadata.namespace, status.podIP ...",
    "FieldRef.apiVersion": "The field's API version (default v1).",
    "ValueFrom.secretKeyRef": "One key of an existing Secret.",
    "ValueFrom.configMapKeyRef": "One key of an existing ConfigMap.",
    "ValueFrom.fieldRef": "A field of the pod (downward API).",
    "EnvValue.valueFrom": "Where the value comes from (exactly one source).",
    "NameRef.name": "The existing Secret's / ConfigMap's name.",
    "NameRef.optional": "The pod starts when it is missing.",
    "EnvFromSource.secretRef": "Every key of an existing Secret as env.",
    "EnvFromSource.configMapRef": "Every key of an existing ConfigMap as env.",
    "EnvFromSource.prefix": "A prefix added to every variable name.",
    "Workload.extraArgs": "Extra engine arguments.",
    "Workload.disaggregated": "Prefill / decode roles (grove-inference, dynamo).",
    "Workload.script": "The training script.",
    "Workload.scriptArgs": "Arguments of the training script.",
    "Workload.maxRetry": "Restarts of a training job before it fails.",
    "Workload.recoveryTimeout": "Volcano: restart the job only when a pod has not come back within this "
                                "duration (e.g. 10m).",
    "Workload.priorityClassName": "The PriorityClass of the workload's pods (one of priorityClasses).",
    "Workload.groupPlacement": "lws-inference: keep each group inside one topology domain.",
    "Workload.networkTopology": "Volcano network-topology constraint of the gang.",
    "Workload.deepspeedConfig": "The DeepSpeed config (deepspeed engine).",
    "Workload.checkpointDir": "Where training writes checkpoints (under the storage mount).",
    "Workload.cpu": "Training kinds: cpu cores each rank pod requests (else the fabric policy's per-GPU share).",
    "Workload.memoryGi": "Training kinds: memory (GiB) each rank pod requests (else the fabric policy's per-GPU "
                         "share).",
    "Workload.dataset": "Training kinds: a dataset volume (an existing claim) beside the checkpoint volume.",
    "Autoscaling.minReplicas": "Fewest groups the HPA keeps.",
    "Autoscaling.maxReplicas": "Most groups the HPA creates (plan advises when the pool cannot hold them).",
    "Autoscaling.metrics": "autoscaling/v2 MetricSpec objects, e.g. a Pods metric served by prometheus-adapter.",
    "Autoscaling.scaleDownStabilizationSecs": "The HPA's scale-down stabilization window in seconds.",
    "Workload.autoscaling": "lws-inference: scale the groups with an HPA (the NIM chart's autoscaling).",
    "Dataset.claim": "The existing PersistentVolumeClaim's name (not created, never deleted).",
    "Dataset.mountPath": "Where every rank sees the dataset.",
    "Dataset.readOnly": "Mount it read-only.",
    "Workload.minBusBandwidthGbps": "nccl-test: the bus bandwidth threshold in Gbit/s.",
    "Workload.probes": "NIM on lws-inference: turn the leader's startup / readiness probes off or its liveness "
                       "probe on (the NIM chart's probe switches).",
    "Workload.ngcApiSecret": "NIM: an existing Secret with the key NGC_API_KEY, used instead of ngcApiKey.",
    "Workload.imagePullSecrets": "Existing image pull Secrets by name, used instead of imagePullSecret.",
    "Workload.workerCommand": "NIM on lws-inference: the worker pods' command (the leader keeps the image's).",
    "NimProbes.startup": "The startup probe (startupTimeoutMinutes long).",
    "NimProbes.readiness": "The readiness probe at /v1/health/ready (required on a multi-node group).",
    "NimProbes.liveness": "The chart's liveness probe at /v1/health/live (needs the startup probe).",
    "Workload.busBandwidthEfficiency": "nccl-test and preflight: the threshold as a share of the catalog "
                                       "bandwidth.",
    "Workload.preflight": "Preflight checks of a multi-node gang's pods (on by default; `enabled: false` opts out).",
    "Preflight.enabled": "Run the preflight init containers in every pod of the workload's multi-node gangs.",
    "Preflight.dcgm": "Where dcgmi diag runs: auto (the node's own DCGM host engine where this stack installs the GPU "
                      "Operator, else no DCGM part), hostEngine (dcgmHostEngine), embedded (an unprivileged "
                      "nv-hostengine in the init container, opt-in), off (docs/preflight.md).",
    "Preflight.dcgmHostEngine": "host:port of the node-local DCGM host engine for dcgm hostEngine; default "
                                "nvidia-dcgm.<gpuOperator namespace>.svc:5555, the GPU Operator's Service.",
    "Preflight.dcgmDiagLevel": "dcgmi diag run level: 1 quick (seconds), 2 medium (about two minutes).",
    "Preflight.minBusBandwidthGbps": "The NCCL all-reduce floor in Gbit/s; default: the catalog's fabric bandwidth "
                                     "of the pool's machine x busBandwidthEfficiency.",
}
