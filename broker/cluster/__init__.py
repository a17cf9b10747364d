"""The simulated cluster: Batsim jobs as pods, the kubelet model, the shapes of nodes and
pods, the checks of a simulation's inputs, the services' traffic driver."""
