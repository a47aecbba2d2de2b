"""`croupier bench strength --game doudizhu`: the external path learning one side against the
rules (its in-process candidate-scoring anchor is an experiment of its own:
`python -m experiments.strength_anchors`, experiments/README.md).

External: `croupier train --game doudizhu` (its preset) + `croupier serve --trainer` + the
reference engine (`--batch`, the learned side seated after each deal, `--sides`). Every
`eval_every_s` of play the engine stops for an evaluation (`record: false`, not counted as
training time): the learned side's win rate over `eval_games` games with a 95% CI. The last
one is over `final_games`, then as many again with the learned side greedy (`learned:greedy`
seats: the version's most likely move, what `production:greedy` serves), and as many with the
rules in the learned side's place (the rules' own record).

Setting, written into the result: learned side vs `doudizhu-rule-v1` on the other side
(not self-play). With `league_sides` (league training, docs/robustness.md) the training
tables take turns with that seating and these (self-play, past versions as `league` seats);
the evaluations stay against the rules.

Any other game with a simulator (a built-in one such as UNO, or the studio's own:
`--game package.module:Simulator` or an adapter that names one) is measured the same way with
a fixed-size action head: the external path as `make demo` runs it (learned seat vs the rules)
beside RLlib's in-process PPO on the simulator (`engine/seat_env.py`) for the same minutes;
both final policies are then scored by one in-process yardstick (`bench/evaluate.py`: payoff
per hand vs the rules, the same deals for both, sampled and greedy, with a 95% CI).

Beside every curve: the rules' own record (the rules in the learned side's place, drawn from
the game) and the minutes the curve spent significantly below it (`stats.minutes_below`: a
point's CI and the record's combined, wholly below; `below_resolution`, the smallest dip a
point shows, beside it). Both sides start from the rules' clone, as `croupier train` does,
unless `rules_anchor` is off. The minutes are training from the first served version (`CLOCK`);
the setup before it is reported apart (`setup_s`).

Why ~570 lines in one module: doudizhu's path and the simulator games' share one run setting
(`StrengthRun`), one report and its text and plots; split, each half would import the other's.
The evaluation curve lives in `bench/curve.py`.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from croupier.bench.curve import Snapshots, score_snapshots
from croupier.bench.plotting import legend, pyplot, save, save_report
from croupier.bench.record import BELOW_TEST, evaluation_spans
from croupier.demo import TRAINER_BUILD_TIMEOUT_S, wait_for_links
from croupier.engine.runner import run_engine, seatings
from croupier.local_server import free_port, get_json, serving, start_train, stop
from croupier.stats import below_resolution, minutes_below
from croupier.trainer.progress import PROGRESS, last_progress

SIDES = {
    "landlord": {"landlord": "learned", "peasant": "rules"},
    "peasants": {"landlord": "rules", "peasant": "learned"},
}
GREEDY_SEAT = "learned:greedy"  # the learned version's most likely move, never recorded
# The preset's settings `bench strength` can override (`croupier train`'s flags of the same names).
TRAIN_OVERRIDES = ("hiddens", "score_hidden", "lr", "train_batch_size", "minibatch_size",
                   "num_epochs", "entropy_coeff")  # fmt: skip
TRAINER_KEYS = ("env_steps", "env_steps_per_s", "trained_share", "steps_received",
                "steps_dropped_backlog", "steps_dropped_stale")  # fmt: skip
# What a run's minutes count, in each report and on its plot: `--minutes` of play from the
# first served version. Before it, off the clock (`setup_s`, ~5 minutes on the 2-core machine
# for a game of four seats): the servers and the trainer starting, and the trainer distilling
# the rules' clone (version 1). Evaluations are off the clock too (doudizhu's are played
# between chunks of training; the other games' snapshots are scored after the run).
CLOCK = (
    "minutes of training from the first served version (the rules' clone); the setup before "
    "it (`setup_s`: servers, trainer, the clone's distillation) and the evaluations not counted"
)


def _record(record: dict[str, Any], key: str) -> tuple[float, float]:
    """The rules' own record and its 95% CI half-width (`minutes_below`'s test)."""
    return record[key], record["ci95"]


@dataclass
class StrengthRun:
    game: str = "doudizhu"
    learn: str = "landlord"  # "landlord" | "peasants"
    minutes: float = 5.0
    eval_every_s: float = 60.0
    eval_games: int = 300
    final_games: int = 2000
    tables: int = 32  # engine tables played at once
    # Training settings over the game's preset, for the external trainer and the anchor alike
    # (keys: TRAIN_OVERRIDES): a comparison stays like for like.
    train: dict[str, Any] = field(default_factory=dict)
    # Simulator games: also RLlib in-process on the simulator, as long (None: on). Doudizhu has
    # none here (its candidate PPO anchor: experiments/strength_anchors.py).
    anchor: bool | None = None
    ray_cpus: int | None = None  # the in-process anchor's Ray session (None: every core)
    # ppo | appo for the external trainer (None: the game's preset, else `DEFAULT_ALGO`); the
    # simulator games' anchor trains whatever the external run's version names.
    algo: str | None = None
    # Rules-anchored learning (`croupier train`'s default): the external trainer and the
    # in-process RLlib anchor start from the rules' clone; False: both from scratch.
    rules_anchor: bool = True
    # A preset file (`croupier tune`'s) in place of the game's preset, for the external
    # trainer (`croupier train --preset`) and the anchor alike; `train` still overrides it.
    preset: str | None = None
    # The adapter served and trained, both sides (`package.module:Class`, e.g. the toolkit's
    # `croupier.games.doudizhu_cards:DoudizhuCardsCandidates` or `croupier.games.uno_cards:
    # UnoCardsCandidates`); None: the game's own. The engine, the rules, the deals and the
    # yardstick stay the same, so the two feature sets are compared like for like.
    adapter: str | None = None
    # More `croupier train` flags for the external trainer alone (e.g. the rules anchor's
    # `--rules-entropy-boost 0`): what the in-process anchor has no flag for.
    train_args: list[str] = field(default_factory=list)
    # Doudizhu, league training: more tables' sides while training, beside the learned side
    # against the rules (the tables take turns with them), e.g. self-play
    # {"landlord": "learned", "peasant": "learned"} and past versions as peasants
    # {"landlord": "learned", "peasant": "league"}. Evaluations stay against the rules.
    league_sides: list[dict[str, str]] = field(default_factory=list)
    # More `croupier serve` flags for the external server (e.g. `--league-sampling fsp`).
    serve_args: list[str] = field(default_factory=list)
    # A search seat (`search:base=rules:...`, docs/search.md) scored against the rules on the
    # final deals before any training: the level the game's simulator gives at minute 0,
    # drawn beside the network's curve (simulator games).
    search: str | None = None

    @property
    def served(self) -> str:
        """The `--game` the trainer and the server run."""
        return self.adapter or self.game


def new_run_dir(out_dir: Path, label: str) -> Path:
    """A directory of its own for one run's trainer, server and logs: two runs started in
    the same second (both sides at once) once shared one, spool and checkpoints included."""
    for n in range(1, 100):
        path = out_dir / f"strength-external-{label}{'' if n == 1 else f'-{n}'}"
        try:
            path.mkdir(parents=True)  # atomic: the first run to make it owns it
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"no free run directory for {label} under {out_dir}")


def train_flags(train: dict[str, Any]) -> list[str]:
    """`croupier train` flags for the overridden settings; ValueError on an unknown one."""
    unknown = sorted(set(train) - set(TRAIN_OVERRIDES))
    if unknown:
        raise ValueError(f"unknown training settings {unknown}; one of {list(TRAIN_OVERRIDES)}")
    flags = []
    for name, value in train.items():
        text = ",".join(str(int(h)) for h in value) if name == "hiddens" else str(value)
        flags += ["--" + name.replace("_", "-"), text]
    return flags


def _side_rate(summary: Any, learn: str, policy: str = "learned") -> dict[str, float]:
    side = summary.sides[f"{policy} as {'landlord' if learn == 'landlord' else 'peasant'}"]
    return {"win_rate": side.mean, "ci95": side.ci95, "games": side.n}


async def _play(url: str, run: StrengthRun, seconds: float | None, hands: int | None,
                record: bool, learned: str = "learned") -> Any:  # fmt: skip
    """Evaluation (`record` false): the learned side against the rules. Training: those
    tables and, in turns with them, the run's league tables."""
    sides = {side: learned if who == "learned" else who for side, who in SIDES[run.learn].items()}
    mix = [sides, *run.league_sides] if record else [sides]
    return await run_engine(url, run.game, run.tables, None, hands, seconds, batch=True,
                            record=record, sides=mix)  # fmt: skip


