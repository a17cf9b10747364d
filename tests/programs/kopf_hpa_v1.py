"""A kopf operator on autoscaling/v1 HorizontalPodAutoscalers: it records each one's CPU
target in an annotation. Run by tests/test_hpa_v1.py with `kopf run --standalone`."""

import kopf


@kopf.on.create("autoscaling", "v1", "horizontalpodautoscalers")
def record_target(spec, patch, logger, **_):
    target = spec.get("targetCPUUtilizationPercentage")
    patch.metadata.annotations["example.com/cpu-target"] = str(target)
    logger.info(f"target {target}")
