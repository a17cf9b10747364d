"""A kind of our own, to show (and pin) that one file and one registration line are all
a new kind needs: ``resources.register(WIDGETS)`` and the facade routes, stores, lists,
watches, discovers and admits Widgets (tests/test_facade_kinds.py)."""

from __future__ import annotations

from broker.facade import validation as v
from broker.facade.admission import INT32, META, STR, Struct
from broker.facade.kinds import Context, Strategy, TypeNames
from broker.facade.resources import ResourceType
from broker.facade.selectors import COMMON_FIELDS, fields_at


class WidgetStrategy(Strategy):
    """``spec.size`` an int32 (400 otherwise), defaulted to 1, never negative (422);
    ``spec.color`` selectable; the status written only through ``/status``."""

    schema = Struct(
        "Widget",
        {"metadata": META, "spec": Struct("WidgetSpec", {"size": INT32, "color": STR})},
    )
    fields = {**COMMON_FIELDS, **fields_at("spec.color")}

    def prepare_for_create(self, rt: TypeNames, obj: dict, ctx: Context) -> None:
        obj["metadata"].setdefault("generation", 1)
        obj.setdefault("spec", {}).setdefault("size", 1)
        obj["status"] = {"phase": "New"}

    def validate_fields(self, rt: TypeNames, obj: dict) -> list[v.FieldError]:
        size = (obj.get("spec") or {}).get("size", 0)
        if size < 0:
            return [v.invalid_value("spec.size", size, "must be greater than or equal to 0")]
        return []


WIDGETS = ResourceType(
    "toys.example.com",
    "v1",
    "widgets",
    "widget",
    "Widget",
    True,
    short_names=("wd",),
    subresources=("status",),
    strategy=WidgetStrategy(),
)
