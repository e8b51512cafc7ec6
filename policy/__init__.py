"""multinode's CrossGuard policy pack: rules in policy.rules, rule vocabulary in policy.engine, the two runners
(plan, CrossGuard) in policy.pack.

Nothing here starts the policy server: only policy/__main__.py builds the PolicyPack.
"""
