"""Serving cost of two builds of croupier, both served at the same time on the same core.

Why: this box's speed drifts by ±20% between runs minutes apart, so two builds measured one
after the other cannot be told apart at 5% (paired sequential runs,
`serve_builds_sequential.py`, gave 95% intervals 15-45 points wide). Here, per (games,
scenario) cell, both builds' servers run at once, pinned to the same core (cpu0), each with its
own wrk on the other core (cpu1: the same `decide.lua`, the same number of connections), so
both see the same seconds of the same core; each build's server CPU per decision comes from
its own /proc/<pid>/stat over the same window. Three such runs of one cell agreed within a few
points (docs/performance.md, "Comparing two builds").

Usage (from a croupier checkout; needs wrk, taskset and two cores):

    git worktree add ../croupier-old dd868b8       # or any two checkouts of croupier
    python bench/tools/serve_builds_together.py run --old ../croupier-old --new . \\
        --reps 3 --seconds 8 --out together.jsonl
    python bench/tools/serve_builds_together.py report together.jsonl [more.jsonl ...]

`--game G` serves another game of the reference engine (seat 0 deciding, as `bench serve`),
`--think-ms T` has each game think T ms (mean, exponential) between its decisions.

`run` appends one JSON line per cell and repetition (both builds' decisions/s, server CPU a
decision, the server's cores, p99, errors, fallbacks); `report` prints, per cell, each run's
server CPU a decision new/old and the medians. Each server runs from its tree's `src` with the
interpreter running this script (its environment must hold both builds' dependencies); the
request bodies are prepared by each build's own `bench serve` harness.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

SCENARIOS = ("a", "b", "c", "c-inline", "d")
# `croupier serve` flags per scenario, as `croupier bench serve` sets them.
SERVE_ARGS = {
    "a": [],
    "b": ["--max-batch", "1", "--no-forward-thread"],
    "c": [],
    "c-inline": ["--no-forward-thread"],
    "d": [],
}
ITEMS = {"d": 64}  # decisions per request
# Request bodies from a build's own harness (the private helper's signature changed once).
BODIES = (
    "import sys\n"
    "from croupier.bench import serve as s\n"
    "sc = next(x for x in s.SCENARIOS if x.name == sys.argv[1])\n"
    "url, games, game = sys.argv[2], int(sys.argv[3]), sys.argv[5]\n"
    "try:\n"
    "    lines = s._bodies([url], sc, games, game)[url]\n"
    "except TypeError:\n"
    "    lines = s._bodies(url, sc, games)\n"
    "open(sys.argv[4], 'w').write('\\n'.join(lines) + '\\n')\n"
)


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_of(tree: Path) -> dict[str, str]:
    return {"PYTHONPATH": str(tree / "src"), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def wait_healthy(url: str, timeout_s: float = 240.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up in {timeout_s:.0f} s")


def fallbacks(url: str) -> float:
    try:
        text = httpx.get(url + "/metrics", timeout=10).text
    except httpx.HTTPError:
        return -1.0
    return sum(
        float(ln.split()[-1]) for ln in text.splitlines() if ln.startswith("croupier_fallbacks")
    )


def cell(
    trees: dict[str, Path],
    games: int,
    scen: str,
    seconds: float,
    tmp: str,
    game: str = "leduc-holdem",
    think_ms: float = 0.0,
) -> dict:
    """One (games, scenario) cell, both builds at once: {build: figures}."""
    lua = trees["new"] / "src/croupier/bench/decide.lua"
    procs: dict[str, subprocess.Popen] = {}
    urls: dict[str, str] = {}
    try:
        for build, tree in trees.items():
            port = free_port()
            procs[build] = subprocess.Popen(
                ["taskset", "-c", "0", sys.executable, "-m", "croupier", "serve",
                 "--game", game, "--port", str(port), "--data-dir", "none",
                 *SERVE_ARGS[scen]],
                cwd=tree, env=env_of(tree), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            urls[build] = f"http://127.0.0.1:{port}"
        for build, url in urls.items():
            wait_healthy(url)
            subprocess.run(
                [sys.executable, "-c", BODIES, scen, url, str(games), f"{tmp}/{build}.tsv",
                 game],
                cwd=trees[build], env=env_of(trees[build]), check=True, capture_output=True,
            )  # fmt: skip
        conns = max(2, -(-games // ITEMS.get(scen, 1)))

        def wrks(secs: float, tag: str) -> list[subprocess.Popen]:
            return [
                subprocess.Popen(
                    [
                        "taskset",
                        "-c",
                        "1",
                        "wrk",
                        "-t1",
                        f"-c{conns}",
                        f"-d{secs:g}s",
                        "--timeout",
                        "10s",
                        "-s",
                        str(lua),
                        urls[b],
                    ],
                    env={
                        **os.environ,
                        "BENCH_BODIES": f"{tmp}/{b}.tsv",
                        "BENCH_OUT": f"{tmp}/{b}-{tag}.json",
                        "BENCH_THINK_MS": f"{think_ms:g}",
                    },
                    stdout=open(f"{tmp}/{b}-{tag}.log", "w"),
                    stderr=subprocess.STDOUT,
                )  # fmt: skip
                for b in urls
            ]

        for p in wrks(2, "warm"):
            p.wait(timeout=60)
        start = {b: cpu_s(p.pid) for b, p in procs.items()}
        for p in wrks(seconds, "run"):
            p.wait(timeout=seconds + 60)
        cpu = {b: cpu_s(p.pid) - start[b] for b, p in procs.items()}
        out = {}
        for b, url in urls.items():
            w = json.loads(Path(f"{tmp}/{b}-run.json").read_text())
            decisions = w["requests"] * ITEMS.get(scen, 1)
            secs = w["duration_us"] / 1e6
            out[b] = {
                "decisions_per_s": decisions / secs,
                "cpu_us_per_decision": cpu[b] / max(decisions, 1) * 1e6,
                "server_cores": cpu[b] / secs,
                "p99_ms": w["p99_us"] / 1000,
                "errors": sum(v for k, v in w.items() if k.startswith("errors_")),
                "fallbacks": fallbacks(url),
            }
        return out
    finally:
        for p in procs.values():
            p.terminate()
        for p in procs.values():
            p.wait(timeout=30)


def run(args: argparse.Namespace) -> None:
    trees = {"old": Path(args.old).resolve(), "new": Path(args.new).resolve()}
    games_list = [int(g) for g in args.games.split(",")]
    scenarios = args.scenarios.split(",")
    unknown = set(scenarios) - set(SCENARIOS)
    if unknown:
        raise SystemExit(f"unknown scenarios {sorted(unknown)}; choose from {SCENARIOS}")
    cells = [(g, s) for g in games_list for s in scenarios]
    with open(args.out, "a") as f:
        for rep in range(args.reps):
            for games, scen in cells:
                with tempfile.TemporaryDirectory() as tmp:
                    t0 = time.time()
                    r = cell(trees, games, scen, args.seconds, tmp, args.game, args.think_ms)
                load = float(Path("/proc/loadavg").read_text().split()[0])
                rec = {"rep": rep, "games": games, "scenario": scen, "t": t0, "load": load,
                       "game": args.game, "think_ms": args.think_ms, **r}  # fmt: skip
                f.write(json.dumps(rec) + "\n")
                f.flush()
                o, n = r["old"], r["new"]
                print(
                    rep, games, scen,
                    f"old {o['decisions_per_s']:.0f}/s {o['cpu_us_per_decision']:.1f} us",
                    f"new {n['decisions_per_s']:.0f}/s {n['cpu_us_per_decision']:.1f} us",
                    f"cpu new/old {n['cpu_us_per_decision'] / o['cpu_us_per_decision']:.3f}",
                    f"errors {o['errors']}/{n['errors']}", f"{time.time() - t0:.0f} s",
                    flush=True,
                )  # fmt: skip


def report(paths: list[str]) -> None:
    for path in paths:
        recs = [json.loads(line) for line in Path(path).read_text().splitlines() if line]
        print(path)
        print(f"{'games':>5} {'scenario':>9} | runs | server CPU a decision new/old (each run)"
              f"      | median | decisions/s new/old median")  # fmt: skip
        for g in sorted({r["games"] for r in recs}):
            for s in SCENARIOS:
                rs = [r for r in recs if (r["games"], r["scenario"]) == (g, s)]
                if not rs:
                    continue
                cpu = [
                    r["new"]["cpu_us_per_decision"] / r["old"]["cpu_us_per_decision"] for r in rs
                ]
                dps = [r["new"]["decisions_per_s"] / r["old"]["decisions_per_s"] for r in rs]
                each = " ".join(f"{c:.3f}" for c in cpu)
                print(f"{g:>5} {s:>9} | {len(rs):>4} | {each:<44} | {statistics.median(cpu):.3f}"
                      f"  | {statistics.median(dps):.3f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="measure both builds, cell by cell; appends to --out")
    r.add_argument("--old", required=True, help="checkout of the build to compare against")
    r.add_argument("--new", required=True, help="checkout of the build under test")
    r.add_argument("--reps", type=int, default=3, help="repetitions of every cell")
    r.add_argument("--seconds", type=float, default=8.0, help="measured seconds per cell")
    r.add_argument("--games", default="100,1000", help="concurrent games, comma separated")
    r.add_argument("--scenarios", default=",".join(SCENARIOS), help="of a,b,c,c-inline,d")
    r.add_argument("--game", default="leduc-holdem", help="a game of the reference engine")
    r.add_argument("--think-ms", type=float, default=0.0, help="each game's mean think time")
    r.add_argument("--out", required=True, help="JSON lines file (appended)")
    p = sub.add_parser("report", help="the new/old table of one or more files")
    p.add_argument("files", nargs="+")
    args = parser.parse_args()
    if args.command == "report":
        report(args.files)
    else:
        run(args)


if __name__ == "__main__":
    main()
