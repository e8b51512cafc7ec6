"""multinode's CrossGuard policy pack: rules in policy.rules, adapters in policy.engine.

Nothing here starts the policy server: only policy/__main__.py builds the PolicyPack.
"""
