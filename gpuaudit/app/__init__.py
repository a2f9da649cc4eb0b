"""The wiring of one run: the option table, its resolver into a frozen configuration, and the
pipeline from configuration to outcome.
"""
