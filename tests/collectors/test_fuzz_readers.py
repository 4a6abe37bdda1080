"""Hypothesis fuzzing: garbled, truncated and random inputs raise only each parser's own class."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lustre_alloc.common.errors import (BrwStatsError, HealthCheckError, JobStatsError, LctlParamError,
                               LnetctlError, LnetStatsError, SchemaError, SingleValueError,
                               StatsFileError)
from lustre_alloc.collectors.readers.brw_stats import parse_brw_stats
from lustre_alloc.collectors.readers.health_check import parse_health_check
from lustre_alloc.collectors.readers.job_stats import parse_job_stats
from lustre_alloc.collectors.readers.kbytes import parse_single_value
from lustre_alloc.collectors.readers.lctl_get_param import parse_get_param
from lustre_alloc.collectors.readers.lnet_stats import parse_lnet_stats
from lustre_alloc.collectors.readers.lnetctl import parse_lnetctl_stats
from lustre_alloc.collectors.readers.stats_file import parse_stats
from lustre_alloc.collectors.schema import decode, encode

from .conftest import DDN, HPE, HPE_PROC

CASES = [
    (parse_stats, StatsFileError, HPE_PROC / "obdfilter/lustrefs-OST0000/stats"),
    (parse_brw_stats, BrwStatsError, HPE_PROC / "osd-zfs/lustrefs-OST0000/brw_stats"),
    (parse_brw_stats, BrwStatsError, DDN / "brw_stats_with_data.txt"),
    (parse_job_stats, JobStatsError, HPE_PROC / "obdfilter/lustrefs-OST0000/job_stats"),
    (parse_single_value, SingleValueError, HPE_PROC / "obdfilter/lustrefs-OST0000/kbytesfree"),
    (parse_lnet_stats, LnetStatsError, HPE / "proc/sys/lnet/stats"),
    (parse_lnetctl_stats, LnetctlError, DDN / "lnetctl_stats.txt"),
    (parse_get_param, LctlParamError, DDN / "valid/valid.txt"),
    (parse_health_check, HealthCheckError, DDN / "valid/valid_unhealthy_host.txt"),
]
IDS = [f"{parser.__name__}-{path.name}" for parser, _, path in CASES]
FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
ALPHABET = st.sampled_from(list("0123456789 .:|[]{},-_\n\tabcdefghijklmnopqrstuvwxyzKM%=\"'"))


def _only(parser, error, text):
    try:
        parser(text, "fuzz")
    except error:
        pass


@pytest.mark.parametrize("parser,error,path", CASES, ids=IDS)
@FUZZ
@given(data=st.data())
def test_truncated_fixture_raises_only_the_documented_error(parser, error, path, data):
    text = path.read_text()
    cut = data.draw(st.integers(0, len(text)))
    _only(parser, error, text[:cut])


@pytest.mark.parametrize("parser,error,path", CASES, ids=IDS)
@FUZZ
@given(data=st.data())
def test_mutated_fixture_raises_only_the_documented_error(parser, error, path, data):
    text = path.read_text()[:6000]
    for _ in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(0, len(text)))
        junk = data.draw(st.text(ALPHABET, max_size=12) | st.text(max_size=6))
        drop = data.draw(st.integers(0, 20))
        text = text[:at] + junk + text[at + drop:]
    _only(parser, error, text)


@pytest.mark.parametrize("parser,error,path", CASES, ids=IDS)
@FUZZ
@given(text=st.text(ALPHABET, max_size=300) | st.text(max_size=200))
def test_random_text_raises_only_the_documented_error(parser, error, path, text):
    _only(parser, error, text)


@FUZZ
@given(payload=st.binary(max_size=300))
def test_random_payload_raises_only_schema_error(payload):
    try:
        decode(payload)
    except SchemaError:
        pass


@FUZZ
@given(message=st.dictionaries(st.sampled_from(["schema", "role", "host", "epoch", "seq", "time",
                                                "interval_s", "server", "targets", "x"]),
                               st.integers() | st.text(max_size=5) | st.floats() | st.none()
                               | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)),
       compress=st.booleans())
def test_random_messages_decode_or_raise_schema_error(message, compress):
    try:
        payload = encode(message, compress)
    except (OverflowError, TypeError):
        return  # msgpack cannot encode huge ints: not a decoder concern
    try:
        decode(payload)
    except SchemaError:
        pass
