"""`croupier bench cluster`: the same external run on one Ray node and on a two-node cluster.

Both runs: two policy servers, the reference engine's tables routed over them by game id, the
same game, algorithm, hyperparameters and wall-clock budget, one after the other (on a 2-core
machine, side by side at once would measure only their fight for the cores).

- single node: `croupier train` with its own local Ray, learning in the driver and both
  servers on the driver's link (the default setup);
- two nodes: a head and a worker started with `ray start` (`croupier.local_cluster`), the
  trainer attached with `--ray-address`, `--num-learners 2`, and `--num-env-runners 2` placed
  one per node by a custom resource each node has one unit of; server i on runner i's port;
  each learner takes half the train batch (RLlib's batch is per learner), so one update sees
  as many steps as the single node's.

Reported: env steps/s trained (steps handed to the learner ÷ wall-clock), the final version's
payoff against the rules (the same in-process yardstick as `bench train`), where Ray put the
runners, and each server's last version.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from croupier.bench.evaluate import payoff_vs
from croupier.bench.plotting import pyplot, save
from croupier.demo import ExternalRun, run_external
from croupier.local_cluster import LocalRayCluster, NodeSpec
from croupier.policies.learned import read_weights_dir

RUNNER_RESOURCE = "croupier_runner"


def _train_batch(game: str, algo: str) -> int:
    """The train batch `croupier train` uses for `game` and `algo` (its preset's, if any)."""
    from croupier.games.presets import preset_for
    from croupier.trainer.algo import Hyper

    preset = preset_for(game)
    if preset is not None and preset.algo == algo:
        return preset.train_batch_size
    return Hyper.defaults(algo).train_batch_size


def _summary(run_dir: Path, external: dict[str, Any], minutes: float, hands: int) -> dict:
    last = external["trainer_last"] or {}
    steps = int(last.get("env_steps", 0))
    version, spec, weights = read_weights_dir(run_dir / "weights")
    return {
        "env_steps": steps,
        "env_steps_per_s": steps / (minutes * 60),
        "iterations": last.get("iteration"),
        "final_version": version,
        "server_versions": external.get("server_versions"),
        "vs_rules": payoff_vs(external["game"], spec, weights, hands, seed=1),
        "decisions_per_s": external["training_engine"]["decisions_per_s"],
        "runners": last.get("runners"),
        "curve": external["curve"],
    }


def bench_cluster(
    game: str,
    algo: str,
    minutes: float,
    out_dir: Path,
    eval_hands: int = 10_000,
    tables: int = 128,
) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")

    def external(name: str, **kw: Any) -> ExternalRun:
        return ExternalRun(game=game, minutes=minutes, algo=algo, tables=tables,
                           eval_hands=1000, run_dir=out_dir / f"cluster-{name}-{stamp}",
                           quiet=True, servers=2, wait_for_trainer=True, **kw)  # fmt: skip

    print(f"single node: {minutes:g} min ({algo}), 2 servers on the driver's link...", flush=True)
    one = external("single")
    single = _summary(one.run_dir, run_external(one), minutes, eval_hands)
    print("two nodes: starting the cluster (ray start: head + worker)...", flush=True)
    two = external(
        "two-node",
        link_port_offsets=[1, 2],
        train_args=["--num-learners", "2", "--num-env-runners", "2",
                    "--env-runner-resources", json.dumps({RUNNER_RESOURCE: 1}),
                    # RLlib's batch is per learner: half each, the same update as one learner.
                    "--train-batch-size", str(_train_batch(game, algo) // 2)],
    )  # fmt: skip
    two.run_dir.mkdir(parents=True, exist_ok=True)
    # Logical CPUs per node: a runner and a learner each (the nodes share this machine's cores).
    specs = [NodeSpec(2, {RUNNER_RESOURCE: 1, "head_node": 1}),
             NodeSpec(2, {RUNNER_RESOURCE: 1, "worker_node": 1})]  # fmt: skip
    cluster = LocalRayCluster(specs, work_dir=two.run_dir)
    try:
        cluster.start()
        nodes = {n["NodeID"]: ("head" if "head_node" in n["Resources"] else "worker")
                 for n in cluster.list_nodes() if n["Alive"]}  # fmt: skip
        two.train_args += ["--ray-address", cluster.address]
        two.trainer_env = cluster.env({})
        print(f"two nodes: {minutes:g} min ({algo}), 2 learners, a runner per node...", flush=True)
        cluster_run = run_external(two)
    finally:
        # Processes of the cluster still alive after Ray's own shutdown (killed then).
        survivors = cluster.stop()
    two_nodes = _summary(two.run_dir, cluster_run, minutes, eval_hands)
    for r in two_nodes["runners"] or []:
        r["node"] = nodes.get(r["node_id"])
    report = {
        "game": game,
        "algo": algo,
        "minutes": minutes,
        "tables": tables,
        "single_node": single,
        "two_nodes": {**two_nodes, "nodes": nodes, "processes_left_after_stop": survivors},
        "throughput_ratio": two_nodes["env_steps_per_s"] / max(single["env_steps_per_s"], 1e-9),
    }
    (out_dir / "cluster.json").write_text(json.dumps(report, indent=2, default=float))
    plot(report, out_dir / "cluster.png")
    return report


def plot(report: dict[str, Any], path: Path) -> None:
    plt = pyplot()

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.5))
    for key, label, color in (("single_node", "single node", "C0"),
                              ("two_nodes", "two nodes, 2 learners", "C1")):  # fmt: skip
        r = report[key]
        points = [p for p in r["curve"] if p["payoff"] is not None]
        ax.plot([p["seconds"] / 60 for p in points], [p["payoff"] for p in points],
                label=label, c=color)  # fmt: skip
        ev = r["vs_rules"]
        ax.errorbar([report["minutes"]], [ev["mean"]], yerr=[ev["ci95"]], fmt="o", c=color)
        bx.bar(label, r["env_steps_per_s"], color=color)
    ax.set_xlabel("minutes")
    ax.set_ylabel("payoff per hand vs rules (training; dot: final version)")
    ax.axhline(0, c="black", lw=0.5)
    ax.legend()
    bx.set_ylabel("env steps/s trained")
    fig.suptitle(
        f"bench cluster: {report['game']} ({report['algo']}), {report['minutes']:g} min each, "
        f"throughput ratio {report['throughput_ratio']:.2f}"
    )
    save(fig, path)


def format_report(report: dict[str, Any]) -> str:
    rows = []
    for key in ("single_node", "two_nodes"):
        r = report[key]
        ev = r["vs_rules"]
        rows.append(
            f"{key:<12} {r['env_steps']:>10,} steps  {r['env_steps_per_s']:>8,.0f} steps/s  "
            f"version {r['final_version']:>5}  vs rules {ev['mean']:+.3f} ± {ev['ci95']:.3f} "
            f"({ev['n']} hands)"
        )
    for r in report["two_nodes"]["runners"] or []:
        rows.append(f"  runner {r['worker_index']} on the {r['node']} node "
                    f"({r['node_id'][:8]}): {r['episodes_received']:,} episodes")  # fmt: skip
    rows.append(f"throughput ratio two nodes/single node: {report['throughput_ratio']:.2f}")
    return "\n".join(rows)
