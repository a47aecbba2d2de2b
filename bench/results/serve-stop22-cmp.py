import json, sys
runs = ["old1", "new1", "new2", "old2"]
data = {}
for r in runs:
    d = json.load(open(f"/tmp/abba/{r}/serve.json"))
    data[r] = {(x["scenario"], x["games"]): x for x in d["results"]}
keys = sorted(data["old1"], key=lambda k: (k[1], k[0]))
print(f"{'scenario':>9} {'games':>5} | decisions/s old1 new1 new2 old2 | new/old | CPU us/decision old1 new1 new2 old2 | new/old")
for k in keys:
    if not all(k in data[r] for r in runs):
        continue
    dps = [data[r][k]["decisions_per_s"] for r in runs]
    cpu = [data[r][k]["server_cpu_us_per_decision"] for r in runs]
    rd = (dps[1] + dps[2]) / (dps[0] + dps[3])
    rc = (cpu[1] + cpu[2]) / (cpu[0] + cpu[3])
    print(f"{k[0]:>9} {k[1]:>5} | " + " ".join(f"{v:7.0f}" for v in dps) + f" | {rd:5.3f} | " + " ".join(f"{v:6.1f}" for v in cpu) + f" | {rc:5.3f}")
# ratios within each run (X/a), old vs new
print("\nwithin-run ratios X/a (the bench's own):")
for k in keys:
    if k[0] == "a" or not all(k in data[r] for r in runs):
        continue
    rat = [data[r][k]["decisions_per_s"] / data[r][("a", k[1])]["decisions_per_s"] for r in runs]
    print(f"{k[0]:>9}/a {k[1]:>5}: " + " ".join(f"{v:.3f}" for v in rat) + f"  new/old {(rat[1]+rat[2])/(rat[0]+rat[3]):.3f}")
