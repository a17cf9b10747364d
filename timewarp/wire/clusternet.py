"""The simulated cluster's network, shared by the broker (which gives nodes their
addresses in it) and the runtime (which keeps connections to it off the real network,
``timewarp/_core/podnetwork.py``)."""

CLUSTER_NETWORK = "10.0.0.0/8"
