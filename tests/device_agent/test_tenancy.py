"""device_agent/tenancy.py on its own: request-id rules, quotas on a fake clock, the audit log.
The same pieces inside a real agent are tested in tests/device_agent/test_auth.py."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from device_agent.evaluation import InvalidRequest
from device_agent.tenancy import (
    AuditLog,
    AuditRecord,
    Binding,
    QuotaExceeded,
    QuotaSettings,
    TenantQuotas,
    check_repeat,
    check_request_id,
)
from tests.helpers import FakeClock


def test_request_ids_are_short_printable_ascii() -> None:
    assert check_request_id("eval-0123") == "eval-0123"
    assert check_request_id("!" * 128)
    for bad in ("", "x" * 129, "a b", "a\nb", "\x00", "ü"):
        with pytest.raises(InvalidRequest):
            check_request_id(bad)


def test_a_repeat_must_match_operator_version_candidate_and_mode() -> None:
    first = Binding("aten::add", 1, "h" * 64, False)
    check_repeat("r", first, Binding("aten::add", 1, "h" * 64, False))
    for other, named in ((Binding("aten::sub", 1, "h" * 64, False), "operator"),
                         (Binding("aten::add", 2, "h" * 64, False), "operator"),
                         (Binding("aten::add", 1, "g" * 64, False), "candidate"),
                         (Binding("aten::add", 1, "h" * 64, True), "skip_timing")):
        with pytest.raises(InvalidRequest, match=named):
            check_repeat("r", first, other)


def test_concurrency_quota_counts_evaluations_in_flight_per_tenant() -> None:
    q = TenantQuotas(QuotaSettings(concurrency=2))
    q.admit("a")
    q.admit("a")
    with pytest.raises(QuotaExceeded, match="concurrency") as err:
        q.admit("a")
    assert err.value.retry_after_s == 1.0
    q.admit("b")  # another tenant is not affected
    q.release("a")
    q.admit("a")
    assert (q.in_flight("a"), q.in_flight("b")) == (2, 1)


def test_rate_quota_is_a_token_bucket_of_a_minutes_allowance() -> None:
    clock = FakeClock()
    q = TenantQuotas(QuotaSettings(per_minute=6), clock)
    for _ in range(6):
        q.admit("a")
        q.release("a")
    with pytest.raises(QuotaExceeded, match="rate") as err:
        q.admit("a")
    assert err.value.retry_after_s == pytest.approx(10.0)  # one evaluation every 10 s
    q.admit("b")
    clock.now += 9.0
    with pytest.raises(QuotaExceeded) as err:
        q.admit("a")
    assert err.value.retry_after_s == pytest.approx(1.0)
    clock.now += 1.0
    q.admit("a")
    clock.now += 3600.0  # idle for an hour: a minute's worth, no more
    q.release("a")
    for _ in range(6):
        q.admit("a")
        q.release("a")
    with pytest.raises(QuotaExceeded):
        q.admit("a")


def test_quota_settings_refuse_zero() -> None:
    with pytest.raises(ValueError):
        QuotaSettings(concurrency=0)


def test_audit_log_appends_one_flushed_json_line_per_record(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "audit.jsonl"
    log = AuditLog(path)
    log.write(AuditRecord(time="t", tenant="a", peer="p", rpc="r", status="PASSED"))
    # readable before close: flushed per record, not at exit
    assert orjson.loads(path.read_bytes())["status"] == "PASSED"
    log.write(AuditRecord(time="t", tenant=None, peer="p", rpc="r", refused="unauthenticated"))
    log.close()
    log = AuditLog(path)  # a restart appends
    log.write(AuditRecord(time="t", tenant="b", peer="p", rpc="r", refused="quota"))
    log.close()
    lines = [orjson.loads(x) for x in path.read_bytes().splitlines()]
    assert [(x["tenant"], x["status"], x["refused"]) for x in lines] == [
        ("a", "PASSED", None), (None, None, "unauthenticated"), ("b", None, "quota")]
