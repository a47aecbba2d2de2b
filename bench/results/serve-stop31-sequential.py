"""Issue 16: the serving cells before (dd868b8) and after the restructuring, paired.

Each (games, scenario) cell is run by each build's own `bench serve` harness
(`run_scenario`, the same wrk load and pinning), the two builds back to back, the order
flipped every block, so that a pair's two runs are ~15 s apart and the box's drift cancels
in its ratio. One JSON line per run.

    python serve-stop31-sequential.py BLOCKS SECONDS OUT.jsonl
    python serve-stop31-sequential.py report OUT.jsonl   # geometric means and 95% intervals
"""
import json, random, subprocess, sys, time
TREES = {"old": "/work/wt-old", "new": "/work/main"}
PY = "/work/main/.venv/bin/python"
SNIPPET = (
    "import json, dataclasses, sys\n"
    "from croupier.bench.serve import SCENARIOS, run_scenario\n"
    "s = next(s for s in SCENARIOS if s.name == sys.argv[1])\n"
    "r = run_scenario(s, int(sys.argv[2]), float(sys.argv[3]))\n"
    "print('RESULT ' + json.dumps(dataclasses.asdict(r)))\n"
)
def report(path):
    import math, statistics as st
    recs = [json.loads(l) for l in open(path)]
    cells = sorted({(r["games"], r["scenario"]) for r in recs})
    print(f"{'games':>5} {'scen':>8} | pairs | new/old decisions/s: geo-mean [95% CI]  median | cpu/dec new/old geo [95% CI]")
    T = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23, 11: 2.20}
    def ci(xs):
        m = st.mean(xs); n = len(xs)
        h = T[n - 1] * st.stdev(xs) / math.sqrt(n) if n > 1 else float("nan")
        return math.exp(m), math.exp(m - h), math.exp(m + h)
    for g, s in cells:
        by = {}
        for r in recs:
            if (r["games"], r["scenario"]) == (g, s):
                by.setdefault(r["block"], {})[r["build"]] = r
        pairs = [v for v in by.values() if len(v) == 2]
        ld = [math.log(p["new"]["decisions_per_s"] / p["old"]["decisions_per_s"]) for p in pairs]
        lc = [math.log(p["new"]["server_cpu_us_per_decision"] / p["old"]["server_cpu_us_per_decision"]) for p in pairs]
        d, c = ci(ld), ci(lc)
        print(f"{g:>5} {s:>8} | {len(pairs):>5} | {d[0]:.3f} [{d[1]:.3f}, {d[2]:.3f}]  {math.exp(st.median(ld)):.3f} | {c[0]:.3f} [{c[1]:.3f}, {c[2]:.3f}]")


if sys.argv[1] == "report":
    report(sys.argv[2])
    sys.exit()
blocks, seconds, out = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
cells = [(g, s) for g in (100, 1000) for s in ("a", "b", "c", "c-inline", "d")]
rng = random.Random(16)
with open(out, "a") as f:
    for block in range(blocks):
        order = ["old", "new"] if block % 2 == 0 else ["new", "old"]
        rng.shuffle(cells)
        for games, scen in cells:
            for build in order:
                t0 = time.time()
                p = subprocess.run([PY, "-c", SNIPPET, scen, str(games), str(seconds)],
                                   cwd=TREES[build], env={"PYTHONPATH": TREES[build] + "/src", "PATH": "/usr/bin:/bin:/usr/local/bin"},
                                   capture_output=True, text=True, timeout=300)
                line = next((l for l in p.stdout.splitlines() if l.startswith("RESULT ")), None)
                if line is None:
                    print("FAILED", build, games, scen, p.stderr[-2000:], flush=True)
                    continue
                r = json.loads(line[7:])
                load = open("/proc/loadavg").read().split()[0]
                rec = {"block": block, "build": build, "games": games, "scenario": scen, "t": t0,
                       "load": float(load), **{k: r[k] for k in ("decisions_per_s", "p50_ms", "p99_ms", "server_cpu_us_per_decision", "errors")}}
                f.write(json.dumps(rec) + "\n"); f.flush()
                print(block, build, games, scen, f"{r['decisions_per_s']:.0f}/s", f"cpu {r['server_cpu_us_per_decision']:.1f}", f"{time.time()-t0:.1f}s", flush=True)
