"""A `dynamo` workload: one DynamoGraphDeployment (nvidia.com/v1beta1), built by
multinode.manifests.workloads.dgd, with the checkpoint claim and the Secrets of the shared workload path.

The DGD builder only names its claim and its Secrets; here both come from `common`, the same helpers
every other kind uses (claim: storage.existingClaim, else storage.name; Secrets: "<workload>-hf-token"
key "token", "<workload>-ngc-api-key", "<workload>-image-pull"), and the returned `secrets` list is what
the Workload component creates from the Pulumi secrets. So the DGD's secretKeyRefs and the Secrets that
exist are one list, not two naming schemes. The DGD goes in the workload's namespace, which the config
checks require to be the namespace of the checkpoint claim.

The Dynamo operator (the dynamo-platform add-on) owns everything below the DGD: it creates the
Grove PodCliqueSets (or LWS + Volcano PodGroups) and the frontend Service itself.
"""
from __future__ import annotations

from ...config import StackConfig, Workload
from . import common as c
from . import dgd as dm


def build(cfg: StackConfig, w: Workload) -> c.WorkloadManifests:
    # NGC_API_KEY too when the stack sets it: the runtime images and some model repositories are on NGC.
    secrets = c.model_secrets(cfg, w, want_hf=True, want_ngc=True)
    dgd = dm.dynamo_graph_deployment(cfg, w, claim_name=c.claim_name(cfg),
                                     secret_names={s.config_key: s for s in secrets})
    return c.WorkloadManifests(w.name, w.kind, w.namespace, [dgd], secrets)
