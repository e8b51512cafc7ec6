"""The floor pack of bench/pack_bench.py --floor: a CrossGuard pack of one resource policy that checks nothing,
served by pulumi_policy exactly as policy/__main__.py serves ours (same process start, same gRPC Analyze and
AnalyzeStack calls). What it costs per resource is what any one-policy pack pays for the engine's requests
(pulumi_policy's conversion of each resource's properties, the policy call): the floor issue 47 measures the
project's pack against ("the pack <= 2x the floor pack")."""
from pulumi_policy import EnforcementLevel, PolicyPack, ResourceValidationPolicy


def _nothing(args, report_violation) -> None:     # noqa: ANN001 - pulumi_policy's callback signature
    return None


PolicyPack(
    name="floor",
    enforcement_level=EnforcementLevel.ADVISORY,
    policies=[ResourceValidationPolicy(name="nothing", description="checks nothing (the benchmark's floor)",
                                       validate=_nothing)],
)
