"""Every rule of the pack, in the order they are reported. Importing this registers nothing."""
from . import (
         disruption,
         dynamo,
         env,
         fleet,
         gangs,
         health,
         kyverno_cel,
         names,
         placement,
         secrets,
         stack,
         storage,
         topology,
         workloads,
)

RULES = (workloads.RULES + env.RULES + dynamo.RULES + secrets.RULES + storage.RULES + stack.RULES + gangs.RULES
         + placement.RULES + topology.RULES + fleet.RULES + kyverno_cel.RULES + disruption.RULES
         + health.RULES + names.RULES)

assert len({r.name for r in RULES}) == len(RULES), "rule names must be unique"
