"""Identities another Pulumi program may give as Outputs (issue 33): values another resource computes, e.g. an EKS
cluster's name from pulumi-eks. Shapes (machines, counts, parallel sizes) stay plain: the topology contract is
checked on them before any resource is registered. An identity is only passed on to resources and invokes, so the
components resolve it inside `apply` (an Input of the SDK call); a stack file gives it as a plain string, as before.
"""
from __future__ import annotations

from pydantic import BaseModel

from multinode.config import StackConfig

# key path (camelCase, as in a stack file) -> the clouds whose components take it as an Input (an invoke argument or a
# resource input, never a name, a check or a rendered manifest). gcp and oci write the cluster name into the names of
# the networks and instances they create, so there it must be known: plain. The region / location stays plain on
# every cloud: the checks read it (zones, reservations, storage limits).
OUTPUT_KEYS: dict[str, tuple[str, ...]] = {
    "cluster.name": ("aws", "azure", "existing"),
    "cluster.vpcId": ("aws",),              # the security groups' VPC (components/clouds/aws.py)
    "cluster.resourceGroup": ("azure",),    # the AKS lookup, the agent pools, storage (components/clouds/azure.py)
    "cluster.clusterId": ("oci",),          # the OKE lookup and its kubeconfig (components/clouds/oci.py)
    "cluster.compartmentId": ("oci",),      # the instance configuration, cluster network, file storage
}
# Stands in for an identity Output while the config is validated (never reaches a resource: the Output replaces it).
PLACEHOLDER = "[output]"


def field_of(path: str) -> tuple[type[BaseModel], str]:
    """(the config model declaring the last key of `path`, that key's python name)."""
    model: type[BaseModel] = StackConfig
    *parents, last = path.split(".")
    for key in parents:
        model = _sub_model(model, key)
    return model, _python_name(model, last)


def model_keys() -> set[str]:
    """`Model.alias` of every identity key (what tools/gen_args.py types as pulumi.Input)."""
    out = set()
    for path in OUTPUT_KEYS:
        model, name = field_of(path)
        out.add(f"{model.__name__}.{model.model_fields[name].alias or name}")
    return out


def _python_name(model: type[BaseModel], key: str) -> str:
    for n, f in model.model_fields.items():
        if (f.alias or n) == key or n == key:
            return n
    raise KeyError(f"{model.__name__} has no key {key!r}")


def _sub_model(model: type[BaseModel], key: str) -> type[BaseModel]:
    import typing
    annotation = model.model_fields[_python_name(model, key)].annotation
    for t in [annotation, *typing.get_args(annotation)]:
        if isinstance(t, type) and issubclass(t, BaseModel):
            return t
    raise KeyError(f"{model.__name__}.{key} is not an object")