def _learned_decisions(url: str) -> int:
    return int(get_json(f"{url}/healthz")["decisions"].get("learned", 0))


def run_external(run: StrengthRun, run_dir: Path) -> dict[str, Any]:
    entered = time.monotonic()
    port = free_port()
    log = open(run_dir / "trainer.log", "wb")  # noqa: SIM115 - closed below
    trainer = start_train(
        ["--game", run.served, "--listen", f"127.0.0.1:{port}",
         "--checkpoint-dir", str(run_dir / "trainer"), "--minutes", str(run.minutes * 3 + 5),
         "--log-level", "info", *(["--algo", run.algo] if run.algo else []),
         *train_flags(run.train), *anchor_flags(run), *preset_flags(run)],
        stdout=log,
    )  # fmt: skip
    curve: list[dict[str, Any]] = []
    try:
        args = ["--game", run.served, "--trainer", f"127.0.0.1:{port}",
                "--data-dir", str(run_dir / "server"), *run.serve_args]  # fmt: skip
        with serving(args) as (url, _):
            # The clock starts once the trainer serves its first version (the rules' clone,
            # distilled before its link opens): no game is played by the untrained model.
            wait_for_links([url], trainer, run_dir / "trainer.log", TRAINER_BUILD_TIMEOUT_S,
                           min_version=1 if run.rules_anchor else 0)  # fmt: skip
            setup_s = time.monotonic() - entered  # trainer, server, the clone: off the clock
            trained_s, decisions = 0.0, 0  # the learned side's decisions while training
            # Minute 0: what players meet first.
            ev = asyncio.run(_play(url, run, None, run.eval_games, record=False))
            version = get_json(f"{url}/healthz")["version"]
            point = {"train_s": 0.0, "decisions": 0, "version": version,
                     **_side_rate(ev, run.learn)}  # fmt: skip
            curve.append(point)
            print(json.dumps(point), flush=True)
            while trained_s < run.minutes * 60:
                chunk = min(run.eval_every_s, run.minutes * 60 - trained_s)
                before = _learned_decisions(url)
                t0 = time.monotonic()
                asyncio.run(_play(url, run, chunk, None, record=True))
                trained_s += time.monotonic() - t0
                decisions += _learned_decisions(url) - before
                final = trained_s >= run.minutes * 60
                games = run.final_games if final else run.eval_games
                ev = asyncio.run(_play(url, run, None, games, record=False))
                version = get_json(f"{url}/healthz")["version"]
                point = {"train_s": round(trained_s, 1), "decisions": decisions,
                         "version": version, **_side_rate(ev, run.learn)}  # fmt: skip
                curve.append(point)
                print(json.dumps(point), flush=True)
            # What production would serve (`production:greedy` seats): the same version's
            # most likely move, over as many games again.
            ev = asyncio.run(_play(url, run, None, run.final_games, False, GREEDY_SEAT))
            greedy = {"version": get_json(f"{url}/healthz")["version"],
                      **_side_rate(ev, run.learn, GREEDY_SEAT)}  # fmt: skip
            print(json.dumps({"greedy": greedy}), flush=True)
            # The rules' own record: the rules in the learned side's place, as many games.
            ev = asyncio.run(_play(url, run, None, run.final_games, False, "rules"))
            record = _side_rate(ev, run.learn, "rules")
    finally:
        stop(trainer)
        log.close()
    final = curve[-1] if curve else None
    trainer_last = last_progress(run_dir / "trainer" / PROGRESS) or {}
    league = "".join(
        f"; also {m['landlord']} landlord vs {m['peasant']} peasants" for m in run.league_sides
    )
    return {
        "setting": f"learned {run.learn} vs doudizhu-rule-v1 (external path"
        + (", from the rules' clone" if run.rules_anchor else "")
        + (f"; training tables take turns: the rules{league}" if league else "")
        + (f"; {run.adapter})" if run.adapter else ")"),
        "clone": _clone_report(run_dir / "trainer"),
        # What the learner got of what was played: steps trained and their rate, and the
        # share of the steps received that were trained (the rest: dropped, counted).
        "trainer": {k: trainer_last.get(k) for k in TRAINER_KEYS},
        "setup_s": round(setup_s, 1),
        "curve": curve,
        "final": final,
        "final_greedy": greedy,
        "decisions_per_s": final["decisions"] / final["train_s"] if final else None,
        "rules_record": record,
    }


