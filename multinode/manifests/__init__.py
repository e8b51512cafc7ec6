"""Plain-dict builders of exactly what Kubernetes gets. No Pulumi here."""

# Built-in API groups -> the pulumi_kubernetes module that holds their typed resources.
CORE_API_GROUPS = {
    "": "core", "apps": "apps", "batch": "batch", "storage.k8s.io": "storage",
    "rbac.authorization.k8s.io": "rbac", "scheduling.k8s.io": "scheduling", "policy": "policy",
    "networking.k8s.io": "networking", "node.k8s.io": "node",
}
