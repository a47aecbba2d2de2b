"""Issue 16: old vs new `bench serve`, pooled over two alternating windows."""
import json, statistics as st
# bench/results/serve-stop22-*.json (ABBA: old1 new1 new2 old2) and serve-stop23-*.json
# (BAAB: new1 old1 old2 new2): old = dd868b8 (before issue 16), new = main.
R = "bench/results/serve-stop"
runs = {"old": [R + "22-old1", R + "22-old2", R + "23-old1", R + "23-old2"],
        "new": [R + "22-new1", R + "22-new2", R + "23-new1", R + "23-new2"]}
def load(p):
    d = json.load(open(p + ".json"))
    return {(x["scenario"], x["games"]): x for x in d["results"]}
data = {b: [load(p) for p in ps] for b, ps in runs.items()}
print("pooled over 8 runs (4 per build, two ABBA windows): median X/a per build, new/old")
for g in (100, 1000):
    for s in ("b", "c", "c-inline", "d"):
        med = {}
        for b in ("old", "new"):
            med[b] = st.median(r[(s, g)]["decisions_per_s"] / r[("a", g)]["decisions_per_s"] for r in data[b])
        cpu = {b: st.median(r[(s, g)]["server_cpu_us_per_decision"] for r in data[b]) for b in data}
        print(f"{s:>9}/a {g:5d}: old {med['old']:.3f} new {med['new']:.3f} new/old {med['new']/med['old']:.3f}"
              f" | CPU us/decision median old {cpu['old']:.1f} new {cpu['new']:.1f} ({cpu['new']/cpu['old']:.3f})")
    cpu = {b: st.median(r[("a", g)]["server_cpu_us_per_decision"] for r in data[b]) for b in data}
    print(f"        a {g:5d}: CPU us/decision median old {cpu['old']:.1f} new {cpu['new']:.1f} ({cpu['new']/cpu['old']:.3f})")
