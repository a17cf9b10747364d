"""Helpers shared by the sample schedulers: kube config loading, resource quantities,
plain summaries of pods and nodes, the filter predicates every scheduler needs, and the
watch-driven scheduling loop (informers, cache, backoff queue, binding).

Nothing here imports timewarp: the samples run unchanged on a real cluster.
"""
