"""Issue 16: the builds before (dd868b8) and after the restructuring, served at the same time.

Per (games, scenario) cell: both builds' servers started with the scenario's flags, both
pinned to the same core (cpu0), games opened and request bodies prepared by each build's own
`bench serve` harness; then one wrk per server (the same `decide.lua`, the same connections),
both pinned to the other core, run at once. The two servers share one core through the same
seconds, so the box's drift (±20% between runs minutes apart) falls on both alike; each build's
server CPU per decision (from /proc) and decisions/s are read over the same window.

    python serve-stop31-together.py REPS SECONDS OUT.jsonl   # NEW_TREE: the tree to compare
    python serve-stop31-together.py report OUT.jsonl [...]    # the table in docs/performance.md
(paths as on the machine it ran on: /work/wt-old is `git worktree add /work/wt-old dd868b8`)
"""
import json, os, subprocess, sys, tempfile, time
from pathlib import Path
import httpx

TREES = {"old": "/work/wt-old", "new": os.environ.get("NEW_TREE", "/work/main")}
PY = "/work/main/.venv/bin/python"
LUA = "/work/main/src/croupier/bench/decide.lua"
ARGS = {"a": [], "b": ["--max-batch", "1", "--no-forward-thread"], "c": [],
        "c-inline": ["--no-forward-thread"], "d": []}
ITEMS = {"d": 64}
BODIES = (
    "import sys, json\n"
    "from croupier.bench import serve as s\n"
    "sc = next(x for x in s.SCENARIOS if x.name == sys.argv[1])\n"
    "url, games = sys.argv[2], int(sys.argv[3])\n"
    "try:\n"
    "    lines = s._bodies([url], sc, games)[url]\n"
    "except TypeError:\n"
    "    lines = s._bodies(url, sc, games)\n"
    "open(sys.argv[4], 'w').write('\\n'.join(lines) + '\\n')\n"
)

def cpu_s(pid):
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]

def env_of(build):
    return {"PYTHONPATH": TREES[build] + "/src", "PATH": "/usr/bin:/bin:/usr/local/bin"}

def cell(games, scen, seconds, tmp):
    procs, urls = {}, {}
    try:
        for build in ("old", "new"):
            port = free_port()
            procs[build] = subprocess.Popen(
                ["taskset", "-c", "0", PY, "-m", "croupier", "serve", "--game", "leduc-holdem",
                 "--port", str(port), "--data-dir", "none", *ARGS[scen]],
                cwd=TREES[build], env=env_of(build), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            urls[build] = f"http://127.0.0.1:{port}"
        for build, url in urls.items():
            for _ in range(600):
                try:
                    if httpx.get(url + "/healthz", timeout=2).status_code < 500: break
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
            subprocess.run([PY, "-c", BODIES, scen, url, str(games), f"{tmp}/{build}.tsv"],
                           cwd=TREES[build], env=env_of(build), check=True, capture_output=True)
        conns = max(2, -(-games // ITEMS.get(scen, 1)))
        def wrks(secs, tag):
            return {b: subprocess.Popen(
                ["taskset", "-c", "1", "wrk", "-t1", f"-c{conns}", f"-d{secs:g}s", "--timeout", "10s", "-s", LUA, urls[b]],
                env={**os.environ, "BENCH_BODIES": f"{tmp}/{b}.tsv", "BENCH_OUT": f"{tmp}/{b}-{tag}.json", "BENCH_THINK_MS": "0"},
                stdout=open(f"{tmp}/{b}-{tag}.log", "w"), stderr=subprocess.STDOUT) for b in urls}
        for p in wrks(2, "warm").values(): p.wait()
        c0 = {b: cpu_s(p.pid) for b, p in procs.items()}
        for p in wrks(seconds, "run").values(): p.wait()
        cpu = {b: cpu_s(p.pid) - c0[b] for b, p in procs.items()}
        out = {}
        fb = {}
        for b in urls:
            try:
                text = httpx.get(urls[b] + "/metrics", timeout=10).text
                fb[b] = sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith("croupier_fallbacks"))
            except Exception as e:
                fb[b] = -1
        for b in urls:
            w = json.loads(Path(f"{tmp}/{b}-run.json").read_text())
            dec = w["requests"] * ITEMS.get(scen, 1)
            secs = w["duration_us"] / 1e6
            errs = sum(v for k, v in w.items() if k.startswith("errors_"))
            out[b] = {"decisions_per_s": dec / secs, "cpu_us_per_decision": cpu[b] / max(dec, 1) * 1e6,
                      "server_cores": cpu[b] / secs, "p99_ms": w["p99_us"] / 1000, "errors": errs, "fallbacks": fb[b]}
        return out
    finally:
        for p in procs.values():
            p.terminate()
        for p in procs.values():
            p.wait(timeout=30)

def report(paths):
    import statistics as st
    for path in paths:
        recs = [json.loads(line) for line in open(path)]
        print(path)
        print(f"{'games':>5} {'scenario':>9} | runs | server CPU a decision new/old (each run)      | median | decisions/s new/old median")
        for g in (100, 1000):
            for s in ("a", "b", "c", "c-inline", "d"):
                rs = [r for r in recs if (r["games"], r["scenario"]) == (g, s)]
                if not rs:
                    continue
                cpu = [r["new"]["cpu_us_per_decision"] / r["old"]["cpu_us_per_decision"] for r in rs]
                dps = [r["new"]["decisions_per_s"] / r["old"]["decisions_per_s"] for r in rs]
                print(f"{g:>5} {s:>9} | {len(rs):>4} | {' '.join(f'{c:.3f}' for c in cpu):<44} | {st.median(cpu):.3f}  | {st.median(dps):.3f}")


if __name__ == "__main__" and sys.argv[1] == "report":
    report(sys.argv[2:])
elif __name__ == "__main__":
    reps, seconds, outp = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    cells = [(g, s) for g in (100, 1000) for s in ("a", "b", "c", "c-inline", "d")]
    with open(outp, "a") as f:
        for rep in range(reps):
            for games, scen in cells:
                with tempfile.TemporaryDirectory() as tmp:
                    t0 = time.time()
                    r = cell(games, scen, seconds, tmp)
                rec = {"rep": rep, "games": games, "scenario": scen, "t": t0,
                       "load": float(open("/proc/loadavg").read().split()[0]), **r}
                f.write(json.dumps(rec) + "\n"); f.flush()
                o, n = r["old"], r["new"]
                print(rep, games, scen, f"old {o['decisions_per_s']:.0f}/s {o['cpu_us_per_decision']:.1f}us {o['server_cores']:.2f}c",
                      f"new {n['decisions_per_s']:.0f}/s {n['cpu_us_per_decision']:.1f}us {n['server_cores']:.2f}c",
                      f"cpu new/old {n['cpu_us_per_decision']/o['cpu_us_per_decision']:.3f}", f"err {o['errors']}/{n['errors']}",
                      f"{time.time()-t0:.0f}s", flush=True)
