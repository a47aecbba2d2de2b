"""`croupier bench search`: the search seat's strength against the milliseconds it may take a
decision, on one core, in-process (`policies/search.py`'s `SearchPlayer`: the algorithm the
server's workers run, without the pool around it).

For each budget (the seat's `ms`), the search seat plays `hands` hands against `opponent`
(the rules, by default) in duplicate sets on the game's simulator, scored by croupier's one
strength score (`bench/evaluate.py` `duplicate_score`: A's payoff per hand less the deal's
par, with its 95% CI; the same deals for every point). Beside the points, the base policy
alone in the search seat's place on the same deals: what the search adds is the distance
between the two. Each point also says what it cost: the measured milliseconds per decision
(a decision stops at its deadline, or sooner when the seat's `rollouts` are all played), the
hands played out per decision, and the decisions whose deadline passed before one world was
played in full (the base's move then).

`side` (doudizhu's `landlord`, `peasant`: `Simulator.roles`) puts the search seat on every
seat of that side and the opponent on the rest, and scores the side's win rate on the same
deals (`side_score`: a side played alone has no par), the base alone beside it as ever.

`rollouts` (several: each a point at every budget) sweeps the worlds a move instead of the
deadline: a fixed number of hands played out a decision, so a loaded machine changes what a
point costs in milliseconds, not how it plays (a sweep of budgets is the machine's speed too).

`split` compares the two ways of spreading a decision's budget over its moves: successive
halving (the seat's) and an even split (every move on the same worlds); on a game of two
moves a decision they are the same (one round).

The game needs a simulator that sets a table from a seat's view (`Simulator.resample`).
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import textwrap
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from croupier.bench.evaluate import duplicate_score, opponent_player, side_score
from croupier.bench.plotting import legend, pyplot, save, save_report
from croupier.games.registry import load_adapter, load_simulator
from croupier.policies.learned import read_weights_dir
from croupier.policies.search import CONFIDENCE, SearchPlayer
from croupier.policies.search_pool import Searcher
from croupier.policies.seats import MAX_SEARCH_ROLLOUTS, SEARCH, BadPolicySpec, parse_spec

SPLITS = ("halving", "even")


@dataclass
class SearchBench:
    game: str = "leduc-holdem"
    # The seat measured; its `ms` is each budget in turn (its `rollouts`: a ceiling).
    seat: str = "search:base=rules:rollouts=4096"
    budgets_ms: list[int] = field(default_factory=lambda: [25, 100, 200])
    opponent: str = "rules"
    hands: int = 2000
    seed: int = 1
    splits: tuple[str, ...] = ("halving",)
    weights_dir: Path | None = None  # a version base's (`frozen@N`, `learned@latest`)
    side: str | None = None  # the search on one side's seats (`Simulator.roles`), its win rate
    # Standard errors a move must beat the base's own by (`policies/search.py` CONFIDENCE,
    # the seat's): each a point of its own at every budget (0: the best mean, always).
    confidences: tuple[float, ...] = (CONFIDENCE,)
    # Worlds a move (the seat's `rollouts`), each a point at every budget (empty: the seat's).
    rollouts: tuple[int, ...] = ()


def _score(run: SearchBench, a: Any, b: Any) -> dict[str, Any]:
    """A against B: the strength score over duplicate sets, or with `side` the side's win
    rate (as `mean` and `ci95`, so every point reads alike) beside its payoff."""
    if run.side is None:
        return duplicate_score(run.game, a, b, run.hands, run.seed)
    won = side_score(run.game, a, b, run.hands, run.side, run.seed)
    return {**won, "mean": won["win"], "ci95": won["win_ci95"],
            "score": f"the {run.side} side's win rate (no par: a side played alone)"}  # fmt: skip


def checked_spec(run: SearchBench) -> Any:
    """The run's search spec, or ValueError saying what cannot be measured."""
    try:
        spec = parse_spec(run.seat).search
    except BadPolicySpec as e:
        raise ValueError(str(e)) from None
    if spec is None:
        raise ValueError(f"{run.seat!r} is not a search seat ({SEARCH}:...)")
    if not run.budgets_ms or any(not 1 <= b <= 10_000 for b in run.budgets_ms):
        raise ValueError("budgets are milliseconds, 1 to 10000")
    if not run.confidences or any(not 0 <= c <= 10 for c in run.confidences):
        raise ValueError("confidences are standard errors, 0 to 10")
    if any(not 1 <= r <= MAX_SEARCH_ROLLOUTS for r in run.rollouts):
        raise ValueError(f"rollouts are worlds a move, 1 to {MAX_SEARCH_ROLLOUTS}")
    if unknown := set(run.splits) - set(SPLITS):
        raise ValueError(f"unknown splits {sorted(unknown)}; one of {list(SPLITS)}")
    if not load_simulator(run.game).resamples():
        raise ValueError(
            f"{run.game}'s simulator cannot set a table from a seat's view "
            "(Simulator.resample): its game cannot be searched"
        )
    return spec


def resolve_base(run: SearchBench, spec: Any) -> tuple[Any, Any, Any]:
    """The spec (its `learned@latest` base: the newest version in the weights dir), the base
    policy and its prior (a version's; None for the rules and random play)."""
    if spec.base in ("rules", "random"):
        return spec, opponent_player(run.game, spec.base, run.seed), None
    if run.weights_dir is None:
        raise ValueError(f"base={spec.base} needs --weights-dir (the versions' folder)")
    if spec.base.startswith("learned@latest"):
        newest = read_weights_dir(run.weights_dir)[0]
        spec = dataclasses.replace(
            spec, base=spec.base.replace("learned@latest", f"frozen@{newest}")
        )
    if spec.base_version is None:
        raise ValueError(
            f"base={spec.base}: a bench plays rules, random, frozen@N or learned@latest"
        )
    import torch

    # One core, as the server's search workers have: with both cores busy, a greedy move of
    # doudizhu's declared version took 0.49 ms on torch's two threads, 0.36 ms on one.
    torch.set_num_threads(1)
    searcher = Searcher(run.game, weights_dir=run.weights_dir)
    return spec, searcher.base(spec.base), searcher.priors[spec.base]


