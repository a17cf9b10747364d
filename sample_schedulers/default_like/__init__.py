"""default_like: kube-scheduler's essentials in plain Python.

Filter (``sample_schedulers.common.feasibility``), then score every feasible node with
NodeResourcesFit/LeastAllocated + NodeResourcesBalancedAllocation (cpu and memory,
weight 1 each) and take the highest score, ties to the smallest node name.
"""
