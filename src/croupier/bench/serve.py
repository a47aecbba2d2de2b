"""`croupier bench serve`: what a decision costs over HTTP, with and without the model.

Against the same server build, for each number of concurrent games:

  (a) floor    a decide that skips the model (a `random` seat): the HTTP stack's own cost
  (r) rules    a decide the game's rules policy answers (doudizhu: the reference engine's
               peasants)
  (b) unbatch  the learned policy, one forward per request on the event loop (`--max-batch 1`)
  (c) batched  the learned policy with dynamic batching (the default server: forwards on a
               thread of their own, big batches inline); `c-inline` runs all on the event loop;
               `c-torch` a candidate game's forward in torch, not ONNX Runtime
  (d) batch    `POST /v1/decide:batch`, 64 decisions of different games per request
  (c2)         (c) on two server processes, each pinned to a core of its own, the games
               routed to them by id (rendezvous, as `RoutedClient`): against (c) on one
  (ray)        the same module served by Ray Serve with `@serve.batch`, one replica per core
               the croupier server gets (`bench/ray_serve_app.py`): same weights, same
               request body, same work per request; skipped when Ray Serve is not installed
               (`pip install 'croupier[bench]'`)

`--scenarios` runs some of them (by name); ratios `X/a`, `c2/c` and `c/ray` are reported for
the scenarios run together, at full load.

`--think-ms` adds load points below saturation: each game waits a think time (exponential,
that mean) before each decision, so the latency is the service time plus the queueing that
load causes. With no think time (0, the default) every game asks again as soon as it is
answered: the server is saturated and, by Little's law, the mean latency is games / (decisions
per second) whatever the server does: 100 games at 2,000/s wait 50 ms. A latency target is a
statement at a load; these points say which.

`--game` measures another game of the reference engine (doudizhu: three seats, candidate
scoring; seat 0 decides, the others are `rules` seats that never get a request): every
scenario but `ray`, whose app serves leduc only. `--adapters` serves it with each adapter
named (a built-in game or `package.module:Adapter` reading the engine's JSON: the game
declared through the card toolkit beside its hand-made adapter), each scenario once per
adapter in every round (`c@doudizhu`, `c@DoudizhuCardsCandidates`), so the adapters share
the box's drift; `cpu X@B/X@A` is the server CPU a decision of the second against the first.

Every croupier server runs with `--profile-stages`: each result also says the server CPU per
decision of each stage of the decide path (http_in, parse, encode and, for doudizhu, its
validate / state features / candidate features, rules, batch assembly, forward, sampling,
record, response, http_out, and `other`: the process's CPU less those), in thread CPU time
(`croupier/stages.py`; the timers cost 15-30 µs a learned decision on this VM, in every
build alike). `stages` in the JSON.

The load generator is wrk (one thread, keep-alive connections, one request in flight per
connection = per game) with a Lua script that only replays prepared bodies, so it costs the
server's core nothing. Server CPU per decision comes from /proc/<pid>/stat; each result also
says how many cores the servers and wrk used (`server_cores`, `load_cores`): on 2 cores c2's
two servers get what wrk leaves them.

On a machine with two or more CPUs the server is pinned to one and wrk to another (`taskset`),
as if the engine ran on its own machine: otherwise the scheduler sometimes puts both on one
core and a run measures that. The scenarios run in `rounds` interleaved rounds (a, b, c, …,
a, b, c, …) and each number is the median over rounds, ratios taken within each round: this
box's speed drifts by ±20% over minutes, and interleaving spreads the drift over all scenarios.

Why ~670 lines in one module: every scenario is measured by the same load, pinning and CPU
accounting in one run (the ratios are only worth what is shared); Ray Serve's app is
`bench/ray_serve_app.py`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from croupier.bench.plotting import pyplot, save
from croupier.client import route_game
from croupier.engine.rlcard_games import RLCardTable
from croupier.local_server import free_port, start_serve, wait_until_up
from croupier.stages import STAGES, SUB_STAGES, difference, request_snapshot

LUA = Path(__file__).with_name("decide.lua")
GAME = "leduc-holdem"  # the default; the Ray Serve app serves this one only
BATCH_ITEMS = 64


@dataclass
class Scenario:
    name: str
    label: str
    seat: str  # the policy of the deciding seat
    server_args: list[str]
    items_per_request: int = 1
    servers: int = 1  # croupier processes, games routed to them by id
    system: str = "croupier"  # or "ray-serve"
    default: bool = True  # run without `--scenarios`
    adapter: str | None = None  # the server's `--game` (None: the game's built-in adapter)


SCENARIOS = [
    Scenario("a", "floor: no-model decide", "random", []),
    Scenario("r", "rules seat decide", "rules", [], default=False),
    Scenario("b", "learned, unbatched", "learned", ["--max-batch", "1", "--no-forward-thread"]),
    Scenario("c", "learned, batched", "learned", []),
    Scenario(
        "c-torch",
        "learned, batched, torch forward",
        "learned",
        ["--no-onnx-forward"],
        default=False,
    ),
    Scenario("c-inline", "learned, batched, inline", "learned", ["--no-forward-thread"]),
    Scenario("d", f"decide:batch x{BATCH_ITEMS}", "learned", [], BATCH_ITEMS),
    Scenario("c2", "learned, batched, 2 procs", "learned", [], servers=2),
    Scenario("ray", "Ray Serve @serve.batch", "learned", [], system="ray-serve"),
]
# Ratios beyond `X/a`: (numerator, denominator) scenarios run in the same round.
PAIRS = (("c2", "c"), ("c", "ray"))


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
    think_ms: float = 0.0  # mean think time per game between decisions (0: saturated)
    # CPU the servers and the load generator (wrk) used, in cores (CPU seconds a second): on
    # 2 cores, c2's servers get what wrk leaves, and that bounds c2/c here (docs/performance.md).
    server_cores: float = 0.0
    load_cores: float = 0.0
    # Server CPU per decision by stage (`croupier/stages.py`, `--profile-stages`), µs, with
    # `other` (the process's CPU less the top-level stages: HTTP stack, event loop, batcher
    # hand-off); None where not measured (Ray Serve).
    stages_us: dict[str, float] | None = None


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _session_stats(sid: int) -> dict[int, list[str]]:
    """The /proc/<pid>/stat fields (after the name) of every live process in session `sid`:
    Ray's driver and all it started (its actors set process groups of their own)."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        if int(fields[3]) == sid:
            out[int(stat.parent.name)] = fields
    return out