def bench_strength(run: StrengthRun, out_dir: Path) -> dict[str, Any]:
    if run.game != "doudizhu":
        if run.adapter:
            same_table(run)
        return bench_strength_simulated(run, out_dir)
    if run.learn not in SIDES:
        raise ValueError(f"learn must be one of {sorted(SIDES)}")
    if run.anchor:
        raise ValueError(
            "doudizhu has no in-process anchor here: python -m experiments.strength_anchors"
        )
    check_league_sides(run.league_sides)
    train_flags(run.train)  # an unknown setting fails here, before any run
    run_preset(run)  # and a bad preset file
    if run.adapter is not None:  # and an adapter that cannot stand in for `--game doudizhu`
        from croupier.games.registry import load_adapter

        if load_adapter(run.adapter).name != "doudizhu":
            raise ValueError(f"--adapter {run.adapter}: a doudizhu adapter (name 'doudizhu')")
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    report: dict[str, Any] = {"run": asdict(run)}
    print(f"external path: {run.minutes:g} min, learned {run.learn}...", flush=True)
    external = run_external(run, new_run_dir(out_dir, f"{run.learn}-{stamp}"))
    # The rules' own record, drawn from the game: the rules in the learned side's place
    # against the rules, over as many games as the final evaluations (~0.50 for either side).
    record = external.pop("rules_record")
    report["rules_record"], report["rules_record_detail"] = record["win_rate"], record
    report["clock"] = CLOCK
    report["below_test"] = BELOW_TEST
    if external["curve"]:
        curve = external["curve"]
        spans = evaluation_spans(curve, curve[-1]["train_s"], "train_s", "win_rate")
        external["minutes_below"] = minutes_below(spans, *_record(record, "win_rate"))
        external["below_resolution"] = below_resolution(spans, record["ci95"])
    report["external"] = external
    label = "" if run.adapter is None else "-" + run.adapter.rpartition(":")[2]
    path = out_dir / f"strength-{run.game}{label}-{run.learn}-{stamp}.json"
    return save_report(report, path, plot)


