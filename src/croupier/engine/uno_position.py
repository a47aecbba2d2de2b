"""RLCard's two-seat UNO from any position, in plain Python: what `UnoTable.resample` plays
on (`engine/rlcard_games.py`), the same rules and the same state JSON as RLCard's game
(`tests/test_world_models.py` holds them together move by move).

Why not RLCard's own game: a world needs a table set from a seat's view many times a
decision, then played out. RLCard's UNO took ~34 us of CPU a move (its state built, then made
JSON), this 6.7: a world resampled and played out by random moves in ~0.3 ms, ~640 in a
search's 200 ms (`croupier bench worlds`, docs/your-game.md "Worlds for search").

RLCard 1.2's rules, as its `UnoRound` plays them: a card of the colour in force or of the
target's trait (a wild's trait matches nothing), a wild any time, a wild draw-4 only when
nothing else goes, else draw. A skip, a draw-2 and a wild draw-4 give the same seat another
turn (two seats); a reverse does not. A drawn card of the colour in force is played at once
(a drawn action card acts), a drawn wild is played at once in a random colour (a wild draw-4
drawn so makes nobody draw), any other drawn card is kept. An empty draw pile takes the
played cards back, shuffled. The first seat out of cards wins (+1, the other -1).
"""

from __future__ import annotations

import random
from typing import Any

COLORS = ("r", "g", "b", "y")
WILDS = ("wild", "wild_draw_4")
# RLCard's moves a state sends (`UnoTable`: its latest 16).
MOVES_SENT = 16


class Wild:
    """A wild card: the colour printed on it (what RLCard's `target` shows once it is played)
    and the colour it last took (what a hand and the played cards show)."""

    __slots__ = ("printed", "color", "trait")

    def __init__(self, printed: str, color: str, trait: str):
        self.printed, self.color, self.trait = printed, color, trait


Card = str | Wild  # a coloured card is its name ("r-7"); a wild, an object that changes colour


def card(name: str) -> Card:
    """A card as a state writes it ("r-7"; "b-wild": a wild last in blue, printed blue)."""
    trait = name[2:]
    return Wild(name[0], name[0], trait) if trait in WILDS else name


def look(c: Card) -> str:
    return c if type(c) is str else f"{c.color}-{c.trait}"  # type: ignore[union-attr]