def _session_cpu_seconds(sid: int) -> float:
    """CPU of every live process in session `sid`."""
    ticks = sum(int(f[11]) + int(f[12]) for f in _session_stats(sid).values())
    return ticks / os.sysconf("SC_CLK_TCK")


def _sample_states(n: int, game: str = GAME) -> list[dict[str, Any]]:
    """Real states of `game` for seat 0, so every decide does the full encode."""
    table, states = RLCardTable(game), []
    table.reset(7)
    for _ in range(1000 * n):  # bounded: seat 0 decides every few moves in these games
        if len(states) >= n:
            break
        if table.is_over():
            table.reset()
            continue
        player = table.current_player()
        state = table.state_json(player)
        if player == 0:
            states.append(state)
        table.step(state["legal_actions"][0])
    if len(states) < n:
        raise RuntimeError(f"{game}: seat 0 decided {len(states)} times in {1000 * n} moves")
    return states


def _pinning(servers: int = 1) -> tuple[list[list[str]], list[str]]:
    """Command prefixes pinning each server and the load generator to CPUs of their own
    (with too few CPUs for that, the load generator is left unpinned; with one, nothing is)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2 or shutil.which("taskset") is None:
        return [[] for _ in range(servers)], []
    pins = [["taskset", "-c", str(cpus[i % len(cpus)])] for i in range(servers)]
    rest = cpus[servers:]
    return pins, (["taskset", "-c", ",".join(map(str, rest))] if rest else [])


def skip_reason(scenario: Scenario, game: str = GAME) -> str | None:
    """Why `scenario` cannot run here (None: it can)."""
    if scenario.system == "ray-serve" and game != GAME:
        return f"the Ray Serve app serves {GAME} only"
    if scenario.servers > len(os.sched_getaffinity(0)):
        return f"{scenario.servers} server processes need as many CPUs"
    if scenario.system == "ray-serve":
        probe = subprocess.run(
            [sys.executable, "-c", "import ray.serve"], capture_output=True, timeout=120
        )
        if probe.returncode != 0:
            return "Ray Serve is not installed: pip install 'croupier[bench]' (ray[serve]==2.60.0)"
    return None


def _start_server(
    port: int, args: list[str], prefix: list[str] | None = None, game: str = GAME
) -> subprocess.Popen:
    proc = start_serve(["--game", game, "--data-dir", "none", *args], port, prefix=prefix or [])
    try:
        # Minutes, not seconds: on a shared 2-core box at load ~35 a server took over 60 s.
        wait_until_up(f"http://127.0.0.1:{port}", proc, timeout=240)
    except BaseException:
        proc.kill()
        raise
    return proc


def _decide_line(path: str, body: dict[str, Any]) -> str:
    return f"{path}\t" + json.dumps(body, separators=(",", ":"))


def _bodies(
    urls: list[str], scenario: Scenario, games: int, game: str = GAME
) -> dict[str, list[str]]:
    """Open `games` unrecorded games, each on the server its id routes to, and prepare one
    request line per game (or batch), by server."""
    from croupier.games.registry import load_adapter

    states = _sample_states(64, game)
    seats = {seat: "rules" for seat in load_adapter(game).seats} | {"0": scenario.seat}
    ids: dict[str, list[str]] = {url: [] for url in urls}
    clients = {url: httpx.Client(base_url=url, timeout=30) for url in urls}
    try:
        for _ in range(games):
            game_id = uuid.uuid4().hex
            url = route_game(game_id, urls)
            body = {"game": game, "game_id": game_id, "seats": seats, "record": False}
            clients[url].post("/v1/games", json=body).raise_for_status()
            ids[url].append(game_id)
    finally:
        for c in clients.values():
            c.close()
    return {url: _request_lines(scenario, gids, states) for url, gids in ids.items()}


def _request_lines(scenario: Scenario, ids: list[str], states: list[dict[str, Any]]) -> list[str]:
    if scenario.items_per_request == 1:
        return [
            _decide_line(f"/v1/games/{gid}/decide", {"seat": "0", "state": states[i % len(states)]})
            for i, gid in enumerate(ids)
        ]
    k, games = scenario.items_per_request, len(ids)
    lines = []
    for start in range(0, max(games, k), k):
        items = [
            {"game_id": ids[(start + j) % games], "seat": "0", "state": states[j % len(states)]}
            for j in range(k)
        ]
        lines.append(_decide_line("/v1/decide:batch", {"items": items}))
    return lines


def _start_ray_serve(prefix: list[str], replicas: int) -> tuple[subprocess.Popen, str]:
    """`bench/ray_serve_app.py` in a session of its own (Ray's processes with it); its url
    once it answers with croupier's own weights."""
    from croupier.bench.ray_serve_app import weights_digest
    from croupier.games.registry import load_adapter
    from croupier.policies.learned import PolicyVersions

    port = free_port()
    cmd = [*prefix, sys.executable, "-m", "croupier.bench.ray_serve_app", "--port", str(port),
           "--replicas", str(replicas)]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # Ray's start-up: tens of seconds on a small box
            if line.startswith("READY"):
                break
        else:
            raise RuntimeError(f"the Ray Serve app exited ({proc.wait()}) before it was ready")
        # Keep reading what it prints: a full pipe would stall it mid-measurement.
        threading.Thread(target=proc.stdout.read, daemon=True).start()
        served = httpx.get(url + "/decide", timeout=30).json()["weights"]
        ours = weights_digest(PolicyVersions(load_adapter(GAME), seed=0))
        if served != ours:
            raise RuntimeError(f"Ray Serve serves other weights ({served} vs {ours}): unfair")
    except BaseException:
        _stop_session(proc)
        raise
    return proc, url


def _stop_session(proc: subprocess.Popen) -> None:
    """SIGTERM to the app (it shuts Serve and Ray down: ~10 s), then SIGKILL to whatever of
    its session is left."""
    if proc.poll() is None:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=60)
    for pid in _session_stats(proc.pid):  # our own session's leftovers, each by its id
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.wait(timeout=10)