def check_search_seat(game: str, seat: str) -> None:
    """A search seat `bench strength` can score on `game`: ValueError before any run starts."""
    from croupier.bench.search import SearchBench, checked_spec

    spec = checked_spec(SearchBench(game, seat))
    if spec.base not in ("rules", "random"):
        raise ValueError(
            f"--search {seat}: base=rules or base=random here (before training there is no "
            "version to search over; `croupier bench search --weights-dir` takes one)"
        )


def score_search_seat(game: str, seat: str, hands: int, seed: int) -> dict[str, Any]:
    """The search seat, at its own `ms`, against the rules on `hands` duplicate hands: its
    strength score and what a decision cost (`bench/search.py`, in-process on one core)."""
    from croupier.bench.search import SearchBench, checked_spec, resolve_base, score_point

    run = SearchBench(game, seat, hands=hands, seed=seed)
    based = resolve_base(run, checked_spec(run))
    return score_point(run, based, based[0].ms)


def check_league_sides(league_sides: list[dict[str, str]]) -> None:
    """ValueError unless each league table is a seating the engine plays (`seatings`), each
    policy a seat spec the server takes: before any run, not as failed hands after it."""
    from croupier.policies.seats import parse_spec

    if league_sides:
        for mix in seatings(league_sides):
            for policy in mix.values():
                parse_spec(policy)  # BadPolicySpec, a ValueError


def same_table(run: StrengthRun) -> None:
    """ValueError unless `run.adapter` is the game's (its name) and plays on its table."""
    from croupier.games.registry import load_adapter, load_simulator

    game, served = load_adapter(run.game), load_adapter(run.served)
    table, its = type(load_simulator(run.game)), type(load_simulator(run.served))
    if served.name != game.name or its is not table:
        raise ValueError(f"--adapter {run.adapter}: an adapter of {game.name!r} on its table")


def run_preset(run: StrengthRun) -> Any:
    """The run's preset file's `TrainingPreset` (None: the game's own); PresetError (a
    ValueError, a clear CLI error) for a bad file."""
    from croupier.games.presets import load_preset

    return None if run.preset is None else load_preset(Path(run.preset), run.game)


def preset_flags(run: StrengthRun) -> list[str]:
    """`croupier train` flags for the run's preset file."""
    return [] if run.preset is None else ["--preset", run.preset]


