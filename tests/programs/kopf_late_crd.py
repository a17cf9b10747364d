"""A kopf operator for Lamps, started before their CRD exists: kopf watches the
CustomResourceDefinitions, re-discovers the group when the Lamps' CRD appears, then
handles a Lamp (its status written by the handler's result). Run by
tests/test_crd_typed_clients.py with `kopf run --standalone`."""

import kopf


@kopf.on.create("light.example.com", "v1", "lamps")
def switch_on(spec, logger, **_):
    logger.info(f"lamp at {spec.get('watts')} W")
    return {"on": True, "watts": spec.get("watts")}
