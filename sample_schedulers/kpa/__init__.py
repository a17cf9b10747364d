"""A Knative-style autoscaler (KPA) on request concurrency, written the ordinary way."""
