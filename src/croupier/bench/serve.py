"""`croupier bench serve`: what a decision costs over HTTP, with and without the model.

Against the same server build, for each number of concurrent games:

  (a) floor    a decide that skips the model (a `random` seat): the HTTP stack's own cost
  (b) unbatch  the learned policy, one forward per request on the event loop (`--max-batch 1`)
  (c) batched  the learned policy with dynamic batching (the default server: forwards on a
               thread of their own, big batches inline); `c-inline` runs all on the event loop
  (d) batch    `POST /v1/decide:batch`, 64 decisions of different games per request

The load generator is wrk (one thread, keep-alive connections, one request in flight per
connection = per game) with a Lua script that only replays prepared bodies, so it costs the
server's core nothing. Server CPU per decision comes from /proc/<pid>/stat.

On a machine with two or more CPUs the server is pinned to one and wrk to another (`taskset`),
as if the engine ran on its own machine: otherwise the scheduler sometimes puts both on one
core and a run measures that. The scenarios run in `rounds` interleaved rounds (a, b, c, …,
a, b, c, …) and each number is the median over rounds, ratios taken within each round: this
box's speed drifts by ±20% over minutes, and interleaving spreads the drift over all scenarios.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from croupier.engine.rlcard_games import RLCardTable
from croupier.local_server import free_port, start_serve, wait_until_up

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
    Scenario("b", "learned, unbatched", "learned", ["--max-batch", "1", "--no-forward-thread"]),
    Scenario("c", "learned, batched", "learned", []),
    Scenario("c-inline", "learned, batched, inline", "learned", ["--no-forward-thread"]),
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


def _pinning() -> tuple[list[str], list[str]]:
    """Command prefixes that pin the server and the load generator to different CPUs."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2 or shutil.which("taskset") is None:
        return [], []
    return ["taskset", "-c", str(cpus[0])], ["taskset", "-c", str(cpus[1])]


def _start_server(port: int, args: list[str], prefix: list[str] | None = None) -> subprocess.Popen:
    proc = start_serve(["--game", GAME, "--data-dir", "none", *args], port, prefix=prefix or [])
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
    server_cpu, load_cpu = _pinning()
    server = _start_server(port, scenario.server_args, server_cpu)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            bodies, out = Path(tmp) / "bodies.tsv", Path(tmp) / "out.json"
            bodies.write_text("\n".join(_bodies(url, scenario, games)) + "\n")
            # Connections: one per game; a batch request stands for 64 games' decisions (at
            # least two in flight, as an engine pipelining its tables would have).
            connections = max(2, -(-games // scenario.items_per_request))
            env = {**os.environ, "BENCH_BODIES": str(bodies), "BENCH_OUT": str(out)}
            wrk = [*load_cpu, "wrk", "-t1", f"-c{connections}"]
            cmd = [*wrk, f"-d{seconds:g}s", "--timeout", "10s"]
            # Warm up (torch, caches), then measure.
            subprocess.run(
                [*wrk, "-d2s", "-s", str(LUA), url], env=env, check=True, capture_output=True
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


def medians(results: list[Result]) -> list[Result]:
    """One result per (games, scenario): the median of each number over the rounds."""
    out = []
    keys = dict.fromkeys((r.games, r.scenario) for r in results)
    for games, name in keys:
        runs = [r for r in results if r.games == games and r.scenario == name]
        out.append(
            Result(
                scenario=name,
                label=runs[0].label,
                games=games,
                decisions_per_s=statistics.median(r.decisions_per_s for r in runs),
                requests_per_s=statistics.median(r.requests_per_s for r in runs),
                p50_ms=statistics.median(r.p50_ms for r in runs),
                p99_ms=statistics.median(r.p99_ms for r in runs),
                server_cpu_us_per_decision=statistics.median(
                    r.server_cpu_us_per_decision for r in runs
                ),
                errors=sum(r.errors for r in runs),
            )
        )
    return out


def bench_serve(
    games_list: list[int], seconds: float, out_dir: Path, rounds: int = 3
) -> dict[str, Any]:
    if shutil.which("wrk") is None:
        raise RuntimeError("wrk is not installed: apt-get install wrk (Debian's package)")
    runs: list[Result] = []
    round_ratios: dict[str, list[dict[str, float]]] = {}
    for games in games_list:
        for i in range(rounds):
            this_round = []
            for scenario in SCENARIOS:
                this_round.append(run_scenario(scenario, games, seconds))
                print(f"round {i + 1}: " + format_table(this_round[-1:]).splitlines()[-1],
                      flush=True)  # fmt: skip
            runs += this_round
            round_ratios.setdefault(str(games), []).append(ratios(this_round)[str(games)])
    results = medians(runs)
    report = {
        "load_generator": "wrk -t1 + Lua replaying prepared bodies (keep-alive, 1 in flight "
        "per connection)",
        "pinned": bool(_pinning()[0]),
        "seconds": seconds,
        "rounds": rounds,
        "results": [asdict(r) for r in results],
        # Median over rounds of each round's ratio.
        "ratios": {
            games: {k: statistics.median(r[k] for r in per_round) for k in per_round[0]}
            for games, per_round in round_ratios.items()
        },
        "runs": [asdict(r) for r in runs],
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "serve.json").write_text(json.dumps(report, indent=2))
    plot(results, out_dir / "serve.png")
    return report
