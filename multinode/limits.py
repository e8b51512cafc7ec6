"""Every bound on what a user controls, in one place, each with its source or its reason (issue 48).

A stack file is hostile input as far as `plan` is concerned: each count and size a user can write has an upper
bound here, refused at config time with the key named (multinode/config.py reads these), so that plan's time and
output stay proportional to what a legal stack can ask for. Where Kubernetes or a cloud has its own limit, the
bound is that limit (or below it, with the reason); elsewhere the reason is given and the bound is far above any
real stack.
"""
from __future__ import annotations

# ------------------------------------------------------------------ files plan reads
# The stack file: the example stacks are ~2 KB, a stack with many hand-written manifests ~100 KB.
STACK_FILE_BYTES = 4 * 1024 * 1024
# The policy config (CrossGuard's --policy-pack-config JSON): a few hundred bytes per policy, ~40 policies.
POLICY_CONFIG_BYTES = 1024 * 1024
# A previous plan's build/<stack>/resources.json (read to warn about replacements): the 640-workload benchmark
# stack writes ~30 MB.
PREVIOUS_RECORDS_BYTES = 256 * 1024 * 1024
# Nesting of any file plan reads (YAML or JSON): Kubernetes objects in `manifests` nest ~15 deep, DeepSpeed
# configs ~5.
MAX_DEPTH = 64
# Digits of a number written in a file: 2**53 (the largest integer Pulumi carries exactly, numbers travel as
# IEEE doubles through protobuf Value) has 16 digits; a float's mantissa and exponent need fewer than 40.
# Python refuses int() of over 4,300 digits with a ValueError (sys.int_info.default_max_str_digits): the reader
# refuses long numbers first, with the key.
NUMBER_CHARS = 40

# ------------------------------------------------------------------ Kubernetes' own limits
# The API server's request size limit = etcd's: etcd --max-request-bytes defaults to 1.5 MiB
# (etcd-io/etcd server/embed/config.go DefaultMaxRequestBytes = 1.5 * 1024 * 1024); a larger object is refused.
OBJECT_BYTES = 1536 * 1024
# metadata.annotations, all of them together: 256 KiB (k8s.io/apimachinery pkg/api/validation/objectmeta.go
# TotalAnnotationSizeLimitB = 256 * (1 << 10)).
ANNOTATIONS_BYTES = 256 * 1024
# A label value / label name: 63 characters (k8s.io/apimachinery pkg/util/validation/validation.go
# LabelValueMaxLength = 63, qualifiedNameMaxLength = 63); a label key's prefix: a DNS subdomain, 253.
LABEL_VALUE_CHARS = 63
DNS_LABEL_CHARS = 63          # validation.go DNS1123LabelMaxLength
DNS_SUBDOMAIN_CHARS = 253     # validation.go DNS1123SubdomainMaxLength

# ------------------------------------------------------------------ Linux's own limits (a container's env and args)
# One argument or one environment string ("NAME=value") of execve: MAX_ARG_STRLEN = 32 pages = 128 KiB
# (torvalds/linux include/uapi/linux/binfmts.h); a longer one fails the container's exec with E2BIG.
ARG_STRING_BYTES = 128 * 1024
# Every text value of a stack is at most that long: the longest legitimate text is an env value or an argument.
TEXT_CHARS = ARG_STRING_BYTES
# All arguments and environment strings of one execve together: ARG_MAX, a quarter of the stack rlimit
# (fs/exec.c, 8 MiB default stack -> 2 MiB). A workload's env + extraArgs + scriptArgs are all passed to the
# container's process, so their total is held to it.
ARG_MAX_BYTES = 2 * 1024 * 1024

# ------------------------------------------------------------------ counts (reason: plan time and real use)
# Node pools: AKS allows at most 100 node pools per cluster (learn.microsoft.com/azure/aks/quotas-skus-regions,
# "Maximum node pools per cluster: 100"); EKS' managed node group quota is 30 (adjustable) and GKE's node pool
# limit is the cluster's node count: 100 is the largest fixed limit among the four.
NODE_POOLS = 100
# Workloads: plan scales linearly up to the largest stack bench/plan_bench.py measures (640 workloads); each
# renders ~5 objects and their pods.
WORKLOADS = 640
# Hand-written objects (`manifests`): each is registered, schema-checked and read by the pack.
MANIFESTS = 1000
# Volcano queues and PriorityClasses: neither Kubernetes nor Volcano caps their number, but each is a resource
# plan registers and every workload that names one waits for it; a cluster has a handful of each (Kubernetes
# ships two PriorityClasses). 1,000 keeps a legal stack's plan within seconds per thousand objects.
QUEUES = 1000
PRIORITY_CLASSES = 1000
# Env entries of one workload: Kubernetes has no count limit, but the env is copied into every container of the
# workload's pods and each pod is one object under OBJECT_BYTES; 1,024 names is far above real use.
ENV_ENTRIES = 1024
# Arguments (extraArgs, scriptArgs, workerCommand), image pull secrets, autoscaling metrics: per workload.
ARGS = 1024
LIST_ITEMS = 256
# Labels / node selectors on one pool (Kubernetes caps only their syntax): far above real use.
LABELS = 256
# Members of a fleet (multinode/fleet): each is a cluster whose own stack file plan reads and checks; Karmada sets
# no limit, 100 clusters is far above a GPU fleet.
FLEET_MEMBERS = 100
