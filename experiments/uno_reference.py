"""Reference players for UNO against `uno-rule-v1`: how much is there to win?

A learned UNO policy is judged by its payoff per game against `uno-rule-v1`. This module
measures what players that see exactly what the policy sees (the engine's state JSON) earn
against the same rules, on the same table (`engine/rlcard_games.py`, RLCard's own game):

- `random`: any legal action.
- `heuristic`: ten lines of UNO sense: a skip or draw-2 first (in RLCard's two-player UNO
  both give another turn; a reverse does not), else the colour held most, and towards a
  colour the opponent just showed it lacks (it drew facing it); wilds kept for when nothing
  else is legal, called in the colour held most.
- `search`: determinized one-step lookahead. For each legal action, `rollouts` times: deal the
  cards it cannot see (the opponent's hand and the deck, from the 108 less its hand and the
  pile) at random, play the action, then play the game out, `heuristic` for itself and a
  model of the rules for the opponent; take the action that won most. It plans on `LeanUno`,
  a small model of RLCard 1.2's two-player rules (tested against RLCard move by move), since
  copying RLCard's game per rollout is ~100x slower. The game itself is RLCard's.

    python -m experiments.uno_reference --player search --rollouts 50 --games 3000 \\
        --out bench/results/uno-reference-search.json

Payoff per game is +1 won / -1 lost, seats alternating; ± is the 95% CI half-width.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from croupier.games.base import rules_seeded
from croupier.stats import ci95

COLORS = "rgby"
_NUMBERS = [str(i) for i in range(1, 10)]
_EXTRA_TURN = ("skip", "draw_2")  # two players: the same player moves again
_ACTIONS = ("skip", "reverse", "draw_2")
_WILDS = ("wild", "wild_draw_4")
# RLCard's deck: one 0 and two of every other coloured card per colour, four of each wild. A
# wild's colour in a hand or the pile means nothing; the model writes every wild as red.
DECK: tuple[str, ...] = tuple(
    [f"{c}-0" for c in COLORS]
    + [f"{c}-{t}" for c in COLORS for t in (*_NUMBERS, *_ACTIONS) for _ in range(2)]
    + ["r-wild"] * 4
    + ["r-wild_draw_4"] * 4
)
MAX_MOVES = 2_000  # a game longer than this (never seen) counts as a draw


def _plain(card: str) -> str:
    return "r-" + card[2:] if card[2:] in _WILDS else card


class LeanUno:
    """Two-player UNO by RLCard 1.2's rules (`rlcard/games/uno/round.py`), for rollouts:
    who holds what, the pile, the colour and trait in force, whose turn."""

    __slots__ = ("hands", "deck", "pile", "color", "trait", "turn", "winner", "rng")

    def __init__(
        self,
        hands: list[list[str]],
        deck: list[str],
        pile: list[str],
        color: str,
        trait: str,
        turn: int,
        rng: random.Random,
    ):
        self.hands, self.deck, self.pile = hands, deck, pile
        self.color, self.trait, self.turn = color, trait, turn
        self.winner: int | None = None
        self.rng = rng

    def copy(self) -> LeanUno:
        return LeanUno(
            [list(self.hands[0]), list(self.hands[1])],
            list(self.deck),
            list(self.pile),
            self.color,
            self.trait,
            self.turn,
            self.rng,
        )

    def legal(self) -> list[str]:
        """RLCard's legal actions, each once (RLCard lists a card once per copy held)."""
        playable: set[str] = set()
        wild = wild_draw_4 = False
        on_wild = self.trait in _WILDS
        for card in self.hands[self.turn]:
            trait = card[2:]
            if trait == "wild_draw_4":
                wild_draw_4 = True
            elif trait == "wild":
                wild = True
            elif card[0] == self.color or (not on_wild and trait == self.trait):
                playable.add(card)
        legal = sorted(playable)
        if wild:
            legal += [f"{c}-wild" for c in COLORS]
        if not legal and wild_draw_4:  # a wild draw-4 only when nothing else is legal
            legal = [f"{c}-wild_draw_4" for c in COLORS]
        return legal or ["draw"]

    def step(self, action: str) -> None:
        me = self.turn
        if action == "draw":
            self._draw()
            return
        color, trait = action[0], action[2:]
        hand = self.hands[me]
        hand.remove(_plain(action))
        self.pile.append(_plain(action))
        if not hand:
            self.winner = me  # RLCard still applies the card: so does the model
        self.color, self.trait = color, trait
        self._effect(trait)

    def _draw(self) -> None:
        # RLCard: a drawn wild is played at once in a random colour (a drawn wild draw-4
        # makes nobody draw); a drawn card of the colour in force is played at once; any
        # other drawn card is kept. The turn passes, unless the played card says otherwise.
        me = self.turn
        if not self.deck:
            self._reshuffle()
        card = self.deck.pop()
        trait = card[2:]
        if trait in _WILDS:
            self.color, self.trait = self.rng.choice(COLORS), trait
            self.pile.append(card)
            self.turn = 1 - me
        elif card[0] == self.color:
            self.pile.append(card)
            self.trait = trait
            self._effect(trait)
        else:
            self.hands[me].append(card)
            self.turn = 1 - me

    def _effect(self, trait: str) -> None:
        me, other = self.turn, 1 - self.turn
        if trait == "draw_2":
            self._give(other, 2)
        elif trait == "wild_draw_4":
            self._give(other, 4)
        self.turn = me if trait in (*_EXTRA_TURN, "wild_draw_4") else other

    def _give(self, seat: int, n: int) -> None:
        if len(self.deck) < n:  # RLCard reshuffles once, before dealing
            self._reshuffle()
        for _ in range(min(n, len(self.deck))):
            self.hands[seat].append(self.deck.pop())

    def _reshuffle(self) -> None:
        self.deck.extend(self.pile)
        self.pile = []
        self.rng.shuffle(self.deck)