def run_scenario(
    scenario: Scenario, games: int, seconds: float, game: str = GAME, think_ms: float = 0.0
) -> Result:
    server_cpus, load_cpu = _pinning(scenario.servers)
    procs: list[subprocess.Popen] = []
    # Each croupier server writes its stage totals here at exit (`--profile-stages`).
    tmp = tempfile.TemporaryDirectory()
    profile_dir, profiles = Path(tmp.name), []
    try:
        if scenario.system == "ray-serve":
            replicas = len(os.sched_getaffinity(0)) if not server_cpus[0] else 1
            proc, url = _start_ray_serve(server_cpus[0], replicas)
            procs.append(proc)
            states = _sample_states(64)
            lines = {
                url: [
                    _decide_line("/decide", {"seat": "0", "state": states[i % len(states)]})
                    for i in range(games)
                ]
            }
            cpu_of = _session_cpu_seconds  # Ray's driver, raylet, GCS, proxy and replicas
        else:
            urls = []
            for prefix in server_cpus:
                port = free_port()
                profile = profile_dir / f"stages-{port}.json"
                profiles.append(profile)
                args = [*scenario.server_args, "--profile-stages", str(profile)]
                procs.append(_start_server(port, args, prefix, scenario.adapter or game))
                urls.append(f"http://127.0.0.1:{port}")
            lines = _bodies(urls, scenario, games, game)
            cpu_of = _cpu_seconds
        w, cpu, load_cpu_s, profiled = _load(
            lines, scenario, games, seconds, load_cpu, procs, cpu_of, think_ms, profiles
        )
    finally:
        for proc in procs:
            if scenario.system == "ray-serve":
                _stop_session(proc)
            else:
                proc.terminate()
                proc.wait(timeout=30)
        tmp.cleanup()
    secs = w["duration_us"] / 1e6
    decisions = w["requests"] * scenario.items_per_request
    errors = sum(w[k] for k in w if k.startswith("errors_"))
    cpu_us = cpu / max(decisions, 1) * 1e6
    return Result(
        scenario=scenario.name,
        label=scenario.label,
        games=games,
        decisions_per_s=decisions / secs,
        requests_per_s=w["requests"] / secs,
        p50_ms=w["p50_us"] / 1000,
        p99_ms=w["p99_us"] / 1000,
        server_cpu_us_per_decision=cpu_us,
        errors=errors,
        think_ms=think_ms,
        server_cores=cpu / secs,
        load_cores=load_cpu_s / secs,
        stages_us=stage_costs(profiled, cpu_us) if profiled else None,
    )