def anchor_flags(run: StrengthRun) -> list[str]:
    """`croupier train` flags for the run's rules anchor (on by default there), and the run's
    own extra trainer flags."""
    return ([] if run.rules_anchor else ["--no-rules-anchor"]) + list(run.train_args)


def _clone_report(checkpoint_dir: Path) -> dict[str, Any] | None:
    """How the rules' clone a trainer started from was made (and how long it took), if any."""
    from croupier.trainer.rules_anchor import ANCHOR_STATE

    path = checkpoint_dir / ANCHOR_STATE
    try:
        return json.loads(path.read_text()).get("clone")
    except (OSError, ValueError):
        return None


def _scored(game: str, spec: Any, weights: Any, hands: int) -> dict[str, Any]:
    from croupier.bench.evaluate import payoff_vs

    # seed 1 for both sides of the comparison: the same deals and seats
    return {"sampled": payoff_vs(game, spec, weights, hands, seed=1),
            "greedy": payoff_vs(game, spec, weights, hands, seed=1, explore=False)}  # fmt: skip


def bench_strength_simulated(run: StrengthRun, out_dir: Path) -> dict[str, Any]:
    """Any game with a simulator: the external path vs RLlib in-process on the simulator,
    both scored in-process against the rules by the strength score (sampled and greedy), and
    the external path's served versions every `eval_every_s` scored as its curve."""
    from croupier.arena.duplicate import SCORE_MEANING
    from croupier.bench.evaluate import rules_record
    from croupier.bench.train import run_anchor as run_rllib_anchor
    from croupier.demo import ExternalRun
    from croupier.demo import run_external as run_demo
    from croupier.games.registry import load_simulator
    from croupier.policies.learned import read_weights_dir

    name = load_simulator(run.served).name  # ValueError (a clear CLI error) without one
    if run.league_sides:
        raise ValueError("--league-sides: doudizhu only (bench league: leduc)")
    if run.search:
        check_search_seat(run.served, run.search)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = new_run_dir(out_dir, stamp)
    from croupier.trainer.rules_anchor import RulesAnchor

    preset = run_preset(run)  # a bad file fails before any run
    train_args = train_flags(run.train) + anchor_flags(run) + preset_flags(run)
    print(f"the rules' own record ({run.final_games} hands)...", flush=True)
    record = rules_record(run.served, run.final_games, seed=1)  # the deals `_scored` plays
    searched = None
    if run.search:
        print(f"{run.search} ({run.final_games} hands, before training)...", flush=True)
        searched = score_search_seat(run.served, run.search, run.final_games, seed=1)
    print(f"external path: {run.minutes:g} min, learned seat vs the rules...", flush=True)
    snapshots = Snapshots(run_dir / "weights", run_dir / "snapshots", run.eval_every_s)
    with snapshots:
        external = run_demo(
            ExternalRun(
                game=run.served,
                minutes=run.minutes,
                run_dir=run_dir,
                tables=run.tables,
                eval_hands=run.eval_games,
                train_args=train_args,
                # e.g. expert iteration's `--search-labels` (docs/search.md)
                server_args=list(run.serve_args),
                algo=run.algo,
                quiet=True,
                # The clock starts once the trainer is up, as the anchor's starts once its Ray
                # session is: like for like (a 0.2-minute run on a loaded box once ended before
                # the trainer's first update).
                wait_for_trainer=True,
                min_version=1 if run.rules_anchor else 0,
            )
        )
    version, spec, weights = read_weights_dir(run_dir / "weights")
    print(f"scoring {len(snapshots.taken)} snapshots...", flush=True)
    curve = score_snapshots(run.served, snapshots.taken, snapshots.folder, run.eval_games)
    spans = evaluation_spans(curve, curve[-1]["seconds"] if curve else 0.0)
    report: dict[str, Any] = {
        # `learn` names a doudizhu side: not a setting of these games' runs
        "run": {k: v for k, v in asdict(run).items() if k != "learn"},
        "score": SCORE_MEANING,
        "clock": CLOCK,
        "below_test": BELOW_TEST,
        # the rules in the learned seat, same deals: 0 by construction (measured), and
        # their raw payoff per hand against themselves, drawn from the game
        "rules_record": record["mean"],
        "rules_record_detail": record,
        "external": {
            "setting": f"learned seat vs {name}'s rules (external path, version {version}"
            + (", from the rules' clone" if run.rules_anchor else "")
            + (f"; {run.adapter})" if run.adapter else ")"),
            "curve": curve,
            "clone": _clone_report(run_dir / "trainer"),
            "training_curve": external["curve"],  # raw payoff of the hands played training
            "minutes_below": minutes_below(spans, *_record(record, "mean")),
            "below_resolution": below_resolution(spans, record["ci95"]),
            "setup_s": external["setup_s"],
            "env_steps": int((external["trainer_last"] or {}).get("env_steps", 0)),
            "final": _scored(run.served, spec, weights, run.final_games),
        },
    }
    if searched is not None:
        report["search"] = searched
    if run.anchor is not False:
        print(f"anchor (RLlib in-process on the simulator): {run.minutes:g} min...", flush=True)
        anchor = run_rllib_anchor(
            run.served, spec.algo, run.minutes, run.ray_cpus, run.train,
            rules_anchor=None if run.rules_anchor else RulesAnchor(enabled=False),
            eval_every_s=run.eval_every_s, eval_hands=run.eval_games, preset=preset,
        )  # fmt: skip
        spans = evaluation_spans(anchor["curve"], anchor["seconds"])
        report["anchor"] = {
            "setting": f"learned seat vs {name}'s rules (RLlib in-process"
            + (", from the rules' clone)" if anchor["clone"] else ")"),
            "clone": anchor["clone"],
            "curve": anchor["curve"],
            "minutes_below": minutes_below(spans, *_record(record, "mean")),
            "below_resolution": below_resolution(spans, record["ci95"]),
            "env_steps": anchor["env_steps"],
            "final": _scored(run.served, anchor["spec"], anchor["weights"], run.final_games),
        }
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)
    label = "" if run.adapter is None else "-" + run.adapter.rpartition(":")[2]
    path = out_dir / f"strength-{safe}{label}-{stamp}.json"
    return save_report(report, path, plot_simulated)


