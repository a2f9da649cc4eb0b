"""Test support, imported by tests and never collected: the repository's paths, factories of
tiny snapshots, real servers (Prometheus, VictoriaMetrics, a test API server) and the marker
that tests running them carry, fault servers, recorded objects, and what the report tests share.
"""
