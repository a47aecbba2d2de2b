"""The reference engine CLI against a real server, end to end."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx

ENGINE_TIMEOUT_S = 120


def run_engine_cli(url: str, *args: str) -> dict:
    cmd = [sys.executable, "-m", "croupier", "engine", "--url", url, *args, "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=ENGINE_TIMEOUT_S)
    assert proc.returncode == 0, (proc.returncode, proc.stdout[-2000:], proc.stderr[-3000:])
    return json.loads(proc.stdout)


def _counter(exposition: str, name: str) -> int:
    """A counter's value summed over its labels, from a Prometheus text exposition."""
    values = [float(line.rsplit(" ", 1)[1]) for line in exposition.splitlines()
              if line.startswith((name + " ", name + "{"))]  # fmt: skip
    assert values, f"{name} not exposed"
    return int(sum(values))


def test_rules_beat_random(leduc_server):
    s = run_engine_cli(
        leduc_server, "--game", "leduc-holdem", "--seats", "rules,random", "--hands", "2000",
        "--games", "32",
    )  # fmt: skip
    assert s["errors"] == 0 and s["error_samples"] == []
    assert s["hands"] == 2000 and s["decisions"] >= 2000
    rules, rand = s["policies"]["rules"], s["policies"]["random"]
    assert rules["n"] == rand["n"] == 2000  # alternated seats: both play every hand
    assert rules["mean"] > 0
    assert rules["mean"] - rules["ci95"] > 0, rules
    assert abs(rules["mean"] + rand["mean"]) < 1e-9  # zero-sum
    health = httpx.get(leduc_server + "/healthz", timeout=10).json()
    assert health["games_in_flight"] == 0
    # Neither policy is recorded.
    assert health["episodes"]["recorded"] == 0


def test_uno_end_to_end(server_factory):
    with server_factory("--game", "uno", "--seats", "learned,rules") as url:
        s = run_engine_cli(url, "--game", "uno", "--hands", "30", "--games", "8")
        health = httpx.get(url + "/healthz", timeout=10).json()
        metrics = httpx.get(url + "/metrics", timeout=10).text
    assert s["errors"] == 0, s["error_samples"]
    assert s["hands"] == 30
    assert set(s["policies"]) == {"learned", "rules"}
    assert s["policies"]["learned"]["n"] == s["policies"]["rules"]["n"] == 30
    assert health["game"] == "uno" and health["games_created"] == 30
    assert health["games_in_flight"] == 0
    assert health["decisions"]["learned"] + health["decisions"]["rules"] == s["decisions"]
    assert 0 < health["episodes"]["recorded"] <= 30
    # Every learned decision is a step, but a forced one (one legal move: UNO's lone draw),
    # answered without a forward and recorded as no step (sessions/deciding.py).
    forced = _counter(metrics, "croupier_forced_moves_total")
    assert 0 < forced < health["decisions"]["learned"]
    assert health["episodes"]["pending_steps"] == health["decisions"]["learned"] - forced