def plot_simulated(report: dict[str, Any], path: Path) -> None:
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(8, 4.5))
    minutes = report["run"]["minutes"]
    for i, (key, color) in enumerate((("external", "C1"), ("anchor", "C0"))):
        if key not in report:
            continue
        r = report[key]
        if key == "external":  # its served versions' strength scores, with their CIs
            pts = r["curve"]
            ax.errorbar([p["seconds"] / 60 for p in pts], [p["mean"] for p in pts],
                        yerr=[p["ci95"] for p in pts], c=color, lw=1, marker=".",
                        label=f"{r['setting']}; {_below(r)}")  # fmt: skip
        else:  # the anchor's curve is RLlib's return (raw payoff of its training episodes)
            pts = [p for p in r["curve"] if p.get("return") is not None]
            ax.plot([p["seconds"] / 60 for p in pts], [p["return"] for p in pts], c=color,
                    lw=1, label=f"{r['setting']} (training return)")  # fmt: skip
        for j, how in enumerate(("sampled", "greedy")):
            f = r["final"][how]
            ax.errorbar(
                [minutes + 0.02 * (2 * i + j)],
                [f["mean"]],
                yerr=[f["ci95"]],
                c=color,
                fmt="o" if how == "sampled" else "s",
                label=f"{key} final, {how}",
            )
    if "search" in report:  # the search seat's level, there from minute 0
        s = report["search"]
        mean, ci = s["score"]["mean"], s["score"]["ci95"]
        ax.axhspan(mean - ci, mean + ci, color="C2", alpha=0.15)
        cost = f"{s['ms_per_decision']:.0f} ms a decision"
        label = f"{s['seat']}, no training: {mean:+.3f} ± {ci:.3f} ({cost})"
        ax.axhline(mean, c="C2", lw=1, label=label)
    record = report["rules_record_detail"]
    ax.axhline(report["rules_record"], c="gray", ls="--", lw=0.8,
               label=f"the rules' own record ({record['mean']:+.3f} ± {record['ci95']:.3f}; "
                     f"raw payoff {record['payoff']:+.3f} a hand)")  # fmt: skip
    ax.set_xlabel(_clock_label(report))
    ax.set_ylabel("strength score vs rules (duplicate: payoff less the deal's par)")
    legend(ax, fontsize=7)
    save(fig, path)


