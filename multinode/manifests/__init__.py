"""Plain-dict builders of exactly what Kubernetes gets. No Pulumi here."""
