"""The deploy files agree with the code: dashboard structure, metric and label names, docs.

Fast and offline. ``test_prometheus.py`` then runs every query against a real Prometheus.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from coordinator.metrics import SweepMetrics
from device_agent.metrics import AgentMetrics
from tests.deploy.helpers import (
    PROM_CONFIG,
    REPO,
    catalogue,
    dashboard,
    debian_tool,
    expressions,
    variable_queries,
)

DOCS = REPO / "docs" / "metrics.md"
JOBS = {"kgb-coordinator", "kgb-agent"}
VARIABLES = {"platform", "model", "method"}
GRAFANA_VARIABLES = {"__rate_interval", "__range", "__interval"}
BUILTIN_SERIES = {"up": ("gauge", ("job", "instance"))}
# Labels Prometheus adds to every scraped series.
TARGET_LABELS = {"job", "instance"}

_SELECTOR = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)")
_NAME = re.compile(r"\b(kgb_[a-z0-9_]+|up)\b")
_BY = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
_VAR = re.compile(r"\$\{?([a-zA-Z_][a-zA-Z0-9_]*)")


def _series() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Every series name a query may use -> (family type, label names)."""
    out: dict[str, tuple[str, tuple[str, ...]]] = dict(BUILTIN_SERIES)
    for owner in (SweepMetrics(), AgentMetrics("cpu")):
        for name, (kind, labels) in catalogue(owner).items():
            if kind == "histogram":
                out.update({name + "_bucket": (kind, (*labels, "le")),
                            name + "_sum": (kind, labels), name + "_count": (kind, labels)})
            else:
                out[name] = (kind, labels)
    return out


def test_dashboard_has_what_grafana_needs() -> None:
    d = dashboard()
    assert d["title"] and d["uid"] and isinstance(d["schemaVersion"], int)
    variables = {v["name"]: v for v in d["templating"]["list"]}
    ds = variables["datasource"]
    assert ds["type"] == "datasource" and ds["query"] == "prometheus"
    assert set(variables) == {"datasource"} | VARIABLES
    for name in VARIABLES:
        v = variables[name]
        assert v["type"] == "query" and v["datasource"]["uid"] == "${datasource}"
        assert v["includeAll"] and v["allValue"] == ".*"
    ids = [p["id"] for p in d["panels"]]
    assert all(isinstance(i, int) for i in ids) and len(ids) == len(set(ids))
    for p in d["panels"]:
        pos = p["gridPos"]
        assert {k: type(pos[k]) for k in "hwxy"} == dict.fromkeys("hwxy", int), p["title"]
        assert pos["w"] >= 1 and pos["h"] >= 1 and pos["x"] >= 0 and pos["x"] + pos["w"] <= 24
        if p["type"] == "row":
            continue
        assert p["title"] and p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [t["refId"] for t in p["targets"]]
        assert p["targets"] and len(refs) == len(set(refs)), p["title"]
        assert all(t["expr"].strip() for t in p["targets"]), p["title"]


def test_panels_do_not_overlap() -> None:
    taken: dict[tuple[int, int], str] = {}
    for p in dashboard()["panels"]:
        g = p["gridPos"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in taken, f"{p['title']!r} overlaps {taken[(x, y)]!r}"
                taken[(x, y)] = p["title"]


def test_every_query_uses_existing_metrics_labels_and_variables() -> None:
    series = _series()
    for title, expr in [*expressions(), *(("variable " + k, q) for k, q in variable_queries().items())]:
        names = set(_NAME.findall(expr))
        assert names, f"{title}: no metric in {expr}"
        unknown = names - set(series)
        assert not unknown, f"{title}: unknown metric(s) {unknown} in {expr}"
        labels = set().union(*(series[n][1] for n in names)) | TARGET_LABELS
        for metric, body in _SELECTOR.findall(expr):
            if metric in series:
                for label, _ in _MATCHER.findall(body):
                    assert label in (*series[metric][1], *TARGET_LABELS), \
                        f"{title}: {metric} has no label {label!r}"
        for group in _BY.findall(expr):
            for label in filter(None, (s.strip() for s in group.split(","))):
                assert label in labels, f"{title}: no metric of {expr} has label {label!r}"
        used_vars = set(_VAR.findall(expr))
        assert used_vars <= VARIABLES | GRAFANA_VARIABLES, f"{title}: unknown variable in {expr}"


def test_every_metric_is_on_the_dashboard() -> None:
    used = set(_NAME.findall(" ".join(e for _, e in expressions())))
    for owner in (SweepMetrics(), AgentMetrics("cpu")):
        missing = [name for name, (kind, _) in catalogue(owner).items()
                   if not used & ({name + s for s in ("_bucket", "_sum", "_count")}
                                  if kind == "histogram" else {name})]
        assert not missing, f"not on the dashboard: {missing}"


def _documented() -> dict[str, tuple[str, tuple[str, ...]]]:
    """``| `name` | type | `a`, `b` | meaning |`` rows of docs/metrics.md."""
    out = {}
    for line in DOCS.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(r"`kgb_[a-z0-9_]+`", cells[0]):
            out[cells[0].strip("`")] = (cells[1], tuple(re.findall(r"`([a-z_]+)`", cells[2])))
    return out


def test_docs_list_every_metric_with_its_type_and_labels() -> None:
    documented = _documented()
    actual = {**catalogue(SweepMetrics()), **catalogue(AgentMetrics("cpu"))}
    assert documented == actual


def test_prometheus_config_scrapes_the_coordinator_and_agents() -> None:
    config = yaml.safe_load(PROM_CONFIG.read_text())
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    assert set(jobs) == JOBS
    assert all(j["static_configs"][0]["targets"] for j in jobs.values())
    # The dashboard's job selectors name jobs that exist.
    for title, expr in expressions():
        for job in re.findall(r'job=~?"([^"]+)"', expr):
            assert any(re.fullmatch(job, name) for name in JOBS), f"{title}: job {job!r}"


def _prometheus_configs() -> list[Path]:
    """Every Prometheus configuration shipped under deploy/ (a YAML file with scrape jobs)."""
    found = []
    for path in sorted((REPO / "deploy").rglob("*.y*ml")):
        data = yaml.safe_load(path.read_text())
        if isinstance(data, dict) and "scrape_configs" in data:
            found.append(path)
    return found


def test_promtool_accepts_every_shipped_config() -> None:
    """promtool from Debian's prometheus package (installed here as root; a missing one fails in
    CI and as root, and skips elsewhere)."""
    configs = _prometheus_configs()
    assert PROM_CONFIG in configs
    promtool = debian_tool("promtool", "prometheus", "promtool")
    for config in configs:
        r = subprocess.run([promtool, "check", "config", str(config)], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, f"{config}: {r.stdout}{r.stderr}"
