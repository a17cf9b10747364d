"""scheduling.k8s.io/v1 PriorityClasses: a value required, the preemption policy
defaulted (pods take their ``spec.priority`` from them, see ``pods.py``)."""

from __future__ import annotations

from ..admission import BOOL, INT32, META, STR, Struct
from ..errors import invalid
from . import printers_core
from .base import Context, Obj, Strategy, TypeNames


class PriorityClassStrategy(Strategy):
    printer = printers_core.PRIORITY_CLASS
    schema = Struct(
        "PriorityClass",
        {
            "metadata": META,
            "value": INT32,
            "globalDefault": BOOL,
            "preemptionPolicy": STR,
            "description": STR,
        },
    )

    def prepare_for_create(self, rt: TypeNames, obj: Obj, ctx: Context) -> None:
        if not isinstance(obj.get("value"), int):
            raise invalid(
                "PriorityClass", obj["metadata"].get("name", ""), ["value: Required value"]
            )
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")
