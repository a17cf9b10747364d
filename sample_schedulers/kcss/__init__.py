"""kcss: the Kubernetes Container Scheduling Strategy of Menouer and Darmon (TOPSIS).

For each new pod, every feasible node is rated on six criteria (image transfer time,
free cpu, free memory, free disk, power consumption, running containers); TOPSIS ranks
the nodes by relative closeness to the ideal one and the best is chosen.
"""
