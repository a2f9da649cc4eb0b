"""Test support: factories, real servers (Prometheus, VictoriaMetrics, a test API server), fault
servers and recorded objects.
"""