def opponent_lacks(state: dict[str, Any]) -> set[str]:
    """Colours the opponent drew facing since it last played a coloured card (it had none)."""
    me, lacks = state["current_player"], set()
    for seat, action, faced in reversed(state.get("moves", [])):
        if seat == me:
            continue
        if action == "draw":
            lacks.add(faced)
        elif action[2:] not in _WILDS:
            break
    return lacks


def heuristic_move(hand: list[str], legal: list[str], lacks: set[str]) -> str:
    if len(set(legal)) == 1:
        return legal[0]
    held = Counter(c[0] for c in hand if c[2:] not in _WILDS)
    plain = [a for a in legal if a[2:] not in _WILDS]
    if plain:
        return max(
            plain,
            key=lambda a: (
                (10 if a[2:] in _EXTRA_TURN else 0) + held[a[0]] + (5 if a[0] in lacks else 0)
            ),
        )
    return max(legal, key=lambda a: held[a[0]] + (3 if a[0] in lacks and held[a[0]] else 0))


def rules_model_move(game: LeanUno, legal: list[str]) -> str:
    """`uno-rule-v1` as the rollouts play it: a wild draw-4 in the colour held most, else a
    random legal card, wilds only when nothing else is legal."""
    if legal == ["draw"]:
        return "draw"
    if legal[0][2:] == "wild_draw_4":
        held = Counter(c[0] for c in game.hands[game.turn] if c[2:] not in _WILDS)
        if not held:
            return game.rng.choice(legal)
        return max(held, key=lambda c: held[c]) + "-wild_draw_4"
    plain = [a for a in legal if a[2:] not in _WILDS]
    return game.rng.choice(plain or legal)


def playout(game: LeanUno, me: int, lacks: set[str]) -> float:
    for _ in range(MAX_MOVES):
        if game.winner is not None:
            return 1.0 if game.winner == me else -1.0
        legal = game.legal()
        if game.turn == me:
            action = heuristic_move(game.hands[me], legal, lacks)
        else:
            action = rules_model_move(game, legal)
            if action == "draw":
                lacks = {game.color}
            elif action[2:] not in _WILDS:
                lacks = set()
        game.step(action)
    return 0.0