class UnoPosition:
    """A hand of RLCard's two-seat UNO from a position: `hands` (each seat's cards, in the
    order held), `deck` (the draw pile, drawn from its end), `played` (the played cards since
    the last reshuffle, oldest first), `target` (the card to match: also the newest of
    `played`, or in the deck after a reshuffle), `color` (the colour in force), `turn`,
    `moves` (the latest [seat, action, colour faced], as the state lists them); `rng` draws a
    drawn wild's colour and shuffles the played cards back."""

    __slots__ = ("hands", "deck", "played", "target", "color", "turn", "moves", "winner", "rng")

    def __init__(
        self,
        hands: list[list[Card]],
        deck: list[Card],
        played: list[Card],
        target: Card,
        color: str,
        turn: int,
        moves: list[list[Any]],
        rng: random.Random,
    ):
        self.hands, self.deck, self.played, self.target = hands, deck, played, target
        self.color, self.turn, self.moves, self.rng = color, turn, moves, rng
        self.winner: int | None = None

    # --- the Simulator's side: what UnoTable hands on ------------------------------------------

    def current_player(self) -> int:
        return self.turn

    def is_over(self) -> bool:
        return self.winner is not None

    def payoffs(self) -> list[float]:
        if self.winner is None:
            return [0.0, 0.0]
        return [1.0, -1.0] if self.winner == 0 else [-1.0, 1.0]

    def legal_actions(self, seat: int | None = None) -> list[str]:
        """RLCard's order: the hand's, a wild's four colours where the first wild is held, a
        coloured card once per copy; a wild draw-4's four only when nothing else goes."""
        hand = self.hands[self.turn if seat is None else seat]
        target = self.target
        color = self.color
        trait = None if type(target) is not str else target[2:]  # a wild matches no trait
        legal: list[str] = []
        wild = four = False
        for c in hand:
            if type(c) is str:
                if c[0] == color or c[2:] == trait:
                    legal.append(c)
            elif c.trait == "wild":  # type: ignore[union-attr]
                if not wild:
                    wild = True
                    legal.extend(f"{k}-wild" for k in COLORS)
            else:
                four = True
        if not legal and four:
            return [f"{k}-wild_draw_4" for k in COLORS]
        return legal or ["draw"]

    def state(self, seat: int) -> dict[str, Any]:
        """The JSON `UnoTable.state` sends (RLCard's raw state, the colour and moves added)."""
        target = self.target
        return {
            "hand": [look(c) for c in self.hands[seat]],
            "target": target if type(target) is str else f"{target.printed}-{target.trait}",
            "played_cards": [look(c) for c in self.played],
            "legal_actions": self.legal_actions(seat),
            "num_cards": [len(self.hands[0]), len(self.hands[1])],
            "num_players": 2,
            "current_player": self.turn,
            "color": self.color,
            "moves": [list(m) for m in self.moves],
        }

    def step(self, action: str) -> None:
        if self.winner is not None or action not in self.legal_actions():
            raise ValueError(f"illegal action {action!r}; legal: {self.legal_actions()}")
        me = self.turn
        self.moves.append([me, action, self.color])
        if len(self.moves) > MOVES_SENT:
            del self.moves[0]
        if action == "draw":
            self._draw(me)
            return
        color, trait = action[0], action[2:]
        hand = self.hands[me]
        if trait in WILDS:  # the first wild of that trait held takes the colour named
            at = next(i for i, c in enumerate(hand) if type(c) is not str and c.trait == trait)
            hand[at].color = color  # type: ignore[union-attr]
        else:
            at = hand.index(action)
        played = hand.pop(at)
        if not hand:
            self.winner = me  # RLCard still carries the card out: so does this
        self.played.append(played)
        if trait in WILDS or not trait.isdigit():
            self._act(played, trait, color)
        else:
            self.target, self.color, self.turn = played, color, 1 - me

    def _act(self, played: Card, trait: str, color: str) -> None:
        """An action card or a wild played (or drawn): its effect, then it is the target."""
        me = self.turn
        if trait == "draw_2":
            self._give(1 - me, 2)
        elif trait == "wild_draw_4":
            self._give(1 - me, 4)
        # skip, draw-2, wild draw-4: the same seat again (two seats); reverse, wild: the other
        self.turn = me if trait in ("skip", "draw_2", "wild_draw_4") else 1 - me
        self.target, self.color = played, color

    def _give(self, seat: int, n: int) -> None:
        if len(self.deck) < n:  # RLCard takes the played cards back once, before dealing
            self._reshuffle()
        for _ in range(min(n, len(self.deck))):
            self.hands[seat].append(self.deck.pop())

    def _reshuffle(self) -> None:
        self.deck.extend(self.played)
        self.played = []
        self.rng.shuffle(self.deck)

    def _draw(self, me: int) -> None:
        if not self.deck:
            self._reshuffle()
        drawn = self.deck.pop()
        if type(drawn) is not str:  # a wild: played at once in a random colour, no effect
            drawn.color = self.rng.choice(COLORS)  # type: ignore[union-attr]
            self.target, self.color = drawn, drawn.color  # type: ignore[union-attr]
            self.played.append(drawn)
            self.turn = 1 - me
        elif drawn[0] == self.color:  # the colour in force: played at once
            self.played.append(drawn)
            if drawn[2:].isdigit():
                self.target, self.turn = drawn, 1 - me
            else:
                self._act(drawn, drawn[2:], drawn[0])
        else:
            self.hands[me].append(drawn)
            self.turn = 1 - me
