"""Every rule of the pack, in the order they are reported. Importing this registers nothing."""
from . import dynamo, secrets, stack, storage, workloads

RULES = workloads.RULES + dynamo.RULES + secrets.RULES + storage.RULES + stack.RULES

assert len({r.name for r in RULES}) == len(RULES), "rule names must be unique"