def from_state(state: dict[str, Any], rng: random.Random) -> LeanUno:
    """One deal consistent with what the state shows: the unseen cards dealt at random."""
    me = state["current_player"]
    hand = [_plain(c) for c in state["hand"]]
    pile = [_plain(c) for c in state["played_cards"]]
    unseen = Counter(DECK)
    unseen.subtract(hand)
    unseen.subtract(pile)
    cards = [c for c, n in unseen.items() for _ in range(max(n, 0))]
    rng.shuffle(cards)
    n_opp = state["num_cards"][1 - me]
    hands = [hand, cards[:n_opp]] if me == 0 else [cards[:n_opp], hand]
    target = state["target"]
    return LeanUno(hands, cards[n_opp:], pile, state.get("color", target[0]), target[2:], me, rng)


def search_move(state: dict[str, Any], rollouts: int, rng: random.Random) -> str:
    legal = sorted(set(state["legal_actions"]))
    if len(legal) == 1:
        return legal[0]
    me, lacks = state["current_player"], opponent_lacks(state)
    wins: Counter[str] = Counter()
    for _ in range(rollouts):
        deal = from_state(state, rng)
        seed = rng.random()  # the same future for every action (less noise between them)
        for action in legal:
            game = deal.copy()
            game.rng = random.Random(seed)
            game.step(action)
            wins[action] += playout(game, me, lacks)
    return max(legal, key=lambda a: wins[a])


def make_player(name: str, rollouts: int, rng: random.Random) -> Callable[[dict[str, Any]], str]:
    if name == "random":
        return lambda s: rng.choice(s["legal_actions"])
    if name == "heuristic":
        return lambda s: heuristic_move(s["hand"], s["legal_actions"], opponent_lacks(s))
    if name == "search":
        return lambda s: search_move(s, rollouts, rng)
    raise ValueError(f"unknown player {name!r}: random, heuristic or search")


def play_vs_rules(player: str, games: int, seed: int = 0, rollouts: int = 50) -> dict[str, Any]:
    """`player` against `uno-rule-v1` on croupier's UNO table, seats alternating."""
    from croupier.engine.rlcard_games import RLCardTable
    from croupier.games.registry import load_adapter

    table, rules = RLCardTable("uno"), load_adapter("uno").rules()
    assert rules is not None
    rng = random.Random(seed)
    move = make_player(player, rollouts, rng)
    payoffs, t0 = [], time.monotonic()
    with rules_seeded(seed):  # uno-rule-v1's own draws: the same games for every player
        for g in range(games):
            me = g % 2
            table.reset(seed=seed * 1_000_003 + g)
            for _ in range(MAX_MOVES):
                if table.is_over():
                    break
                seat = table.current_player()
                state = table.state(seat)
                table.step(move(state) if seat == me else rules(state))
            payoffs.append(table.payoffs()[me] if table.is_over() else 0.0)
    x = np.asarray(payoffs)
    return {
        "player": player,
        "rollouts": rollouts if player == "search" else None,
        "games": games,
        "seed": seed,
        "mean": float(x.mean()),
        "ci95": float(ci95(float(x.std(ddof=1)), games)),
        "seconds": time.monotonic() - t0,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--player", default="heuristic", choices=["random", "heuristic", "search"])
    p.add_argument("--games", type=int, default=4000)
    p.add_argument("--rollouts", type=int, default=50, help="search: rollouts per action")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args(argv)
    result = play_vs_rules(a.player, a.games, a.seed, a.rollouts)
    print(
        f"{a.player} vs uno-rule-v1: {result['mean']:+.3f} ± {result['ci95']:.3f} per game "
        f"({a.games} games, {result['seconds']:.0f} s)",
        flush=True,
    )
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
