"""batch/v1 Jobs and CronJobs: the real server's defaults, a Job's generated selector
(unless ``manualSelector``) and the template labels that go with it, and the checks a
Job's pods depend on."""

from __future__ import annotations

from typing import Any

from .. import admission
from .. import validation as v
from ..admission import BOOL, INT32, INT64, META, SELECTOR, STR, TEMPLATE, Struct
from ..errors import invalid
from ..selectors import COMMON_FIELDS, fields_at
from . import printers_workloads
from .apps import Controller
from .base import Obj, TypeNames

JOB_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")

JOB_SPEC = Struct(
    "JobSpec",
    {
        "parallelism": INT32,
        "completions": INT32,
        "activeDeadlineSeconds": INT64,
        "backoffLimit": INT32,
        "selector": SELECTOR,
        "manualSelector": BOOL,
        "template": TEMPLATE,
        "ttlSecondsAfterFinished": INT32,
        "suspend": BOOL,
        "completionMode": STR,
    },
)


def default_job(job: dict[str, Any]) -> None:
    """batch/v1 Job admission: the real server's defaults, the generated selector (unless
    ``manualSelector``) and the template labels that go with it, and the one validation a
    Job's pods depend on (``restartPolicy`` Never or OnFailure; a template without one
    defaults to Always, which a Job refuses, as the real server does)."""
    meta, spec = job["metadata"], job["spec"]
    name, uid = meta.get("name", ""), meta.get("uid", "")
    template = spec["template"]
    template_spec = template.get("spec")
    if not isinstance(template_spec, dict):
        raise invalid("Job", name, ["spec.template.spec: Required value"])
    policy = template_spec.setdefault("restartPolicy", "Always")
    if policy not in ("Never", "OnFailure"):
        raise invalid(
            "Job",
            name,
            [
                f'spec.template.spec.restartPolicy: Unsupported value: "{policy}": supported '
                'values: "OnFailure", "Never"'
            ],
        )
    for key in ("parallelism", "backoffLimit", "activeDeadlineSeconds"):
        value = spec.get(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            raise invalid("Job", name, [f"spec.{key}: Invalid value: {value!r}: must be >= 0"])
    if spec.get("completions") is not None:
        value = spec["completions"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise invalid(
                "Job", name, [f"spec.completions: Invalid value: {value!r}: must be >= 0"]
            )
    spec.setdefault("parallelism", 1)
    if "completions" not in spec:
        spec["completions"] = 1
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    if not spec.get("manualSelector"):
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        for key in JOB_LABELS:
            labels[key] = uid
        for key in JOB_NAME_LABELS:
            labels[key] = name
        spec["selector"] = {"matchLabels": {JOB_LABELS[0]: uid}}
    elif not isinstance(spec.get("selector"), dict):
        raise invalid("Job", name, ["spec.selector: Required value"])


class JobStrategy(Controller):
    schema = Struct("Job", {"metadata": META, "spec": JOB_SPEC})
    printer = printers_workloads.JOB
    fields = {**COMMON_FIELDS, **fields_at("status.successful")}

    def default_spec(self, rt: TypeNames, obj: Obj, spec: Obj) -> None:
        if not isinstance(spec.get("template"), dict):
            raise invalid("Job", obj["metadata"].get("name", ""), ["spec.template: Required value"])
        default_job(obj)


class CronJobStrategy(Controller):
    printer = printers_workloads.CRON_JOB
    schema = Struct(
        "CronJob",
        {
            "metadata": META,
            "spec": Struct(
                "CronJobSpec",
                {
                    "schedule": STR,
                    "suspend": BOOL,
                    "jobTemplate": Struct("JobTemplateSpec", {"metadata": META, "spec": JOB_SPEC}),
                },
            ),
        },
    )

    def default_spec(self, rt: TypeNames, obj: Obj, spec: Obj) -> None:
        if not spec.get("schedule"):
            raise invalid(
                "CronJob", obj["metadata"].get("name", ""), ["spec.schedule: Required value"]
            )

    def validate_fields(self, rt: TypeNames, obj: Obj) -> list[v.FieldError]:
        errs = super().validate_fields(rt, obj)
        job_template = (obj.get("spec") or {}).get("jobTemplate")
        if isinstance(job_template, dict) and isinstance(job_template.get("spec"), dict):
            errs += admission.template_errors(
                job_template["spec"].get("template"), "spec.jobTemplate.spec.template"
            )
        return errs
