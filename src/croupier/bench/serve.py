"""`croupier bench serve`: what a decision costs over HTTP, with and without the model.

Against the same server build, for each number of concurrent games:

  (a) floor    a decide that skips the model (a `random` seat): the HTTP stack's own cost
  (b) unbatch  the learned policy, one forward per request (`--max-batch 1`)
  (c) batched  the learned policy with dynamic batching (the default server: forwards on the
               event loop); `c-thread` runs them on a thread of their own instead
  (d) batch    `POST /v1/decide:batch`, 64 decisions of different games per request

The load generator is wrk (one thread, keep-alive connections, one request in flight per
connection = per game) with a Lua script that only replays prepared bodies, so it costs the
server's core nothing. Server CPU per decision comes from /proc/<pid>/stat.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from croupier.demo import free_port, wait_until_up
from croupier.engine.rlcard_games import RLCardTable

LUA = Path(__file__).with_name("decide.lua")
GAME = "leduc-holdem"
BATCH_ITEMS = 64


@dataclass
class Scenario:
    name: str
    label: str
    seat: str  # the policy of the deciding seat
    server_args: list[str]
    items_per_request: int = 1


SCENARIOS = [
    Scenario("a", "floor: no-model decide", "random", []),
    Scenario("b", "learned, unbatched", "learned", ["--max-batch", "1"]),
    Scenario("c", "learned, batched", "learned", []),
    Scenario("c-thread", "learned, batched, thread", "learned", ["--forward-thread"]),
    Scenario("d", f"decide:batch x{BATCH_ITEMS}", "learned", [], BATCH_ITEMS),
]


@dataclass
class Result:
    scenario: str
    label: str
    games: int
    decisions_per_s: float
    requests_per_s: float
    p50_ms: float
    p99_ms: float
    server_cpu_us_per_decision: float
    errors: int


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _sample_states(n: int) -> list[dict[str, Any]]:
    """Real leduc states for seat 0, so every decide does the full encode."""
    table, states = RLCardTable(GAME), []
    table.reset(7)
    while len(states) < n:
        if table.is_over():
            table.reset()
            continue
        player = table.current_player()
        state = table.state_json(player)
        if player == 0:
            states.append(state)
        table.step(state["legal_actions"][0])
    return states


def _start_server(port: int, args: list[str]) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "croupier", "serve", "--game", GAME, "--port", str(port), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_up(f"http://127.0.0.1:{port}", proc, timeout=60)
    except BaseException:
        proc.kill()
        raise
    return proc


def _bodies(url: str, scenario: Scenario, games: int) -> list[str]:
    """Open `games` unrecorded games and prepare one request line per game (or batch)."""
    states = _sample_states(64)
    seats = {"0": scenario.seat, "1": "rules"}
    ids = []
    with httpx.Client(base_url=url, timeout=30) as client:
        for _ in range(games):
            r = client.post("/v1/games", json={"game": GAME, "seats": seats, "record": False})
            r.raise_for_status()
            ids.append(r.json()["game_id"])
    if scenario.items_per_request == 1:
        return [
            f"/v1/games/{gid}/decide\t"
            + json.dumps({"seat": "0", "state": states[i % len(states)]}, separators=(",", ":"))
            for i, gid in enumerate(ids)
        ]
    k = scenario.items_per_request
    lines = []
    for start in range(0, max(games, k), k):
        items = [
            {"game_id": ids[(start + j) % games], "seat": "0", "state": states[j % len(states)]}
            for j in range(k)
        ]
        lines.append("/v1/decide:batch\t" + json.dumps({"items": items}, separators=(",", ":")))
    return lines


def run_scenario(scenario: Scenario, games: int, seconds: float) -> Result:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = _start_server(port, scenario.server_args)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            bodies, out = Path(tmp) / "bodies.tsv", Path(tmp) / "out.json"
            bodies.write_text("\n".join(_bodies(url, scenario, games)) + "\n")
            # Connections: one per game; a batch request stands for 64 games' decisions (at
            # least two in flight, as an engine pipelining its tables would have).
            connections = max(2, -(-games // scenario.items_per_request))
            env = {**os.environ, "BENCH_BODIES": str(bodies), "BENCH_OUT": str(out)}
            cmd = ["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "--timeout", "10s"]
            # Warm up (torch, caches), then measure.
            subprocess.run(
                [*cmd[:3], "-d2s", "-s", str(LUA), url], env=env, check=True, capture_output=True
            )
            cpu0 = _cpu_seconds(server.pid)
            subprocess.run([*cmd, "-s", str(LUA), url], env=env, check=True, capture_output=True)
            cpu = _cpu_seconds(server.pid) - cpu0
            w = json.loads(out.read_text())
    finally:
        server.terminate()
        server.wait(timeout=30)
    secs = w["duration_us"] / 1e6
    decisions = w["requests"] * scenario.items_per_request
    errors = sum(w[k] for k in w if k.startswith("errors_"))
    return Result(
        scenario=scenario.name,
        label=scenario.label,
        games=games,
        decisions_per_s=decisions / secs,
        requests_per_s=w["requests"] / secs,
        p50_ms=w["p50_us"] / 1000,
        p99_ms=w["p99_us"] / 1000,
        server_cpu_us_per_decision=cpu / max(decisions, 1) * 1e6,
        errors=errors,
    )


def format_table(results: list[Result]) -> str:
    lines = [
        f"{'games':>6} {'scenario':<24} {'decisions/s':>12} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'cpu us/dec':>10} {'errors':>6}"
    ]
    for r in results:
        lines.append(
            f"{r.games:>6} {r.scenario + ' ' + r.label:<24} {r.decisions_per_s:>12,.0f} "
            f"{r.p50_ms:>8.2f} {r.p99_ms:>8.2f} {r.server_cpu_us_per_decision:>10.1f} "
            f"{r.errors:>6}"
        )
    return "\n".join(lines)


def ratios(results: list[Result]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for games in sorted({r.games for r in results}):
        by = {r.scenario: r.decisions_per_s for r in results if r.games == games}
        if "a" in by:
            out[str(games)] = {f"{k}/a": v / by["a"] for k, v in by.items() if k != "a"}
    return out


def plot(results: list[Result], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    games = sorted({r.games for r in results})
    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.8 / len(SCENARIOS)
    for i, sc in enumerate(SCENARIOS):
        ys = [
            next((r.decisions_per_s for r in results if r.games == g and r.scenario == sc.name), 0)
            for g in games
        ]
        ax.bar(
            [j + i * width for j in range(len(games))], ys, width, label=f"({sc.name}) {sc.label}"
        )
    ax.set_xticks([j + width * (len(SCENARIOS) - 1) / 2 for j in range(len(games))])
    ax.set_xticklabels([f"{g} games" for g in games])
    ax.set_ylabel("decisions / s")
    ax.set_title("croupier bench serve (one uvicorn worker, wrk on the same 2 cores)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def bench_serve(games_list: list[int], seconds: float, out_dir: Path) -> dict[str, Any]:
    if shutil.which("wrk") is None:
        raise RuntimeError("wrk is not installed: apt-get install wrk (Debian's package)")
    results = []
    for games in games_list:
        for scenario in SCENARIOS:
            results.append(run_scenario(scenario, games, seconds))
            print(format_table(results[-1:]).splitlines()[-1], flush=True)
    report = {
        "load_generator": "wrk -t1 + Lua replaying prepared bodies (keep-alive, 1 in flight "
        "per connection)",
        "seconds": seconds,
        "results": [asdict(r) for r in results],
        "ratios": ratios(results),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "serve.json").write_text(json.dumps(report, indent=2))
    plot(results, out_dir / "serve.png")
    return report
