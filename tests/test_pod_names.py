"""Issue 31: a job's pod name shows its job id (``w0!1`` -> ``w0.1``, no longer
``w0-211``), stays a valid DNS-1123 subdomain whatever the id holds, never names two jobs,
and leads back to its job id (``broker/k8s/naming.py``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.k8s import naming
from broker.k8s.names import is_dns1123_subdomain

# Any character, with the ones that matter (joiners, escapes' own characters) often.
_chars = st.one_of(st.sampled_from("ab09-!.~_A "), st.characters(codec="utf-8"))
_ids = st.tuples(st.sampled_from("az09"), st.text(_chars, max_size=40)).map("".join)


@pytest.mark.parametrize(
    ("job", "pod"),
    [
        ("w0!1", "w0.1"),
        ("w12!340", "w12.340"),
        ("w3!job-17", "w3.job-17"),
        ("w0!web-1~r2", "w0.web-1--7er2"),
        ("w0!Job_1", "w0--21--4aob--5f1"),
        ("w0!1.5", "w0.1--2e5"),
        ("w0!a--b", "w0.a--2d--2db"),
        ("w0!", "w0--21"),
        ("w0!\u00e9\U0001f600", "w0--21--e9--v01f600"),
    ],
)
def test_the_pod_name_shows_the_job_id(job, pod):
    assert naming.pod_name(job) == pod
    assert naming.job_id(pod) == job


@given(_ids)
def test_every_job_id_makes_a_valid_pod_name_that_leads_back_to_it(job):
    name = naming.pod_name(job)
    assert is_dns1123_subdomain(name) == []
    assert naming.job_id(name) == job


@given(_ids, _ids)
def test_two_job_ids_never_share_a_pod_name(a, b):
    if a != b:
        assert naming.pod_name(a) != naming.pod_name(b)


@given(st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,30}[a-z0-9])?", fullmatch=True))
def test_a_name_no_job_id_makes_is_refused_not_misread(name):
    try:
        job = naming.job_id(name)
    except ValueError as exc:
        assert repr(name) in str(exc)
    else:
        assert naming.pod_name(job) == name


@pytest.mark.parametrize("name", ["web--zz", "a--4", "a--u00", "w0..1", "w0-", "w0--2da"])
def test_names_no_job_id_makes_are_named_in_the_error(name):
    with pytest.raises(ValueError, match="is not the pod name of a job"):
        naming.job_id(name)


@pytest.mark.parametrize("job", ["", "W0!1", "!1", "-x", "w0!" + "x" * 260])
def test_ids_that_cannot_name_a_pod_are_refused(job):
    with pytest.raises(ValueError, match="job id"):
        naming.pod_name(job)
