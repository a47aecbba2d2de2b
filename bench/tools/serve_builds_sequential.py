"""Serving cost of two builds of croupier, measured one after the other in pairs.

Each (games, scenario) cell is run by each build's own `bench serve` harness (`run_scenario`:
the same wrk load and pinning as `croupier bench serve`), the two builds back to back (~15 s
apart), the order flipped every block and the cells shuffled, so that the box's slow drift
falls on both builds of a pair alike. `report` gives, per cell, the geometric mean of the
pairs' new/old ratios with a 95% interval (Student's t over the pairs' log ratios).

What it showed (docs/performance.md, "Comparing two builds"): six blocks left 95% intervals
15-45 points wide, because the box's speed moves more than 5% between runs seconds apart. It
finds a large difference (decide:batch at 1,000 games: 0.784 [0.679, 0.905] decisions/s); to
resolve a few percent, use `serve_builds_together.py`, which serves both builds at once.

Usage (from a croupier checkout; needs wrk and taskset):

    git worktree add ../croupier-old dd868b8       # or any two checkouts of croupier
    python bench/tools/serve_builds_sequential.py run --old ../croupier-old --new . \\
        --blocks 6 --seconds 8 --out sequential.jsonl
    python bench/tools/serve_builds_sequential.py report sequential.jsonl

`run` appends one JSON line per build and cell (decisions/s, p50, p99, server CPU a decision,
errors). Each build runs from its tree's `src` with the interpreter running this script.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

SCENARIOS = ("a", "b", "c", "c-inline", "d")
SNIPPET = (
    "import json, dataclasses, sys\n"
    "from croupier.bench.serve import SCENARIOS, run_scenario\n"
    "s = next(s for s in SCENARIOS if s.name == sys.argv[1])\n"
    "r = run_scenario(s, int(sys.argv[2]), float(sys.argv[3]))\n"
    "print('RESULT ' + json.dumps(dataclasses.asdict(r)))\n"
)
FIELDS = ("decisions_per_s", "p50_ms", "p99_ms", "server_cpu_us_per_decision", "errors")
# Student's t, two-sided 95%, by degrees of freedom.
T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26,
       10: 2.23, 11: 2.20, 12: 2.18, 13: 2.16, 14: 2.14, 15: 2.13, 20: 2.09, 30: 2.04}  # fmt: skip


def _t95(df: int) -> float:
    return T95.get(df) or T95[max(k for k in T95 if k <= df)]


def run(args: argparse.Namespace) -> None:
    trees = {"old": Path(args.old).resolve(), "new": Path(args.new).resolve()}
    scenarios = args.scenarios.split(",")
    unknown = set(scenarios) - set(SCENARIOS)
    if unknown:
        raise SystemExit(f"unknown scenarios {sorted(unknown)}; choose from {SCENARIOS}")
    cells = [(int(g), s) for g in args.games.split(",") for s in scenarios]
    rng = random.Random(16)
    with open(args.out, "a") as f:
        for block in range(args.blocks):
            order = ["old", "new"] if block % 2 == 0 else ["new", "old"]
            rng.shuffle(cells)
            for games, scen in cells:
                for build in order:
                    t0 = time.time()
                    tree = trees[build]
                    p = subprocess.run(
                        [sys.executable, "-c", SNIPPET, scen, str(games), str(args.seconds)],
                        cwd=tree, capture_output=True, text=True, timeout=300,
                        env={"PYTHONPATH": str(tree / "src"),
                             "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                    )  # fmt: skip
                    line = next(
                        (ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None
                    )
                    if line is None:
                        print("FAILED", build, games, scen, p.stderr[-2000:], flush=True)
                        continue
                    r = json.loads(line.removeprefix("RESULT "))
                    load = float(Path("/proc/loadavg").read_text().split()[0])
                    rec = {"block": block, "build": build, "games": games, "scenario": scen,
                           "t": t0, "load": load, **{k: r[k] for k in FIELDS}}  # fmt: skip
                    f.write(json.dumps(rec) + "\n")
                    f.flush()
                    print(block, build, games, scen, f"{r['decisions_per_s']:.0f}/s",
                          f"cpu {r['server_cpu_us_per_decision']:.1f} us",
                          f"{time.time() - t0:.1f} s", flush=True)  # fmt: skip


def _geo_ci(log_ratios: list[float]) -> tuple[float, float, float]:
    """Geometric mean of the ratios and its 95% interval."""
    m, n = statistics.mean(log_ratios), len(log_ratios)
    if n < 2:
        return math.exp(m), float("nan"), float("nan")
    h = _t95(n - 1) * statistics.stdev(log_ratios) / math.sqrt(n)
    return math.exp(m), math.exp(m - h), math.exp(m + h)


def report(path: str) -> None:
    recs = [json.loads(line) for line in Path(path).read_text().splitlines() if line]
    print(f"{'games':>5} {'scen':>8} | pairs | new/old decisions/s: geo-mean [95% CI]  median"
          " | CPU a decision new/old: geo-mean [95% CI]")  # fmt: skip
    for g, s in sorted({(r["games"], r["scenario"]) for r in recs}):
        by_block: dict[int, dict[str, dict]] = {}
        for r in recs:
            if (r["games"], r["scenario"]) == (g, s):
                by_block.setdefault(r["block"], {})[r["build"]] = r
        pairs = [v for v in by_block.values() if len(v) == 2]
        if not pairs:
            continue
        ld = [math.log(p["new"]["decisions_per_s"] / p["old"]["decisions_per_s"]) for p in pairs]
        lc = [
            math.log(
                p["new"]["server_cpu_us_per_decision"] / p["old"]["server_cpu_us_per_decision"]
            )
            for p in pairs
        ]
        d, c = _geo_ci(ld), _geo_ci(lc)
        median = math.exp(statistics.median(ld))
        print(f"{g:>5} {s:>8} | {len(pairs):>5} | {d[0]:.3f} [{d[1]:.3f}, {d[2]:.3f}]"
              f"  {median:.3f} | {c[0]:.3f} [{c[1]:.3f}, {c[2]:.3f}]")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="measure both builds in pairs, block by block; appends")
    r.add_argument("--old", required=True, help="checkout of the build to compare against")
    r.add_argument("--new", required=True, help="checkout of the build under test")
    r.add_argument("--blocks", type=int, default=6, help="blocks of pairs (order flips each)")
    r.add_argument("--seconds", type=float, default=8.0, help="measured seconds per run")
    r.add_argument("--games", default="100,1000", help="concurrent games, comma separated")
    r.add_argument("--scenarios", default=",".join(SCENARIOS), help="of a,b,c,c-inline,d")
    r.add_argument("--out", required=True, help="JSON lines file (appended)")
    p = sub.add_parser("report", help="geometric means and 95% intervals of one file")
    p.add_argument("file")
    args = parser.parse_args()
    if args.command == "report":
        report(args.file)
    else:
        run(args)


if __name__ == "__main__":
    main()