def plot(report: dict[str, Any], path: Path) -> None:
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(8, 4.5))
    external = report["external"]
    curve = external["curve"]
    how = " (sampled)"
    if external.get("minutes_below") is not None:
        how += f"; {_below(external)}"
    ax.errorbar([p["train_s"] / 60 for p in curve], [p["win_rate"] for p in curve],
                yerr=[p["ci95"] for p in curve], c="C1", marker="o",
                label=external["setting"] + how)  # fmt: skip
    g = external.get("final_greedy")
    if g and curve:  # the final greedy rate
        x = curve[-1]["train_s"] / 60 + 0.01 * report["run"]["minutes"]
        ax.errorbar([x], [g["win_rate"]], yerr=[g["ci95"]], c="C1", marker="s",
                    label="final, greedy")  # fmt: skip
    ax.axhline(report["rules_record"], ls="--", c="gray", label="the rules' own record")
    ax.set_xlabel(_clock_label(report))
    ax.set_ylabel(f"learned {report['run']['learn']} win rate vs rules")
    ax.set_ylim(0, 1)
    legend(ax, fontsize=8, loc="lower right")  # win rates: the curves sit above 0.3
    save(fig, path)


def _below(side: dict[str, Any]) -> str:
    """'2.5 min significantly below the rules' record (a point shows a dip past ±0.046)'."""
    text = f"{side['minutes_below']:.1f} min significantly below the rules' record"
    resolution = side.get("below_resolution")
    return text + (f" (a point shows a dip past ±{resolution:.3f})" if resolution else "")


def _clock_label(report: dict[str, Any]) -> str:
    """The x axis: what the minutes count, and the setup they leave out."""
    setup = report.get("external", {}).get("setup_s")
    return "minutes of training from the served clone" + (
        f" (setup before it, {setup / 60:.1f} min, and evaluations not counted)"
        if setup is not None
        else " (setup and evaluations not counted)"
    )


def format_report(report: dict[str, Any]) -> str:
    if report["run"]["game"] != "doudizhu":
        rows = [f"strength score: {report['score']}"]
        rows += [
            f"{report[key]['setting']:<62} {how} {f['mean']:+.3f} ± {f['ci95']:.3f} "
            f"(raw payoff {f['payoff']:+.3f}; {f['n']} hands; "
            f"{report[key]['env_steps']:,} env steps trained)"
            for key in ("external", "anchor") if key in report
            for how, f in report[key]["final"].items()
        ]  # fmt: skip
        if "search" in report:
            s = report["search"]
            rows.append(f"{s['seat']:<62} {s['score']['mean']:+.3f} ± {s['score']['ci95']:.3f} "
                        f"with no training ({s['ms_per_decision']:.0f} ms a decision)")  # fmt: skip
        record = report["rules_record_detail"]
        rows.append(f"the rules' own record: {record['mean']:+.3f} ± {record['ci95']:.3f} "
                    f"(raw payoff {record['payoff']:+.3f} a hand against themselves)")  # fmt: skip
        rows += _clock_rows(report)
        return "\n".join(rows)
    rows = []
    external = report["external"]
    f, g = external["final"], external.get("final_greedy")
    if f is not None:
        rows.append(
            f"{external['setting']:<62} {f['win_rate']:.3f} ± {f['ci95']:.3f} sampled"
            + (f", {g['win_rate']:.3f} ± {g['ci95']:.3f} greedy" if g else "")
            + f" ({f['games']} games; {f['decisions']:,} learned decisions in {f['train_s']:.0f} s)"
        )
    t = external.get("trainer") or {}
    if None not in (t.get("env_steps"), t.get("env_steps_per_s"), t.get("trained_share")):
        rows.append(
            f"  trainer: {t['env_steps']:,} steps trained ({t['env_steps_per_s']:.0f}/s), "
            f"{t['trained_share']:.0%} of the steps received"
        )
    detail = report.get("rules_record_detail") or {}
    spread = f" ± {detail['ci95']:.3f} ({detail['games']} games)" if detail else ""
    rows.append(f"the rules' own record: {report['rules_record']:.3f}{spread}")
    rows += _clock_rows(report)
    return "\n".join(rows)


def _clock_rows(report: dict[str, Any]) -> list[str]:
    """Minutes below the record per side, and what the minutes count."""
    rows = [f"  {key}: {_below(report[key])}" for key in ("external", "anchor")
            if report.get(key, {}).get("minutes_below") is not None]  # fmt: skip
    setup = report.get("external", {}).get("setup_s")
    if setup is not None:
        rows.append(f"  the clock: {report['run']['minutes']:g} min of training from the served "
                    f"clone; {setup / 60:.1f} min of setup before it not counted")  # fmt: skip
    return rows
