"""Services with traffic, in one home: one name per thing.

- ``spec``: a workload's ``services``, validated (:class:`spec.ServiceSpec`);
- ``model``: one service's traffic in simulated time (:class:`model.TrafficModel`),
  serving its requests ``exact`` (``exact.py``) or ``fluid`` (``fluid.py``) behind one
  protocol (``serving.py``), from arrivals (``arrivals.py``, ``patterns.py``) and costs
  (``costs.py``);
- ``metrics``: every metric's name, once (pipelines, per-pod custom metrics, the columns
  of ``out_services.csv``).

The model is pure and deterministic: no Kubernetes, no Batsim, no clock of its own. The
broker's driver (``broker/cluster/traffic_driver.py``) tells it which replicas exist and
when time moves; it answers with per-tick rows and per-pod samples. ``docs/services.md``
documents it. Nothing is imported here: the facade reads ``metrics`` without numpy.
"""
