"""Shared by the deploy tests: a cpu agent exporting metrics, scraping, the metric catalogue,
the dashboard's queries, and tools from Debian packages (Prometheus, promtool, docker-compose)."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest
from prometheus_client import Metric
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from coordinator.local_agent import LocalAgent

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "deploy" / "grafana" / "kgb.json"
PROM_CONFIG = REPO / "deploy" / "prometheus.yml"
_METRICS_LINE = re.compile(r"kgb agent metrics on (http://\S+/metrics)")


@dataclass(frozen=True)
class MetricsAgent:
    address: str      # gRPC host:port
    metrics_url: str  # http://host:port/metrics
    agent: LocalAgent


@contextmanager
def metrics_agent(log_path: Path, *, workers: int = 1, extra_args: tuple[str, ...] = (),
                  serving: bool = True) -> Iterator[MetricsAgent]:
    """A real cpu agent started with ``--metrics-port 0``; the URL comes from its start-up line."""
    agent = LocalAgent(platform="cpu", workers=workers, log_path=log_path,
                       extra_args=("--metrics-port", "0", *extra_args))
    address = agent.start()
    try:
        url = ""
        end = time.monotonic() + 60
        while not url and time.monotonic() < end:
            found = _METRICS_LINE.search(agent.log_tail(100_000))
            url = found.group(1) if found else ""
            if not url:
                assert agent.alive(), agent.log_tail()
                time.sleep(0.1)
        assert url, f"the agent never printed its metrics URL:\n{agent.log_tail()}"
        if serving:
            asyncio.run(agent.wait_serving(timeout=180))
        yield MetricsAgent(address, url, agent)
    finally:
        agent.stop()


def scrape(url: str) -> dict[str, Metric]:
    """The families an endpoint serves, by name (counters without their ``_total``)."""
    body = urllib.request.urlopen(url, timeout=10).read().decode()
    return {f.name: f for f in text_string_to_metric_families(body)}


def sample(families: dict[str, Metric], name: str, **labels: str) -> float | None:
    """The value of the one sample called ``name`` whose labels include ``labels``."""
    family = families.get(re.sub(r"(_total|_bucket|_sum|_count)$", "", name))
    if family is None:
        family = families.get(name)
    if family is None:
        return None
    hits = [s.value for s in family.samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(hits) <= 1, (name, labels, hits)
    return hits[0] if hits else None


def catalogue(owner: object) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Every metric a ``SweepMetrics`` / ``AgentMetrics`` owns: exposed name -> (type, labels).

    Counters are named with ``_total`` as Prometheus stores them; checked against the registry,
    so a metric held in no attribute cannot hide."""
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    for m in vars(owner).values():
        if isinstance(m, MetricWrapperBase):
            kind = m._type  # noqa: SLF001 - prometheus_client keeps these private
            name = m._name + ("_total" if kind == "counter" else "")  # noqa: SLF001
            out[name] = (kind, tuple(m._labelnames))  # noqa: SLF001
    registry = owner.registry  # type: ignore[attr-defined]
    assert len(list(registry.collect())) == len(out), "a registered metric is not an attribute"
    return out


def dashboard() -> dict[str, Any]:
    """deploy/grafana/kgb.json, parsed."""
    return dict(json.loads(DASHBOARD.read_text()))


def panels() -> list[dict[str, Any]]:
    """The dashboard's panels that hold queries (rows only group them)."""
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def expressions() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every query on the dashboard."""
    return [(p["title"], t["expr"]) for p in panels() for t in p["targets"]]


def variable_queries() -> dict[str, str]:
    """Query variables: name -> ``label_values(selector, label)`` definition."""
    return {v["name"]: v["query"]["query"] for v in dashboard()["templating"]["list"]
            if v["type"] == "query"}


# -- tools from Debian packages: fail in CI and as root, skip elsewhere ---------------------------


def must_run() -> bool:
    """Whether a missing tool fails the test (CI, or root, who can install it) or skips it."""
    return bool(os.environ.get("CI")) or os.geteuid() == 0


def unavailable(message: str, package: str, what: str = "") -> NoReturn:
    if must_run():
        pytest.fail(f"{what or package} is required here (CI or root): {message}", pytrace=False)
    pytest.skip(f"{message} (install it with: sudo apt-get install -y {package})")


def debian_tool(binary: str, package: str, what: str = "") -> str:
    """``binary`` on PATH; as root, installed from the Debian ``package`` when missing. ``what``
    names the tool in a failure (default: the package)."""
    found = shutil.which(binary)
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        unavailable(f"the {binary} binary is not on PATH", package, what)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", package]
    out = ""
    for cmd in (install, ["apt-get", "update"], install):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
        out = r.stdout[-1500:] + r.stderr[-1500:]
        if cmd is install and r.returncode == 0 and shutil.which(binary):
            break
    found = shutil.which(binary)
    if not found:
        unavailable(f"`apt-get install {package}` did not provide {binary}:\n{out}", package, what)
    return found


# -- the agent's command line -------------------------------------------------------------------


@functools.cache
def serve_help() -> str:
    """``python -m device_agent serve --help``."""
    return subprocess.run([sys.executable, "-m", "device_agent", "serve", "--help"],
                          capture_output=True, text=True, timeout=120, check=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}).stdout


def assert_serve_flags(argv: list[str], where: str) -> None:
    """``argv`` (after the program) is ``serve`` with flags the agent's parser knows."""
    assert argv and argv[0] == "serve", f"{where}: {argv}"
    flags = [a.split("=")[0] for a in argv if a.startswith("--")]
    unknown = [f for f in flags
               if not re.search(rf"(^|[\s,]){re.escape(f)}(?=[\s,=]|$)", serve_help(), re.M)]
    assert not unknown, f"{where}: `python -m device_agent serve` has no {unknown}"
