"""Sources talk to the outside world and return raw answers, nothing more: they fill a snapshot,
which the inventory then parses. `interface` (what every source implements), `prometheus/`,
`kubernetes/`, and `live` (a live collection: Prometheus, then Kubernetes)."""
