"""The audit stage: the checks run over an inventory with the settings and waivers, and the result
assembled (summary, ledger, breakdown, capacity plan, coherence, comparison with an earlier
report).
"""
