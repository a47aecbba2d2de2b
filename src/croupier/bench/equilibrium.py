"""`croupier bench equilibrium`: CFR+ on a small game's whole tree (`games/cfr.py`): how fast
it reaches an equilibrium of the full game, and, per observation (an adapter of the game),
the least exploitable policy CFR+ finds when a policy sees only that observation, one
strategy for every seat, as croupier serves one: the ceiling an observation puts on any
policy trained on it.

Full game: alternating CFR+ over the game's information labels, split by seat (see `CFRPlus`),
its average strategy's exploitability every `check_every` iterations. An observation: CFR+
over the adapter's (observation, legal mask) keys, run twice, with one strategy for both
seats (`shared`) and split by seat, merged into one (`by_seat`); the average and the current
strategy, as one policy in both seats, are checked every `ceiling_check_every` iterations.
Without perfect recall CFR+ has no guarantee, so the best checkpoint of either run is
reported: an upper bound on how unexploitable the observation lets a policy be (on Leduc's
36 floats `shared` found 0.168, `by_seat` 0.186; on the history, 1.5e-3 and 2.3e-5, 2,000
iterations each). Times are CPU-bound numpy on one core: on a shared machine they vary with
its load.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from croupier.arena.exploitability import payoff_against
from croupier.bench.plotting import pyplot, save
from croupier.games.cfr import partition_by_information, partition_by_observation, solve
from croupier.games.registry import load_adapter
from croupier.games.tree import game_tree
from croupier.policies.distribution import load_policy


def bench_equilibrium(
    game: str,
    iterations: int,
    check_every: int,
    observations: list[str],
    ceiling_iterations: int,
    ceiling_check_every: int,
    out_dir: Path,
    table: Path | None = None,
) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    tree = game_tree(game)
    build_s = time.monotonic() - t0
    report: dict[str, Any] = {
        "game": tree.name,
        "tree": {
            "deals": len(tree.deals),
            "nodes": tree.num_nodes,
            "states": len(tree.states),
            "build_seconds": round(build_s, 2),
        },  # fmt: skip
    }
    keys = partition_by_information(tree)
    print(f"{tree.name}: {tree.num_nodes:,} nodes; CFR+ on the full game...", flush=True)
    cfr, curve = solve(tree, keys, iterations, check_every, report=_progress("full game"))
    strategy = cfr.average_by_key()
    full: dict[str, Any] = {
        "information_sets": len(cfr.keys),
        "iterations": iterations,
        "seconds": curve[-1]["seconds"],
        "exploitability": curve[-1]["exploitability"],
        "curve": curve,
    }
    try:
        rules = tree.slot_probs(load_policy("rules", game)[0])
        full["vs_rules"] = payoff_against(tree, cfr.slot_probs(strategy), rules)
    except ValueError:  # a game without rules
        pass
    report["full_game"] = full
    if table is not None:
        table.parent.mkdir(parents=True, exist_ok=True)
        table.write_text(json.dumps({
            "game": tree.name, "iterations": iterations,
            "exploitability": full["exploitability"], "strategy": cfr.table(strategy),
        }, indent=1))  # fmt: skip
        report["table"] = str(table)
    report["observations"] = {}
    for name in observations:
        adapter = load_adapter(name)
        keys = partition_by_observation(tree, adapter)
        print(f"CFR+ restricted to {name} ({adapter.obs_size} floats)...", flush=True)
        runs = {}
        for mode, by_seat in (("shared", False), ("by_seat", True)):
            _, curve = solve(tree, keys, ceiling_iterations, ceiling_check_every, by_seat)
            best = min(curve, key=lambda p: min(p["exploitability"], p["exploitability_current"]))
            runs[mode] = {
                "best": min(best["exploitability"], best["exploitability_current"]),
                "best_at": best["iterations"],
                "final": curve[-1]["exploitability"],
                "curve": curve,
            }
            print(f"  {mode}: best {runs[mode]['best']:.6f}", flush=True)
        best_mode = min(runs, key=lambda m: runs[m]["best"])
        report["observations"][name] = {
            "obs_size": adapter.obs_size,
            "information_sets": len(set(keys)),
            "best": runs[best_mode]["best"],
            "best_mode": best_mode,
            **runs,
        }
    stem = f"equilibrium-{tree.name}"
    (out_dir / f"{stem}.json").write_text(json.dumps(report, indent=2, default=float))
    plot(report, out_dir / f"{stem}.png")
    report["saved"] = str(out_dir / f"{stem}.json")
    return report


def _progress(label: str) -> Any:
    def report(point: dict[str, Any]) -> None:
        print(f"  {label}: {point['iterations']} iterations, {point['seconds']:.1f} s, "
              f"exploitability {point['exploitability']:.6f}", flush=True)  # fmt: skip

    return report


def plot(report: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    full = report["full_game"]["curve"]
    sets = report["full_game"]["information_sets"]
    ax.plot([p["iterations"] for p in full], [p["exploitability"] for p in full],
            label=f"full game ({sets} information sets)")  # fmt: skip
    for i, (name, obs) in enumerate(report["observations"].items(), start=1):
        curve = obs[obs["best_mode"]]["curve"]
        label = f"{name} ({obs['information_sets']} keys), best {obs['best']:.3g}"
        label += f" ({obs['best_mode'].replace('_', ' ')})"
        ax.plot([p["iterations"] for p in curve],
                [min(p["exploitability"], p["exploitability_current"]) for p in curve],
                c=f"C{i}", label=label)  # fmt: skip
    ax.set_yscale("log")
    ax.set_xlabel("CFR+ iterations")
    ax.set_ylabel("exploitability (a hand)")
    ax.set_title(f"bench equilibrium: {report['game']}")
    ax.legend(fontsize=8)
    save(fig, path)


def format_report(report: dict[str, Any]) -> str:
    full = report["full_game"]
    lines = [
        f"{report['game']}: {report['tree']['nodes']:,} nodes over {report['tree']['deals']} "
        f"deals (built in {report['tree']['build_seconds']} s)",
        f"full game: {full['information_sets']} information sets, {full['iterations']} "
        f"iterations in {full['seconds']:.1f} s: exploitability {full['exploitability']:.2e}"
        + (f", vs the rules {full['vs_rules']:+.4f} a hand" if "vs_rules" in full else ""),
    ]
    for name, obs in report["observations"].items():
        runs = ", ".join(
            f"{mode.replace('_', ' ')} {obs[mode]['best']:.4g} (iteration {obs[mode]['best_at']})"
            for mode in ("shared", "by_seat")
        )
        lines.append(
            f"{name} ({obs['obs_size']} floats, {obs['information_sets']} keys): best "
            f"{obs['best']:.4g}; {runs}"
        )
    if "table" in report:
        lines.append(f"equilibrium table: {report['table']} (--a table:{report['table']})")
    lines.append(f"saved: {report['saved']} (and .png)")
    return "\n".join(lines)
