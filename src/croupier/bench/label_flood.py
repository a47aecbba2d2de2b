"""`croupier bench label-flood`: games with distinct seat tunings against a real server, then
idle; what `/metrics`, `/healthz` and the dashboard's data weigh, and the server's memory.

The security review's probe: 20,000 games with distinct temperatures (`frozen@N:temp=T`,
`production:temp=T`; any engine key can send them, or a studio mapping player rating to a
temperature) made 40,000 decision labels, a 2.7 MB `/metrics`, a 1.3 MB keyless `/healthz`,
and a dashboard history that grew ~0.9 MiB/s to ~800 MiB (its data 98 MiB). Each game here is
created, decided once and ended through the batch routes; then the server idles while its
resident memory is sampled (the dashboard samples every second meanwhile).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from croupier.bench.plotting import pyplot, save, save_report
from croupier.local_server import serving

GAME = "leduc-holdem"
BATCH = 200  # games a batch request
VIEWS = ("/metrics", "/healthz", "/dashboard/data.json")


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmRSS")


def seat_state() -> dict[str, Any]:
    """A real Leduc state, seat 0 to act."""
    from croupier.engine.rlcard_games import RLCardTable
    from croupier.games.simulator import mixed_play_states

    states = mixed_play_states(RLCardTable(GAME), None, hands=20, seed=3, rules_share=0.0)
    return next(s for s in states if s.get("current_player") == 0)


def spec(i: int) -> str:
    temp = f"{1 + (i + 1) / 1e6:.6f}"  # distinct for every game up to 999,999
    return f"frozen@0:temp={temp}" if i % 2 else f"production:temp={temp}"


def sizes(client: httpx.Client) -> dict[str, int]:
    return {path: len(client.get(path).content) for path in VIEWS}


def flood(client: httpx.Client, games: int, state: dict[str, Any]) -> None:
    for start in range(0, games, BATCH):
        n = min(BATCH, games - start)
        create = {"games": [{"game": GAME, "seats": {"0": spec(start + i), "1": "rules"}}
                            for i in range(n)]}  # fmt: skip
        made = client.post("/v1/games:batch", json=create).json()["results"]
        ids = [r["game_id"] for r in made if r["outcome"] == "ok"]
        if len(ids) != n:
            raise RuntimeError(f"games refused: {[r for r in made if r['outcome'] != 'ok'][:2]}")
        items = [{"game_id": g, "seat": "0", "state": state} for g in ids]
        client.post("/v1/decide:batch", json={"items": items}).raise_for_status()
        ends = [{"game_id": g, "payoffs": {"0": 1.0, "1": -1.0}} for g in ids]
        client.post("/v1/end:batch", json={"items": ends}).raise_for_status()


def bench_label_flood(
    games: int, idle_minutes: float, out_dir: Path, sample_every_s: float = 30.0
) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    state = seat_state()
    server = serving(["--game", GAME, "--seats", "learned,rules"])
    with server as (url, proc), httpx.Client(base_url=url, timeout=60.0) as client:
        assert client.post("/v1/policies/promote", json={"version": 0}).status_code == 200
        t0 = time.monotonic()
        memory = [(0.0, rss_mib(proc.pid))]
        before = sizes(client)
        flood(client, games, state)
        flood_s = time.monotonic() - t0
        memory.append((flood_s, rss_mib(proc.pid)))
        after = sizes(client)
        labels = client.get("/healthz").json()["decisions"]
        print(f"{games} games in {flood_s:.0f} s: {len(labels)} labels, {after}", flush=True)
        idle_end = time.monotonic() + idle_minutes * 60.0
        while time.monotonic() < idle_end:
            time.sleep(min(sample_every_s, max(0.0, idle_end - time.monotonic())))
            memory.append((time.monotonic() - t0, rss_mib(proc.pid)))
        idle = sizes(client)
    idle_rss = [m for t, m in memory if t >= flood_s]
    report = {
        "game": GAME,
        "games": games,
        "flood_s": round(flood_s, 1),
        "idle_minutes": idle_minutes,
        "labels": len(labels),
        "label_names": sorted(labels),
        "bytes_before": before,
        "bytes_after_flood": after,
        "bytes_after_idle": idle,
        "rss_mib": [[round(t, 1), round(m, 1)] for t, m in memory],
        "rss_after_flood_mib": round(idle_rss[0], 1),
        "rss_idle_growth_mib": round(max(idle_rss) - idle_rss[0], 1),
        "command": f"croupier bench label-flood --games {games} --idle-minutes {idle_minutes:g}",
    }
    return save_report(report, out_dir / "label-flood.json", plot)


def plot(report: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    t, m = zip(*report["rss_mib"], strict=True)
    ax.plot([x / 60 for x in t], m, marker=".")
    ax.axvline(report["flood_s"] / 60, color="gray", ls="--", lw=0.8)
    ax.set_xlabel("minutes (dashed: the flood's end, then idle)")
    ax.set_ylabel("server RSS (MiB)")
    sizes_kb = {k: round(v / 1024, 1) for k, v in report["bytes_after_idle"].items()}
    ax.set_title(f"{report['games']:,} games, distinct temperatures: {report['labels']} labels; "
                 f"KB after idle {sizes_kb}", fontsize=7)  # fmt: skip
    ax.set_ylim(0, max(m) * 1.2)
    save(fig, path)
