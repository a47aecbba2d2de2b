"""Crazy eights, two seats, as OpenSpiel plays it (`pip install 'croupier[games]'`: the
`open-spiel` package), wrapped from scratch as a studio wraps its engine: the hands are
followed from OpenSpiel's deals, draws and plays; chance is drawn from the table's seed.

OpenSpiel's rules: 7 cards each; play a card of the suit in force or of the top card's rank,
or an 8 and then name a suit; else draw (up to 5 a turn), then pass. The hand ends when a
seat is out, at the 100th card played, or at three passes in a row with the stock empty;
each seat then pays the points it holds (8: 50, jack to ace: 10, any other card OpenSpiel's
number for it plus 2: `position.py`), the first out nothing. Payoffs are OpenSpiel's / 100.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, NamedTuple

from croupier.games.simulator import Simulator
from examples.crazy_eights.adapter import GAME, SUITS
from examples.crazy_eights.position import (
    MOVES_SENT,
    RANKS,
    EightsPosition,
    goes_on,
)

SCALE = 100.0  # OpenSpiel's points per payoff unit: a hand of points is ~0.5 to 4
# Deals of the opponent's hand tried against what its earlier draws and passes say before one
# is kept as it comes (`_hand_drawn_as_seen`).
HAND_TRIES = 20
ORDER = {card: i for i, card in enumerate(GAME.deck.cards)}  # a dealt hand's order


def _spiel() -> Any:
    try:
        import pyspiel  # the optional `games` extra
    except ImportError:
        raise ValueError("crazy eights is OpenSpiel's: pip install 'croupier[games]'") from None
    return pyspiel.load_game("crazy_eights", {"players": 2})


class CrazyEightsSimulator(Simulator):
    name = "crazy-eights"
    adapter = "examples.crazy_eights.adapter:CrazyEights"
    zero_sum = False  # a game stopped at 100 turns costs both seats

    def __init__(self) -> None:
        self.game, self.rng = _spiel(), random.Random()
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self.rng.seed(seed)
        self.s = self.game.new_initial_state()
        self.hands: list[list[str]] = [[], []]
        self.top: str | None = None
        self.pile: list[str] = []  # the discard pile under the top card
        self.moves: list[list[Any]] = []
        self.dealer, self.dealt, self.drawer = 0, 0, -1
        self._position: EightsPosition | None = None  # a world `resample` set plays on there
        self._chance()

    def _chance(self) -> None:
        """Deal, as OpenSpiel asks, following where each card goes."""
        while self.s.is_chance_node():
            action = self.rng.choice(self.s.chance_outcomes())[0]
            text = self.s.action_to_string(action)
            if text.startswith("Decide Player"):
                self.dealer = int(text.split()[2])
            elif self.drawer >= 0:
                self.hands[self.drawer].append(text[5:])
            elif self.dealt < 14:  # 7 each, from the seat after the dealer
                self.hands[(self.dealer + 1 + self.dealt) % 2].append(text[5:])
                self.dealt += 1
            else:
                self.top = text[5:]
            self.s.apply_action(action)
        self.drawer = -1

    def resample(self, state: dict[str, Any], rng: random.Random) -> None:
        """The opponent's hand dealt from what this seat cannot see (`GAME.deal_unseen`: not
        in its hand, on the pile or on top), the stock the rest in random order, played on by
        `EightsPosition` (OpenSpiel's state cannot be set from a position). The pile says how
        many cards were played (a card each, the first turned up under them: the 100th ends
        the hand); this turn's draws and the passes in a row are read from the moves."""
        world = GAME.deal_unseen(state, rng)
        moves, seat = [list(m) for m in state["moves"]], world.seat
        other = 1 - seat
        pool = world.hands[other] + world.rest
        hand = _hand_drawn_as_seen(pool, len(world.hands[other]), shown(moves, other), rng)
        if hand is not None:  # the rest stays in random order: the stock is drawn from it
            kept = set(hand)
            world.hands[other][:] = sorted(hand, key=ORDER.__getitem__)
            world.rest[:] = [c for c in pool if c not in kept]
            rng.shuffle(world.rest)
        draws = 0
        for who, move in reversed(moves):
            if who != seat or move != "draw":
                break
            draws += 1
        passes = 0
        for _, move in reversed(moves if not world.rest else []):
            if move != "pass":
                break
            passes += 1
        self._position = EightsPosition(
            world.hands, world.rest, state["top"], state["suit"], seat,
            state["phase"] == "nominate", draws, passes, moves, list(state["played"]),
        )  # fmt: skip

    def current_player(self) -> int:
        if self._position is not None:
            return self._position.current_player()
        return int(self.s.current_player())

    def _legal(self) -> dict[str, int]:
        """The legal moves by name: "play C4", "draw", "pass", "suit:H" (name a suit)."""
        out = {}
        for a in self.s.legal_actions():
            text = self.s.action_to_string(a)
            if text.startswith("Play "):
                out["play " + text[5:]] = a
            else:
                out["suit:" + text[-1] if text.startswith("Nominate") else text.lower()] = a
        return out

    def state(self, seat: int) -> dict[str, Any]:
        if self._position is not None:
            return self._position.state(seat)
        hands = self.hands
        suit = self.s.observation_string(seat).split("Previous suit: ")[1][0]
        legal = list(self._legal())
        return {"seat": seat, "hand": list(hands[seat]), "top": self.top,
                "played": list(self.pile), "suit": suit,
                "phase": "nominate" if legal[0].startswith("suit") else "play",
                "num_cards": [len(h) for h in hands], "moves": self.moves[-MOVES_SENT:],
                "legal_actions": legal}  # fmt: skip

    def step(self, action: Any) -> None:
        if self._position is not None:
            self._position.step(action)
            return
        legal = self._legal()
        if self.is_over() or action not in legal:
            raise ValueError(f"illegal action {action!r}; legal: {list(legal)}")
        seat = self.current_player()
        self.moves.append([seat, action])
        if action.startswith("play "):
            self.pile.append(self.top)
            self.top = action[5:]
            self.hands[seat].remove(self.top)
        self.drawer = seat if action == "draw" else -1
        self.s.apply_action(legal[action])
        self._chance()

    def is_over(self) -> bool:
        if self._position is not None:
            return self._position.is_over()
        return bool(self.s.is_terminal())

    def payoffs(self) -> list[float]:
        returns = self._position.returns() if self._position is not None else self.s.returns()
        return [r / SCALE for r in returns]


class Shown(NamedTuple):
    """What one of the opponent's moves showed of the hand it held then, as the bot plays:
    a draw or a pass, that no card went on (`rank`, `suit`: the top card's rank and the suit
    in force then); an 8 played (`plain`), that no card but an 8 went. `late`: its draws
    since (cards it may hold now that it did not hold then)."""

    rank: str
    suit: str
    plain: bool
    late: int

    def fits(self, card: str) -> bool:
        """Whether the hand held then may have held `card`."""
        return (self.plain and card[1] == "8") or not goes_on(card, self.rank, self.suit)


class Named(NamedTuple):
    """A suit the opponent named: the suit it then held most of, but for 8s (the first in
    clubs, diamonds, hearts, spades order of the most held); `played`: the cards it played
    since, held then; `late`: its draws since."""

    suit: str
    played: list[str]
    late: int

    def fits(self, hand: list[str]) -> bool:
        held = Counter(c[0] for c in (*hand, *self.played) if c[1] != "8")
        return max(SUITS, key=held.__getitem__) == self.suit


class Chose(NamedTuple):
    """A card not an 8 the opponent played (`card`, on `rank` and `suit` in force): of the
    cards not 8s that went then, the one of the suit it held most of, the highest of those;
    `played`: the cards it played since, held then; `late`: its draws since."""

    card: str
    rank: str
    suit: str
    played: list[str]
    late: int

    def fits(self, hand: list[str]) -> bool:
        held = [*hand, *self.played, self.card]  # the hand it chose from
        suits = Counter(c[0] for c in held if c[1] != "8")

        def order(card: str) -> tuple[int, int]:
            return suits[card[0]], RANKS.index(card[1])

        went = (c for c in held if c[1] != "8" and goes_on(c, self.rank, self.suit))
        return all(order(c) <= order(self.card) for c in went)


class Seen(NamedTuple):
    """What the opponent's moves listed showed (`shown`), each kind in order."""

    moves: list[Shown]
    named: list[Named]
    chose: list[Chose]


def shown(moves: list[list[Any]], seat: int) -> Seen:
    """What `seat`'s moves listed showed of its hand (see `Shown`, `Named`, `Chose`), in
    order. Moves before the first play listed are left out (the top card then is not in the
    moves)."""
    top = suit = ""
    out: list[Shown] = []
    named: list[Named] = []
    chose: list[Chose] = []
    draws = 0  # `seat`'s so far: each one's `late` is the draws after it
    for who, move in moves:
        if move.startswith("play "):
            if who == seat:
                for x in (*named, *chose):
                    x.played.append(move[5:])
                if top and move[6] == "8":
                    out.append(Shown(top, suit, True, draws))
                elif top:
                    chose.append(Chose(move[5:], top, suit, [], draws))
            top, suit = move[6], move[5]
        elif move.startswith("suit:"):
            suit = move[5]
            if who == seat:
                named.append(Named(suit, [], draws))
        elif who == seat:  # a draw or a pass (a draw's own card comes after what it showed)
            draws += move == "draw"
            if top:
                out.append(Shown(top, suit, False, draws))
    # Each recorded `seat`'s draws up to it: now the draws since.
    return Seen(*([x._replace(late=draws - x.late) for x in kind] for kind in (out, named, chose)))


def _hand_drawn_as_seen(
    pool: list[str], n: int, seen: Seen, rng: random.Random
) -> list[str] | None:
    """The opponent's `n` cards from `pool` (what the seat cannot see, in random order) as
    its moves showed (`shown`): with no draw since a move, every card it holds was held then
    (a card drawn later in that turn went on nothing either, or was played), so each card
    dealt fits that move; with draws since, at least `n` less them do; the suit it named
    and the card it chose with no draw since are what its hand and its plays since would
    have the bot name and choose. None: nothing shown, or too few cards fit (an opponent that
    is not the bot): deal as dealt."""
    moves, named, chose = seen
    if not moves and not named and not chose:
        return None
    exact = [x for x in moves if not x.late]
    fit = [c for c in pool if all(x.fits(c) for x in exact)]
    if len(fit) < n:
        return None
    earlier = [x for x in moves if x.late]
    whole = [x for x in (*named, *chose) if not x.late]  # checked on the whole hand
    for _ in range(HAND_TRIES):  # bounded: the last deal tried is kept
        hand = rng.sample(fit, n)
        if all(sum(map(x.fits, hand)) >= n - x.late for x in earlier) and all(
            x.fits(hand) for x in whole
        ):
            break
    return hand