def score_point(
    run: SearchBench,
    based: tuple[Any, Any, Any],
    ms: int,
    split: str = "halving",
    confidence: float = CONFIDENCE,
    rollouts: int | None = None,
) -> dict[str, Any]:
    """The search seat at `ms` a decision (and `rollouts` worlds a move, else the seat's)
    against the run's opponent: its score (`_score`) and what a decision cost. `based`:
    `resolve_base`'s spec, base and prior (resolved once a run: a version base loads its
    weights)."""
    spec, base, prior = based
    seat = dataclasses.replace(spec, ms=ms, rollouts=rollouts or spec.rollouts)
    others = opponent_player(run.game, spec.vs, run.seed) if spec.vs else None
    player = SearchPlayer(load_simulator(run.game), base, seat, seed=run.seed,
                          halving=split == "halving", prior=prior,
                          confidence=confidence, others=others)  # fmt: skip
    t0 = time.monotonic()
    score = _score(run, player, opponent_player(run.game, run.opponent, run.seed))
    decided = max(player.decisions, 1)
    return {
        "split": split,
        "confidence": confidence,
        "budget_ms": ms,
        "rollouts": seat.rollouts,
        "seat": seat.spec(),
        "score": score,
        "decisions": player.decisions,
        "ms_per_decision": 1000.0 * player.seconds / decided,
        "playouts_per_decision": player.playouts / decided,
        "fallbacks": player.fallbacks,
        "seconds": time.monotonic() - t0,
    }


def run_search_bench(run: SearchBench, out: Path) -> dict[str, Any]:
    based = resolve_base(run, checked_spec(run))
    spec, base, _ = based
    b = opponent_player(run.game, run.opponent, run.seed)
    print(f"{run.game}: the base ({spec.base}) alone vs {run.opponent}...", flush=True)
    alone = _score(run, base, b)
    points = []
    for split in run.splits:
        for confidence in run.confidences:
            for rollouts, ms in itertools.product(run.rollouts or (None,), run.budgets_ms):
                point = score_point(run, based, ms, split, confidence, rollouts)
                points.append(point)
                score = point["score"]
                cost = (f"{point['ms_per_decision']:.1f} ms, "
                        f"{point['playouts_per_decision']:.0f} hands played out a decision, "
                        f"{point['fallbacks']} fallbacks")  # fmt: skip
                at = f"rollouts {point['rollouts']} {ms} ms"
                print(f"  {split} confidence {confidence:g} {at}: {score['mean']:+.4f} ± "
                      f"{score['ci95']:.4f} ({cost})", flush=True)  # fmt: skip
    where = f"on the {run.side} side, its win rate" if run.side else "duplicate sets"
    report = {
        "run": {**asdict(run), "weights_dir": str(run.weights_dir) if run.weights_dir else None},
        "setting": f"{spec.base}'s search seat vs {run.opponent}, in-process, one core, "
        f"{run.hands} hands a point ({where}, the same deals at every point)",
        "base_alone": alone,
        "points": points,
    }
    base_name = spec.base.partition(":")[0].partition("@")[0]  # rules, random, frozen
    side = f"-{run.side}" if run.side else ""
    sweep = "-rollouts" if len(run.rollouts) > 1 else ""
    name = f"search-{load_adapter(run.game).name}-{base_name}{side}{sweep}"
    name = re.sub(r"[^a-z0-9]+", "-", name.lower())
    return save_report(report, out / f"{name.strip('-')}.json", plot)


def plot(report: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    alone = report["base_alone"]
    ax.axhline(alone["mean"], color="grey", ls="--", lw=1,
               label=f"the base alone: {alone['mean']:+.3f} ± {alone['ci95']:.3f}")  # fmt: skip
    ax.axhline(0.0, color="black", lw=0.5)

    def line(point: dict[str, Any]) -> tuple[str, float]:
        return point["split"], point.get("confidence", CONFIDENCE)

    for split, confidence in dict.fromkeys(map(line, report["points"])):
        points = [p for p in report["points"] if line(p) == (split, confidence)]
        xs = [p["ms_per_decision"] for p in points]
        ys = [p["score"]["mean"] for p in points]
        budgets = sorted({p["budget_ms"] for p in points})
        rollouts = sorted({p.get("rollouts") for p in points if p.get("rollouts")})
        label = (f"search ({split}, confidence {confidence:g}), at budgets {budgets} ms"
                 + (f", {rollouts} worlds a move" if len(rollouts) > 1 else ""))  # fmt: skip
        ax.errorbar(xs, ys, yerr=[p["score"]["ci95"] for p in points], marker="o", capsize=3,
                    label=label)  # fmt: skip
    ax.set_xscale("log")
    ax.set_xlabel("milliseconds per decision (measured, one core)")
    side = report["run"].get("side")
    measure = f"the {side} side's win rate" if side else "strength score"
    ax.set_ylabel(f"{measure} vs {report['run']['opponent']} (95% CI)")
    title = f"{report['run']['game']}: {report['setting']}"
    ax.set_title(textwrap.fill(title, 110), fontsize=7)
    legend(ax)
    save(fig, path)
