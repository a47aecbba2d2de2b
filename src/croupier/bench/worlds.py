"""What a world costs a search (`croupier bench worlds`): per game, the CPU of setting a table
from a seat's view (`Simulator.resample`) and of playing the hand out from there, by random
moves and by the game's rules (the base policy a search plays out with), beside the game's
own table dealing and playing a hand from the start.

A search resamples the one state it decides on many times: each state of mixed play (the
rules' moves and random ones) is resampled `repeats` times, the same object, as a search
does. Times are CPU seconds of this process (`time.process_time`: the 2-core box is shared,
and a wall clock would count the others' work), one thread, means over every world.

    croupier bench worlds --hands 6 --out bench/results
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

# Every game with a simulator that resamples: the built-in ones and the development games.
GAMES = {
    "kuhn-poker": "examples.kuhn.adapter:KuhnAdapter",
    "leduc-holdem": "leduc-holdem",
    "limit-holdem": "examples.limit_holdem.adapter:LimitHoldem",
    "uno": "uno",
    "doudizhu": "doudizhu",
    "president": "examples.president.adapter:President",
    "hearts": "examples.hearts.adapter:Hearts",
    "hearts-openspiel": "examples.hearts_openspiel.adapter:Hearts",
    "crazy-eights": "examples.crazy_eights.adapter:CrazyEights",
}
# The studio's bot itself where its adapter serves it behind the state's checks (`rules()`:
# a toolkit parse a move, ~75% of Hearts' rules playout): a table's own states need none.
BOTS = {
    "president": "examples.president.adapter:president_rules",
    "hearts": "examples.hearts.adapter:hearts_rules",
    "hearts-openspiel": "examples.hearts_openspiel.adapter:hearts_rules",
    "crazy-eights": "examples.crazy_eights.adapter:eights_rules",
}
BUDGET_MS = 200.0  # a search's budget a decision, one core (issue 55's)
MAX_MOVES = 5_000


def _play_out(table: Any, pick: Any) -> int:
    moves = 0
    while not table.is_over() and moves < MAX_MOVES:
        table.step(pick(table.state(table.current_player())))
        moves += 1
    table.payoffs()
    return moves


def measure(name: str, hands: int, states_per_game: int, repeats: int, seed: int) -> dict:
    """One game's costs (microseconds of CPU, means)."""
    from croupier.games.registry import import_object, load_adapter, load_simulator
    from croupier.games.simulator import mixed_play_states

    game, adapter = GAMES[name], load_adapter(GAMES[name])
    # The bot without the checks a server puts before it (`checked_rules`, `BOTS`).
    rules = import_object(BOTS[name]) if name in BOTS else None
    rules = rules or getattr(adapter, "checked_rules", adapter.rules)()
    table, rng = load_simulator(game), random.Random(seed)
    states = mixed_play_states(table, rules, hands, seed)
    states = states[:: max(1, len(states) // states_per_game)][:states_per_game]
    table.resample(states[0], rng)  # (first-use imports and tables, untimed)
    _play_out(table, rules)
    clock = time.process_time

    def random_move(state: dict[str, Any]) -> Any:
        return rng.choice(state["legal_actions"])

    resample = played = ruled = first = 0.0
    moves = ruled_moves = worlds = 0
    for state in states:
        for repeat in range(repeats):
            t0 = clock()
            table.resample(state, rng)
            t1 = clock()
            moves += _play_out(table, random_move)
            t2 = clock()
            if repeat:  # a search's resamples of the state it decides on
                resample, worlds = resample + t1 - t0, worlds + 1
            else:  # its first: the state read (the toolkit keeps what it leaves unseen)
                first += t1 - t0
            played += t2 - t1
        table.resample(state, rng)  # once by the rules: they cost more than the table
        t0 = clock()
        ruled_moves += _play_out(table, rules)
        ruled += clock() - t0
    t0, own_moves = clock(), 0
    for hand in range(hands):  # the game's own table from the deal, random moves
        table.reset(seed + hand)
        own_moves += _play_out(table, random_move)
    own = clock() - t0
    us, played_out = 1e6, worlds + len(states)
    again, random_out, rules_out = resample / worlds, played / played_out, ruled / len(states)
    return {
        "states": len(states),
        "worlds": played_out,
        "resample_us": again * us,
        "resample_first_us": first / len(states) * us,
        "random_playout_us": random_out * us,
        "random_playout_moves": moves / played_out,
        "random_move_us": played / max(moves, 1) * us,
        "rules_playout_us": rules_out * us,
        "rules_playout_moves": ruled_moves / len(states),
        "own_table_hand_us": own / hands * us,
        "own_table_move_us": own / max(own_moves, 1) * us,
        # Worlds a search can play out in its budget on one core: resample + play-out.
        "random_worlds_per_budget": BUDGET_MS / 1e3 / (again + random_out),
        "rules_worlds_per_budget": BUDGET_MS / 1e3 / (again + rules_out),
    }


def bench_worlds(
    hands: int, states: int, repeats: int, out: Path, games: list[str] | None = None
) -> dict[str, Any]:
    from croupier.bench.plotting import save_report

    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"hands": hands, "states": states, "repeats": repeats,
                              "budget_ms": BUDGET_MS, "games": {}}  # fmt: skip
    for name in games or list(GAMES):
        report["games"][name] = measure(name, hands, states, repeats, seed=7)
    return save_report(report, out / "worlds.json", _plot)


def _plot(report: dict[str, Any], path: Path) -> None:
    from croupier.bench.plotting import pyplot, save

    plt = pyplot()
    names = list(report["games"])
    rows = [report["games"][n] for n in names]
    fig, ax = plt.subplots(figsize=(8, 4))
    y = range(len(names))
    ax.barh([i + 0.2 for i in y], [r["resample_us"] for r in rows], 0.2, label="resample")
    ax.barh(y, [r["random_playout_us"] for r in rows], 0.2, label="played out, random moves")
    ax.barh([i - 0.2 for i in y], [r["rules_playout_us"] for r in rows], 0.2,
            label="played out by the rules")  # fmt: skip
    ax.set_yticks(list(y), names)
    ax.set_xscale("log")
    ax.set_xlabel("CPU microseconds (one thread; log scale)")
    ax.set_title("A world for search: set from a seat's view, then played out")
    ax.legend(fontsize=7)
    save(fig, path)