def stage_costs(profiles: list[dict[str, Any]], cpu_us: float) -> dict[str, float]:
    """µs per decision by stage from what the servers' stages timed over the measurement
    (`croupier.stages.difference`), and `other`: `cpu_us` (the processes' CPU per decision
    over the same window, from /proc) less the top-level stages."""
    decisions = sum(p["decisions"] for p in profiles)
    out = {
        stage: sum(p["ns"][stage] for p in profiles) / max(decisions, 1) / 1000 for stage in STAGES
    }
    out["other"] = cpu_us - sum(v for k, v in out.items() if k not in SUB_STAGES)
    return out


def stage_table(results: list[Result]) -> dict[str, dict[str, dict[str, float]]]:
    """{load point: {scenario: {stage: µs per decision}}}, for the results that have stages."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for r in results:
        if r.stages_us is not None:
            load = f"think {r.think_ms:g} ms" if r.think_ms else "saturated"
            point = f"{r.games} games, {load}"
            out.setdefault(point, {})[r.scenario] = dict(r.stages_us)
    return out


def format_stage_table(results: list[Result]) -> str:
    """The stage table as text: one column per (load point, scenario), one row per stage."""
    cols = [r for r in results if r.stages_us is not None]
    if not cols:
        return ""
    rows = [*STAGES, "other"]
    heads = [f"{r.scenario}@{r.games}/{r.think_ms:g}ms" for r in cols]
    lines = [f"{'server CPU us/decision':<24}" + "".join(f"{h:>16}" for h in heads)]
    for stage in rows:
        name = ("  " if stage in SUB_STAGES else "") + stage
        cells = "".join(f"{r.stages_us[stage]:>16.1f}" for r in cols)  # type: ignore[index]
        lines.append(f"{name:<24}{cells}")
    lines.append(f"{'total (/proc)':<24}" + "".join(
        f"{r.server_cpu_us_per_decision:>16.1f}" for r in cols))  # fmt: skip
    return "\n".join(lines)


def _load(
    lines: dict[str, list[str]],
    scenario: Scenario,
    games: int,
    seconds: float,
    load_cpu: list[str],
    procs: list[subprocess.Popen],
    cpu_of: Any,
    think_ms: float = 0.0,
    profiles: list[Path] | None = None,
) -> tuple[dict[str, Any], float, float, list[dict[str, Any]]]:
    """wrk against the server(s) (one thread each): its numbers, the servers' and wrk's own
    CPU seconds while it measured, and what each server's stages (`profiles[i]`: its
    `--profile-stages` file) timed meanwhile."""
    urls = list(lines)
    with tempfile.TemporaryDirectory() as tmp:
        bodies, out = Path(tmp) / "bodies.tsv", Path(tmp) / "out.json"
        env = {**os.environ, "BENCH_BODIES": str(bodies), "BENCH_OUT": str(out),
               "BENCH_THINK_MS": f"{think_ms:g}"}  # fmt: skip
        if len(urls) == 1:
            bodies.write_text("\n".join(lines[urls[0]]) + "\n")
        else:  # thread k -> server k (decide.lua)
            for k, url in enumerate(urls, start=1):
                Path(f"{bodies}.{k}").write_text("\n".join(lines[url]) + "\n")
            env["BENCH_SERVERS"] = ",".join(url.removeprefix("http://") for url in urls)
        # Connections: one per game; a batch request stands for 64 games' decisions (at
        # least two in flight per thread, as an engine pipelining its tables would have).
        threads = len(urls)
        connections = max(2 * threads, -(-games // scenario.items_per_request))
        wrk = [*load_cpu, "wrk", f"-t{threads}", f"-c{connections}"]
        cmd = [*wrk, f"-d{seconds:g}s", "--timeout", "10s"]
        # Warm up (torch, caches; Ray Serve's proxy and replica take longer), then measure.
        warm_s = 5 if scenario.system == "ray-serve" else 2
        subprocess.run(
            [*wrk, f"-d{warm_s}s", "-s", str(LUA), urls[0]],
            env=env,
            check=True,
            capture_output=True,
        )
        profiled = list(zip(procs, profiles or [], strict=False))
        before = [request_snapshot(p.pid, path, 1) for p, path in profiled]
        cpu0, reaped0 = sum(cpu_of(p.pid) for p in procs), _children_cpu_seconds()
        subprocess.run([*cmd, "-s", str(LUA), urls[0]], env=env, check=True, capture_output=True)
        cpu = sum(cpu_of(p.pid) for p in procs) - cpu0
        reaped = _children_cpu_seconds() - reaped0
        after = [request_snapshot(p.pid, path, 2) for p, path in profiled]
        stages = [difference(a, b) for a, b in zip(after, before, strict=True)]
        # wrk is the only child reaped in between (taskset execs it: one process).
        return json.loads(out.read_text()), cpu, reaped, stages


def _children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def format_table(results: list[Result]) -> str:
    lines = [
        f"{'games':>6} {'think':>6} {'scenario':<24} {'decisions/s':>12} {'p50 ms':>8} "
        f"{'p99 ms':>8} {'cpu us/dec':>10} {'errors':>6}"
    ]
    for r in results:
        think = f"{r.think_ms:g}ms" if r.think_ms else "-"
        lines.append(
            f"{r.games:>6} {think:>6} {r.scenario + ' ' + r.label:<24} "
            f"{r.decisions_per_s:>12,.0f} "
            f"{r.p50_ms:>8.2f} {r.p99_ms:>8.2f} {r.server_cpu_us_per_decision:>10.1f} "
            f"{r.errors:>6}"
        )
    return "\n".join(lines)


def ratios(results: list[Result]) -> dict[str, dict[str, float]]:
    """Per number of games, at full load (no think time: below it, decisions/s is the load
    offered, not what the server can do): each scenario against the floor (`X/a`), and the
    pairs `PAIRS` (two processes against one, croupier against Ray Serve), where both ran;
    and at every load point each adapter's server CPU a decision against the first's
    (`cpu X@B/X@A`)."""
    out: dict[str, dict[str, float]] = {}
    saturated = [r for r in results if not r.think_ms]
    for games in sorted({r.games for r in saturated}):
        by = {r.scenario: r.decisions_per_s for r in saturated if r.games == games}
        these: dict[str, float] = {}
        if by.get("a"):
            these = {f"{k}/a": v / by["a"] for k, v in by.items() if k != "a"}
        for num, den in PAIRS:
            if by.get(num) is not None and by.get(den):
                these[f"{num}/{den}"] = by[num] / by[den]
        if these:
            out[str(games)] = these
    # Adapters side by side (`per_adapter`): server CPU a decision against the first adapter
    # of the same scenario, at every load point (think time: the same offered load each).
    for r in results:
        base, at, _ = r.scenario.partition("@")
        if not at:
            continue
        first = next(x for x in results if x.scenario.startswith(base + "@")
                     and (x.games, x.think_ms) == (r.games, r.think_ms))  # fmt: skip
        if first is not r and first.server_cpu_us_per_decision:
            load = f" think {r.think_ms:g}ms" if r.think_ms else ""
            key = f"cpu {r.scenario}/{first.scenario}{load}"
            out.setdefault(str(r.games), {})[key] = (
                r.server_cpu_us_per_decision / first.server_cpu_us_per_decision
            )
    return out


def plot(results: list[Result], path: Path) -> None:
    plt = pyplot()

    saturated = [r for r in results if not r.think_ms]
    paced = sorted({(r.games, r.think_ms) for r in results if r.think_ms})
    games = sorted({r.games for r in saturated})
    fig, axes = plt.subplots(1, 2 if paced else 1, figsize=(14 if paced else 8, 4.5))
    ax = axes[0] if paced else axes
    ran = list(dict.fromkeys((r.scenario, r.label) for r in results))  # (per adapter too)
    width = 0.8 / max(len(ran), 1)
    for i, (name, label) in enumerate(ran):
        ys = [
            next((r.decisions_per_s for r in saturated if r.games == g and r.scenario == name), 0)
            for g in games
        ]
        ax.bar([j + i * width for j in range(len(games))], ys, width, label=f"({name}) {label}")
    ax.set_xticks([j + width * (len(ran) - 1) / 2 for j in range(len(games))])
    ax.set_xticklabels([f"{g} games" for g in games])
    ax.set_ylabel("decisions / s (saturated)")
    ax.set_title("croupier bench serve (one uvicorn worker, wrk on the same 2 cores)")
    ax.legend(fontsize=8)
    if paced:  # p99 at each load point, saturated first
        ax = axes[1]
        points = [(g, 0.0) for g in games] + paced
        for name, label in ran:
            ys = [
                next(
                    (
                        r.p99_ms
                        for r in results
                        if (r.games, r.think_ms) == pt and r.scenario == name
                    ),
                    None,
                )  # fmt: skip
                for pt in points
            ]
            if any(y is not None for y in ys):
                ax.plot(range(len(points)), ys, marker="o", label=f"({name}) {label}")
        ax.set_xticks(range(len(points)))
        ax.set_xticklabels([f"{g} games\nthink {t:g} ms" if t else f"{g} games\nsaturated"
                            for g, t in points], fontsize=8)  # fmt: skip
        ax.set_yscale("log")
        ax.set_ylabel("p99 latency, ms")
        ax.set_title("p99 by load (think: mean wait of each game between decisions)")
        ax.legend(fontsize=8)
    save(fig, path)


def medians(results: list[Result]) -> list[Result]:
    """One result per (games, think time, scenario): each number's median over the rounds."""
    out = []
    keys = dict.fromkeys((r.games, r.think_ms, r.scenario) for r in results)
    for games, think_ms, name in keys:
        runs = [r for r in results if (r.games, r.think_ms, r.scenario) == (games, think_ms, name)]
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
                think_ms=think_ms,
                server_cores=statistics.median(r.server_cores for r in runs),
                load_cores=statistics.median(r.load_cores for r in runs),
                stages_us=_median_stages([r.stages_us for r in runs if r.stages_us]),
            )
        )
    return out


