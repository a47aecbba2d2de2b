"""`croupier bench league`: league training against rules-only training, through the external
path, side by side: exploitability and payoff against the rules over time, exactly.

Each mode is one run of the whole external path (`croupier train` + `croupier serve --trainer`
+ the reference engine, as `make demo` runs it, from the rules' clone), for the same minutes,
one after the other; only the training games' opponents differ:
- `rules`: the learned seat against the rules (what croupier did so far: it learns to exploit
  the population it sees);
- `fsp`: the learned seat against a `league` seat drawn uniformly from every version the
  server keeps (`--league-sampling fsp`: the newest ones and one per `league_every` version
  numbers since the start): fictitious play over the run's own history;
- `fsp-rules`: the same, a `rules_share` of the league seats played by the rules instead;
- `self`: both seats the learner itself (plain self-play: the league of one, its newest
  version), both recorded;
- `br`: `fsp`, with a `best_response_share` of the league seats played by the exact best
  response to the newest version (`--league-best-response-share`, `policies/best_response.py`):
  policy gradient against the best response to oneself is exploitability descent, so the
  version served, not only the league's average, should get less exploitable;
- `br-rules`: `br` with a `rules_share` of the league seats the rules (the best response's and
  the rules' shares together at most 1; the rest past versions).

The version a server serves is copied every `every_s` seconds (`bench/curve.py` `Snapshots`);
after training each copy is measured on the game's whole tree (`arena/exploitability.py`,
sampled as served): its exploitability, its payoff per hand against the rules and against
CFR+'s equilibrium, and how often it folds where checking is free (overall and in its worst
information set). Exact numbers: no sampling noise between the modes' curves.

Leduc only (the measures walk the whole tree); the observation is the adapter `game` names
(the betting history by default: RLCard's 36 floats cap how unexploitable any policy can be
at ~0.17 a hand, docs/robustness.md).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from croupier.bench.curve import Snapshots
from croupier.bench.plotting import pyplot, save, save_report

HISTORY = "croupier.games.leduc:LeducHistoryAdapter"
# `--game leduc`: Leduc through the betting-history observation.
ALIASES = {"leduc": HISTORY}
MODES = ("rules", "fsp", "fsp-rules", "self", "br", "br-rules")


def mode_setting(
    mode: str, league_every: int, rules_share: float, best_response_share: float = 0.5
) -> dict[str, Any]:
    """The engine's seats and the server's flags for a mode (see the module doc). Every mode
    keeps the league's history on disk too (`--weights-keep-every`): the population a
    `league` seat draws from, measured after the run."""
    history = ["--weights-keep-every", str(league_every)]
    league = [*history, "--league-sampling", "fsp", "--league-every", str(league_every)]
    if mode == "rules":
        return {"seats": ["learned", "rules"], "server_args": history}
    if mode == "self":
        return {"seats": ["learned", "learned"], "server_args": history}
    if mode == "fsp":
        return {"seats": ["learned", "league"], "server_args": league}
    if mode in ("br", "br-rules"):
        rules = ["--league-rules-share", str(rules_share)] if mode == "br-rules" else []
        return {"seats": ["learned", "league"],
                "server_args": [*league, *rules, "--league-best-response-share",
                                str(best_response_share)]}  # fmt: skip
    if mode == "fsp-rules":
        return {"seats": ["learned", "league"],
                "server_args": [*league, "--league-rules-share", str(rules_share)]}  # fmt: skip
    raise ValueError(f"unknown mode {mode!r}; one of {list(MODES)}")


@dataclass
class LeagueBench:
    game: str = HISTORY
    minutes: float = 5.0
    modes: tuple[str, ...] = ("rules", "fsp")
    every_s: float = 30.0  # snapshot interval
    league_every: int = 4  # version numbers per history version kept for the league
    rules_share: float = 0.25  # fsp-rules, br-rules: league seats the rules play
    best_response_share: float = 0.5  # br: league seats the best response plays
    tables: int = 64
    eval_hands: int = 2000  # the final version against the rules over HTTP (the demo's check)
    # `croupier train` flags for every mode (e.g. ["--no-rules-anchor"]).
    train_args: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.game = ALIASES.get(self.game, self.game)
        unknown = [m for m in self.modes if m not in MODES]
        if unknown:
            raise ValueError(f"unknown modes {unknown}; of {list(MODES)}")
        if self.minutes <= 0 or self.every_s <= 0 or self.league_every < 1:
            raise ValueError("minutes and every_s must be positive, league_every at least 1")


def score(game: str, snapshots: list[dict[str, Any]], folder: Path) -> list[dict[str, Any]]:
    """Each snapshot measured exactly on the tree (sampled, as served), a version once."""
    from croupier.arena.exploitability import measure
    from croupier.games.registry import load_adapter
    from croupier.policies.distribution import from_module, load_policy
    from croupier.policies.module import ModelSpec
    from croupier.policies.weights_file import read_weights

    adapter = load_adapter(game)
    rules = load_policy("rules", game)[0]
    measured: dict[str, dict[str, Any]] = {}
    curve = []
    for snap in snapshots:
        if snap["file"] not in measured:
            policy = from_module(adapter, ModelSpec.from_dict(snap["spec"]),
                                 read_weights(folder / snap["file"]))  # fmt: skip
            r = measure(game, policy, f"v{snap['version']}", rules)
            folds = r.folds
            measured[snap["file"]] = {
                "exploitability": r.exploitability,
                "vs_rules": r.vs_rules,
                "vs_equilibrium": r.vs_equilibrium,
                "folds_when_check_free": None if folds is None else folds.overall,
                "folds_worst": None if folds is None or folds.worst is None else folds.worst,
            }
        curve.append({"seconds": snap["seconds"], "version": snap["version"],
                      **measured[snap["file"]]})  # fmt: skip
    return curve


def score_average(
    game: str, snapshots: list[dict[str, Any]], folder: Path, weights_dir: Path
) -> list[dict[str, Any]]:
    """At each snapshot, the league's average: one version drawn per hand among those the
    server kept for its league up to then (its history on disk, `--weights-keep-every`, and
    the snapshot's own version), as `arena/exploitability.py` `mixture`: what a `league`
    seat (`--league-sampling fsp`) plays, and fictitious play's average strategy."""
    from croupier.arena.exploitability import measure_probs, mixture
    from croupier.games.registry import load_adapter
    from croupier.games.tree import game_tree
    from croupier.policies.distribution import from_module, load_policy
    from croupier.policies.module import ModelSpec
    from croupier.policies.weights_file import read_weights, version_of

    tree, adapter = game_tree(game), load_adapter(game)
    rules = load_policy("rules", game)[0]
    files = {v: p for p in weights_dir.glob("*.npz") if (v := version_of(p)) is not None}
    probs: dict[int, Any] = {}

    def of(version: int, path: Path, spec: dict[str, Any]) -> Any:
        if version not in probs:
            policy = from_module(adapter, ModelSpec.from_dict(spec), read_weights(path))
            probs[version] = tree.slot_probs(policy)
        return probs[version]

    curve = []
    for snap in snapshots:
        v = snap["version"]
        members = [of(u, files[u], snap["spec"]) for u in sorted(files) if u < v]
        members.append(of(v, folder / snap["file"], snap["spec"]))
        r = measure_probs(game, mixture(tree, members), f"league up to v{v}", rules)
        curve.append({"seconds": snap["seconds"], "version": v, "members": len(members),
                      "exploitability": r.exploitability, "vs_rules": r.vs_rules,
                      "vs_equilibrium": r.vs_equilibrium})  # fmt: skip
    return curve


def run_mode(bench: LeagueBench, mode: str, run_dir: Path) -> dict[str, Any]:
    from croupier.demo import ExternalRun, run_external

    setting = mode_setting(mode, bench.league_every, bench.rules_share,
                           bench.best_response_share)  # fmt: skip
    print(f"{mode}: {bench.minutes:g} min through the external path, seats "
          f"{setting['seats']} {' '.join(setting['server_args'])}", flush=True)  # fmt: skip
    snapshots = Snapshots(run_dir / "weights", run_dir / "snapshots", bench.every_s)
    with snapshots:
        report = run_external(
            ExternalRun(
                game=bench.game, minutes=bench.minutes, tables=bench.tables,
                eval_hands=bench.eval_hands, run_dir=run_dir, train_args=bench.train_args,
                quiet=True, seats=setting["seats"], server_args=setting["server_args"],
                # the clock starts at the first version served (the rules' clone), for
                # every mode alike
                wait_for_trainer=True,
                min_version=0 if "--no-rules-anchor" in bench.train_args else 1,
            )
        )  # fmt: skip
    print(f"{mode}: measuring {len(snapshots.taken)} snapshots on the tree...", flush=True)
    (run_dir / "snapshots.json").write_text(json.dumps(snapshots.taken))
    # The clock from the first version served (the trainer's start-up, minutes on a busy
    # machine, is no training time).
    taken = snapshots.taken
    start = taken[0]["seconds"] if taken else 0.0
    shifted = [{**t, "seconds": t["seconds"] - start} for t in taken]
    curve = score(bench.game, shifted, snapshots.folder)
    average = score_average(bench.game, shifted, snapshots.folder, run_dir / "weights")
    trainer = report.get("trainer_last") or {}
    return {
        "seats": setting["seats"],
        "server_args": setting["server_args"],
        "curve": curve,
        "average": average,
        "final": curve[-1] if curve else None,
        "final_average": average[-1] if average else None,
        "best": min(curve, key=lambda p: p["exploitability"]) if curve else None,
        "final_version": report["final_version"],
        "final_vs_rules_http": report["final_vs_rules"],
        "env_steps": trainer.get("env_steps"),
        "training_hands": report["training_engine"]["hands"],
        "run_dir": str(run_dir),
    }


def bench_league(bench: LeagueBench, out_dir: Path) -> dict[str, Any]:
    from croupier.games.tree import game_tree

    game_tree(bench.game)  # a game it cannot walk fails here, before minutes of training
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    report: dict[str, Any] = {"run": asdict(bench), "time": time.time(), "modes": {}}
    for mode in bench.modes:
        run_dir = out_dir / f"league-runs/{stamp}-{mode}"
        report["modes"][mode] = run_mode(bench, mode, run_dir)
    path = out_dir / f"league-leduc-{stamp}.json"
    return save_report(report, path, plot)


def plot(report: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    for i, (mode, r) in enumerate(report["modes"].items()):
        xs = [p["seconds"] / 60 for p in r["curve"]]
        top.plot(xs, [p["exploitability"] for p in r["curve"]], c=f"C{i}", marker=".",
                 label=f"{mode}: the version served")  # fmt: skip
        avg = r.get("average") or []
        top.plot([p["seconds"] / 60 for p in avg], [p["exploitability"] for p in avg],
                 c=f"C{i}", ls="--", label=f"{mode}: its league, a version per hand")  # fmt: skip
        bottom.plot(xs, [p["vs_rules"] for p in r["curve"]], c=f"C{i}", marker=".",
                    label=f"{mode} vs the rules")  # fmt: skip
        bottom.plot(xs, [p["vs_equilibrium"] for p in r["curve"]], c=f"C{i}", ls=":",
                    label=f"{mode} vs the equilibrium")  # fmt: skip
    top.axhline(0.30, c="gray", ls="--", lw=0.8, label="target 0.30")
    top.axhline(0.359, c="gray", ls=":", lw=0.8, label="RLCard's CFR agent, 10 min (0.359)")
    top.set_ylabel("exploitability (a hand, exact)")
    top.set_title(f"{report['run']['game']}: league vs rules-only training, external path")
    top.legend(fontsize=7)
    bottom.axhline(0.418, c="gray", ls="--", lw=0.8, label="the equilibrium vs the rules")
    bottom.axhline(0, c="black", lw=0.5)
    bottom.set_xlabel("minutes (wall clock, from the first version served)")
    bottom.set_ylabel("payoff a hand (exact)")
    bottom.legend(fontsize=7, ncol=2)
    save(fig, path)


def format_report(report: dict[str, Any]) -> str:
    lines = [f"{'mode':<10} {'exploit.':>9} {'best':>7} {'vs rules':>9} {'vs eq.':>8} "
             f"{'folds':>7} {'worst':>7} {'env steps':>10}"]  # fmt: skip
    for mode, r in report["modes"].items():
        f, b = r["final"], r["best"]
        if f is None:
            lines.append(f"{mode:<10} (no version served)")
            continue
        folds = f["folds_when_check_free"]
        worst = (f["folds_worst"] or {}).get("max")
        lines.append(
            f"{mode:<10} {f['exploitability']:>9.3f} {b['exploitability']:>7.3f} "
            f"{f['vs_rules']:>+9.3f} {f['vs_equilibrium']:>+8.3f} "
            + (f"{folds:>7.1%}" if folds is not None else f"{'-':>7}")
            + (f" {worst:>7.1%}" if worst is not None else f" {'-':>7}")
            + f" {r['env_steps'] or 0:>10,}"
        )
    for mode, r in report["modes"].items():
        a = r.get("final_average")
        if a is not None:
            lines.append(
                f"{mode + ' avg':<10} {a['exploitability']:>9.3f} {'':>7} {a['vs_rules']:>+9.3f} "
                f"{a['vs_equilibrium']:>+8.3f}   (its league: one of {a['members']} versions "
                "drawn per hand)"
            )
    lines.append("(final version, sampled; best: the least exploitable snapshot)")
    lines.append(f"saved: {report.get('saved')}")
    return "\n".join(lines)
