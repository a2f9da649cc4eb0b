"""The Kubernetes source: `source` (what a live collection calls), `resources` (the catalogue of
objects read), `connect` (kubeconfig and in-cluster authentication), `reader` (the paged reader)
and `redact` (error messages without secrets)."""
