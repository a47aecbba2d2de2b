"""What a declared card game's encode costs beside the hand-made doudizhu's, stage by stage,
in one process (the ratio is what holds on a shared, loaded box; absolute µs move with it).

States come from the games' own simulators (the rules' move half the time, a random one the
other half, as the tests collect them); each repeat times every variant over all of them,
the variants taking turns every `--chunk` states, in CPU time of the timing thread, so the
box's load falls on each alike. Stages: checks (`parse`), state features, candidate
features; the hand-made adapters' are doudizhu's `parse`, `state_features`, `move_features`
and UNO's `parse`, `features`, `_candidates`.

    python bench/tools/card_encode_speed.py --games doudizhu,uno --hands 120 --reps 5
    python bench/tools/card_encode_speed.py --games president,crazy-eights --hands 40

Prints one JSON line per repeat and a summary (medians); `--out F.json` keeps the summary.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # examples/

# name: (adapter to time, its simulator: `load_simulator` names it)
GAMES = {
    "doudizhu": "croupier.games.doudizhu_cards:DoudizhuCardsCandidates",
    "uno": "croupier.games.uno_cards:UnoCardsCandidates",
    "president": "examples.president.adapter:PresidentCandidates",
    "crazy-eights": "examples.crazy_eights.adapter:CrazyEightsCandidates",
    "limit-holdem": "examples.limit_holdem.adapter:LimitHoldemCandidates",
}


def collect(game: str, hands: int, seed: int = 7) -> list[dict[str, Any]]:
    """States as the engine sends them: half the moves the rules', half random."""
    from croupier.games.registry import load_adapter, load_simulator
    from croupier.games.simulator import mixed_play_states

    name = GAMES[game]
    return mixed_play_states(load_simulator(name), load_adapter(name).rules(), hands, seed)


def stages_of(game: str) -> dict[str, tuple[Callable, Callable, Callable]]:
    """variant -> (parse, state features of a parsed state, candidates of a parsed state)."""
    from croupier.games.registry import load_adapter

    declared = load_adapter(GAMES[game]).inner
    g = declared.game
    out = {"declared": (g.parse, g.features, g.candidates)}
    if game == "doudizhu":
        hand_made = load_adapter("doudizhu").inner
        out["hand-made"] = (hand_made.parse, hand_made.state_features, hand_made.move_features)
    if game == "uno":  # its candidates read the state and its features: kept with the parse
        uno = load_adapter("uno").inner

        def parse(state: dict) -> list:
            return [state, uno.parse(state), None]

        def features(p: list) -> None:
            p[2] = uno.features(p[1])

        out["hand-made"] = (parse, features, lambda p: uno._candidates(p[0], p[2]))
    return out


def time_variant(stages: tuple[Callable, Callable, Callable], states: list[dict]) -> list[int]:
    """CPU ns (this thread's: a loaded box's other work is not counted) of each stage over
    `states`: parse them all, then the state features of all, then their candidates."""
    parse, features, candidates = stages
    clock = time.thread_time_ns
    t0 = clock()
    parsed = [parse(s) for s in states]
    t1 = clock()
    for p in parsed:
        features(p)
    t2 = clock()
    for p in parsed:
        candidates(p)
    t3 = clock()
    return [t1 - t0, t2 - t1, t3 - t2]


def time_all(variants: dict[str, tuple], states: list[dict], chunk: int, rep: int) -> dict:
    """µs a state by stage for each variant, the variants taking turns every `chunk` states
    (the order flipped each turn), so a change in the box's load falls on each alike."""
    ns = {v: [0, 0, 0] for v in variants}
    names = list(variants)
    for i, at in enumerate(range(0, len(states), chunk)):
        part = states[at : at + chunk]
        for v in names if (i + rep) % 2 == 0 else names[::-1]:
            ns[v] = [a + b for a, b in zip(ns[v], time_variant(variants[v], part), strict=True)]
    out = {}
    for v, t in ns.items():
        us = {k: x / len(states) / 1e3 for k, x in zip(STAGES, t, strict=True)}
        out[v] = {**us, "encode": sum(us.values())}
    return out


STAGES = ("parse", "features", "candidates")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--games", default="doudizhu")
    ap.add_argument("--hands", type=int, default=120)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--chunk", type=int, default=100, help="states a variant's turn")
    ap.add_argument(
        "--gc",
        choices=("server", "default"),
        default="server",
        help="the collector's settings: the server's (frozen, young 100,000)",
    )
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    import numpy as np

    np.zeros(1)  # (imports out of the first timing)
    from croupier.api.app import GC_YOUNG_THRESHOLD

    summary: dict[str, Any] = {
        "machine": platform.node(),
        "python": platform.python_version(),
        "gc": args.gc,
        "hands": args.hands,
        "chunk": args.chunk,
    }
    for game in args.games.split(","):
        states = collect(game, args.hands)
        variants = stages_of(game)
        if args.gc == "server":  # the collector as the server runs it (`api/app.py`)
            gc.collect()
            gc.freeze()
            gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
        for fns in variants.values():  # warm: caches, lazy tables
            time_variant(fns, states)
        runs: dict[str, list[dict]] = {v: [] for v in variants}
        for rep in range(args.reps):
            timed = time_all(variants, states, args.chunk, rep)
            line = {}
            for v in variants:
                runs[v].append(timed[v])
                line[v] = round(timed[v]["encode"], 1)
            if "hand-made" in line:
                line["ratio"] = round(line["declared"] / line["hand-made"], 2)
            print(json.dumps({"game": game, "rep": rep, **line}), flush=True)
        med = {
            v: {k: round(statistics.median(r[k] for r in rs), 1) for k in rs[0]}
            for v, rs in runs.items()
        }
        result: dict[str, Any] = {"states": len(states), "median_us_a_state": med}
        if "hand-made" in runs:
            ratios = [
                d["encode"] / h["encode"]
                for d, h in zip(runs["declared"], runs["hand-made"], strict=True)
            ]
            result["ratio_declared_over_hand_made"] = [round(r, 2) for r in ratios]
        summary[game] = result
        print(json.dumps({"game": game, **result}), flush=True)
    if args.out:
        args.out.write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
