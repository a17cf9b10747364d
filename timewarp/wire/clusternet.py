"""The simulated cluster's network, shared by the broker (which gives nodes their
addresses in it) and the runtime (which keeps connections to it off the real network,
``timewarp/_core/podnetwork.py``)."""

CLUSTER_NETWORK = "10.0.0.0/8"
# the pods' addresses (``broker/cluster/pod_network.py``): a /24 per node, as kubeadm's
# node-ipam controller gives flannel's 10.244.0.0/16, continued over the next /16s for
# clusters of more than 256 nodes; inside CLUSTER_NETWORK, so refused like the nodes'
POD_NETWORK = "10.244.0.0/14"
NODE_POD_PREFIX = 24
