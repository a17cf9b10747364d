"""Kubernetes facts the broker's parts share: quantities, resource names, shape rules,
pod helpers, Events, pod and job names."""
