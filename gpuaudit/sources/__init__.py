"""Sources talk to the outside world (Prometheus-compatible HTTP APIs, the Kubernetes API) and
return raw answers, nothing more: they fill a snapshot, which the inventory then parses."""
