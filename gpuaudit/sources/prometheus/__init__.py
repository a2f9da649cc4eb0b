"""The Prometheus source (and the compatible backends: Thanos, Mimir, Cortex, VictoriaMetrics):
`source` (what a live collection calls), `http` (the HTTP API client), `catalogue` (the fixed
PromQL queries), `discovery` (what the backend holds), `planner` (queries cut to fit the
backend's limits) and `rules` (the alerting and recording rules `gpuaudit rules` prints)."""