def _median_stages(runs: list[dict[str, float]]) -> dict[str, float] | None:
    if not runs:
        return None
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def per_adapter(scenarios: list[Scenario], adapters: list[str] | None) -> list[Scenario]:
    """Each scenario once per adapter (named `<scenario>@<adapter's name>`: a built-in game,
    or the class of `package.module:Adapter`), side by side in each round; as given if no
    adapters."""
    if not adapters:
        return scenarios
    names = [a.rpartition(":")[2] for a in adapters]
    if len(set(names)) != len(names):
        raise ValueError(f"adapters need names of their own, got {names}")
    return [
        dataclasses.replace(sc, name=f"{sc.name}@{n}", label=f"{sc.label}, {n}", adapter=a)
        for sc in scenarios
        if sc.system == "croupier"
        for a, n in zip(adapters, names, strict=True)
    ]


def select(names: list[str] | None) -> list[Scenario]:
    """The scenarios named (the default ones when None: all but `r` and `c-torch`), in the
    bench's order; unknown names refused."""
    if names is None:
        return [sc for sc in SCENARIOS if sc.default]
    known = {sc.name for sc in SCENARIOS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown scenarios {unknown}; known: {sorted(known)}")
    return [sc for sc in SCENARIOS if sc.name in names]


def bench_serve(
    games_list: list[int],
    seconds: float,
    out_dir: Path,
    rounds: int = 3,
    scenarios: list[str] | None = None,
    game: str = GAME,
    think_ms: list[float] | None = None,
    adapters: list[str] | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """Every load point (games x think time) in `rounds` interleaved rounds of the scenarios
    (each once per adapter of `adapters`); writes serve.json/.png (serve-<game>.* for a game
    other than leduc; `name`.* if given)."""
    if shutil.which("wrk") is None:
        raise RuntimeError("wrk is not installed: apt-get install wrk (Debian's package)")
    chosen, skipped = [], {}
    for scenario in per_adapter(select(scenarios), adapters):
        reason = skip_reason(scenario, game)
        if reason is None:
            chosen.append(scenario)
        else:
            skipped[scenario.name] = reason
            print(f"skipping scenario {scenario.name} ({scenario.label}): {reason}", flush=True)
    runs: list[Result] = []
    round_ratios: dict[str, list[dict[str, float]]] = {}
    for games in games_list:
        for think in think_ms or [0.0]:
            for i in range(rounds):
                this_round = []
                for scenario in chosen:
                    this_round.append(run_scenario(scenario, games, seconds, game, think))
                    print(f"round {i + 1}: " + format_table(this_round[-1:]).splitlines()[-1],
                          flush=True)  # fmt: skip
                runs += this_round
                these = ratios(this_round).get(str(games))
                if these:
                    round_ratios.setdefault(str(games), []).append(these)
    results = medians(runs)
    report = {
        "game": game,
        "adapters": adapters or [],
        "load_generator": "wrk -t1 + Lua replaying prepared bodies (keep-alive, 1 in flight "
        "per connection); c2: one wrk thread per server process",
        "pinned": bool(_pinning()[1]),
        "seconds": seconds,
        "rounds": rounds,
        "think_ms": list(think_ms or [0.0]),
        "scenarios": [sc.name for sc in chosen],
        "skipped": skipped,
        "results": [asdict(r) for r in results],
        # Median over rounds of each round's ratio.
        "ratios": {
            games: {k: statistics.median(r[k] for r in per_round) for k in per_round[0]}
            for games, per_round in round_ratios.items()
        },
        # Server CPU µs per decision by stage, medians over rounds (`croupier/stages.py`).
        "stages": stage_table(results),
        "runs": [asdict(r) for r in runs],
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    name = name or ("serve" if game == GAME else f"serve-{game}")
    (out_dir / f"{name}.json").write_text(json.dumps(report, indent=2))
    plot(results, out_dir / f"{name}.png")
    return report
