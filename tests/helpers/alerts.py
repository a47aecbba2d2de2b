"""The shipped alert rules evaluated by promtool on what real processes' `/metrics` said.

A scrape round reads every target once, as Prometheus would (with the `fleet` label the scrape
config sets, docs/monitoring.md): a target that does not answer gets `up 0` and no samples. A
timeline is rounds, each held for some minutes (the state it saw persisting); it becomes a
`promtool test rules` file whose input series are those samples, one a minute, and whose
expectations are the alerts given, so promtool evaluates the shipped expressions, `for:`
clauses included, on numbers the processes produced.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.conftest import promtool
from tests.helpers.prometheus import parse

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "examples/prometheus/alerts.yml"
RULES_TEST = ROOT / "examples/prometheus/alerts_test.yml"


def rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def metric_names() -> set[str]:
    """Every metric name the rules read."""
    return {name for r in rules() for name in re.findall(r"\b(croupier_\w+|up)\b", r["expr"])}


@dataclass
class Target:
    job: str
    url: str  # http://host:port
    fleet: str = "prod"  # the label the scrape config sets on a fleet's targets (monitoring.md)

    @property
    def instance(self) -> str:
        return self.url.removeprefix("http://")


@dataclass
class Round:
    """One scrape of every target: {(name, labels incl. job and instance): value}."""

    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)


def scrape(targets: list[Target]) -> Round:
    wanted = metric_names()
    out = Round()
    for t in targets:
        base = (("fleet", t.fleet), ("instance", t.instance), ("job", t.job))
        try:
            resp = httpx.get(t.url + "/metrics", timeout=10)
            resp.raise_for_status()
        except httpx.HTTPError:
            out.samples[("up", base)] = 0.0
            continue
        out.samples[("up", base)] = 1.0
        for (name, labels), value in parse(resp.text).items():
            if name in wanted:
                out.samples[(name, tuple(sorted({**dict(labels), **dict(base)}.items())))] = value
    return out


def _render(text: str, labels: dict[str, str]) -> str:
    return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m[1], ""), text)


def expected(alert: str, **labels: str) -> dict[str, Any]:
    """The alert as promtool reports it: its rule's labels and rendered annotations."""
    (rule,) = [r for r in rules() if r["alert"] == alert]
    return {
        "exp_labels": {**rule.get("labels", {}), **labels},
        "exp_annotations": {k: _render(v, labels) for k, v in rule["annotations"].items()},
    }


def check_alerts(
    tmp: Path,
    timeline: list[tuple[Round, int]],
    expect: dict[tuple[int, str], list[dict[str, Any]]],
) -> None:
    """`promtool test rules` on `timeline` (rounds, each held that many minutes): at each
    (minute, alert name) of `expect`, exactly those alerts fire (an empty list: none)."""
    keys = sorted({k for r, _ in timeline for k in r.samples})
    series = []
    for name, labels in keys:
        values = []
        for r, minutes in timeline:
            v = r.samples.get((name, labels))
            values += ["_" if v is None else repr(float(v))] * minutes
        selector = ", ".join(f'{k}="{v}"' for k, v in labels)
        series.append({"series": f"{name}{{{selector}}}", "values": " ".join(values)})
    tests = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {"eval_time": f"{minute}m", "alertname": name, "exp_alerts": alerts}
                    for (minute, name), alerts in expect.items()
                ],
            }
        ],
    }
    path = tmp / "scraped_test.yml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False))
    done = subprocess.run(
        [promtool(), "test", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n--- series ---\n{series}"
