"""Kubernetes-side components: add-ons, fabric policies, storage objects, workloads."""
