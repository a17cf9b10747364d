"""podutil.parse_time reads the store's stamps without strptime: it must agree with
strptime on every string, the stamps it writes and the malformed ones alike."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from broker.k8s import podutil


def _reference(text: str) -> int | type[Exception]:
    try:
        stamp = datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except (TypeError, ValueError) as exc:
        return type(exc)
    return int(stamp.timestamp()) * 10**9


def _ours(text: str) -> int | type[Exception]:
    podutil.parse_time.cache_clear()
    try:
        return podutil.parse_time(text)
    except (TypeError, ValueError) as exc:
        return type(exc)


_two = st.integers(0, 99).map(lambda n: f"{n:02d}")
# mostly the stamps' own shape (two digits), so that every field's range is explored
_field = st.one_of(
    _two, _two, _two, st.integers(0, 9).map(str), st.sampled_from(["٣٣", " 1", "1 ", "+1"])
)
_ENDS = ["Z", "", "z", "Z ", "+00:00", "Z\n", "ZZ", ".5Z"]


@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)))
def test_the_stores_stamps(moment: datetime) -> None:
    text = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    if len(text) == 20:  # strftime pads years below 1000 on this platform only sometimes
        assert _ours(text) == _reference(text)


@given(
    st.integers(0, 9999).map(lambda y: f"{y:04d}") | st.sampled_from(["999", "12345", "٢٠٢٦"]),
    _field,
    _field,
    _field,
    _field,
    _field,
    st.sampled_from(_ENDS),
)
def test_any_fields(year: str, mo: str, d: str, h: str, mi: str, s: str, end: str) -> None:
    text = f"{year}-{mo}-{d}T{h}:{mi}:{s}{end}"
    assert _ours(text) == _reference(text)


@given(st.datetimes(min_value=datetime(1000, 1, 1)), st.sampled_from(_ENDS))
def test_any_ending(moment: datetime, end: str) -> None:
    text = moment.strftime("%Y-%m-%dT%H:%M:%S") + end
    assert _ours(text) == _reference(text)


@given(st.text(max_size=24))
def test_any_text(text: str) -> None:
    assert _ours(text) == _reference(text)


def test_invalid_dates_are_refused() -> None:
    for text in ("2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z", "2026-01-01T24:00:00Z",
                 "2026-01-01T00:00:60Z", "0000-01-01T00:00:00Z"):  # fmt: skip
        assert _ours(text) is ValueError
    assert _ours("2026-11-28T21:37:38Z") == 1795901858 * 10**9
