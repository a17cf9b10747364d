"""The broker: owns simulated time (clock service), plays Batsim's decision process, and
serves the scheduler a Kubernetes API made from the simulated cluster."""
