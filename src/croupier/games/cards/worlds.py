"""Where the cards a seat cannot see lie, and dealing them: worlds consistent with a seat's
view, for search (`Simulator.resample`; `croupier.games.cards`).

A declaration says it in one optional field, `CardGame.unseen` (an `Unseen`): how many cards
each other seat holds (a `SeatNumbers` zone that counts them, or the number dealt less what the
seat has played), and, where the state says it, which pile holds exactly the unseen cards or
which histories list cards gone for good. `CardGame.deal_unseen(state, rng)` then deals the
cards the seat to act cannot see at random: each other seat's hand with its count, every card
left over in `World.rest` (the stock, buried cards, cards played before the history begins).
A studio's simulator only accepts the dealt world (docs/your-game.md, "Worlds for search").

What the seat sees: the deck's copies less its hand and every `counted` zone (piles, seat
piles, a counted top card); a `gone` history's cards count too, a card as many times as the
most of it that the counted zones together or that history show (a card of a one-copy deck
either lies in a pile or was played: the two overlap, they do not add up).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from croupier.games.base import InvalidState
from croupier.games.cards.deck import Deck
from croupier.games.cards.state import Parsed
from croupier.games.cards.zones import History, Pile, SeatNumbers, SeatPiles, Zone


class Dealer(Protocol):
    """What dealing reads of a declared game (`CardGame` is one): its declaration, the
    fields of its hand, its seat and its `counted` zones (each with whether it is per seat),
    and its parse. Named here, not imported from `game.py`, which imports this module."""

    name: str
    deck: Deck
    zones: tuple[Zone, ...]
    players: int
    unseen: Unseen | None

    @property
    def hand_field(self) -> str | None: ...
    @property
    def seat_field(self) -> str | None: ...
    @property
    def counted(self) -> tuple[tuple[str, bool], ...]: ...
    def parse(self, state: Any) -> Parsed: ...


@dataclass(frozen=True)
class Unseen:
    """Where a declared game's hidden cards lie (`CardGame.unseen`).

    `hands`: each seat's hand size, a `SeatNumbers` field that counts it ("num_cards"), or
    the number each seat was dealt (hold'em: 2; Hearts: 13), less, with `played`, the cards
    that seat has played by a `SeatPiles` field (each seat's cards) or a `History` field
    (every move since the deal: its `max_moves` must cover a whole hand).
    `pool`: a `Pile` field holding exactly the cards the seat cannot see (doudizhu's
    `others_hand`): dealt from it, not from the deck less what the seat sees.
    `gone`: `History` fields whose moves' cards left play for good (a shedding game's plays):
    seen, never dealt. Cards played before the history's first move are not in it: they go
    to `World.rest` with the stock."""

    hands: str | int
    played: str | None = None
    pool: str | None = None
    gone: tuple[str, ...] = ()

    def check(self, game: Dealer) -> None:
        """ValueError naming the field when a field is missing or of the wrong zone."""
        zones = {z.field: z for z in game.zones}

        def need(field: str, kinds: tuple[type, ...], what: str) -> None:
            if not isinstance(zones.get(field), kinds):
                kind = kinds[0].__name__
                raise ValueError(f"{game.name}: unseen {what}={field!r} must name a {kind}")

        if isinstance(self.hands, str):
            need(self.hands, (SeatNumbers,), "hands")
            if self.played is not None:
                raise ValueError(f"{game.name}: unseen played= goes with a number of cards dealt")
        elif type(self.hands) is not int or self.hands < 0:
            raise ValueError(f"{game.name}: unseen hands= is a SeatNumbers field or a count")
        if self.played is not None:
            need(self.played, (SeatPiles, History), "played")
        if self.pool is not None:
            need(self.pool, (Pile,), "pool")
        for field in self.gone:
            need(field, (History,), "gone")
        if game.hand_field is None or game.seat_field is None:
            raise ValueError(f"{game.name}: dealing worlds needs a Hand and a Seat zone")


class World(NamedTuple):
    """A deal of what one seat cannot see (`CardGame.deal_unseen`), card names as the deck
    writes them: `hands[s]`, seat s's hand (the seat to act's as its state lists it; each
    other seat's dealt, in the deck's order); `rest`: every other unseen card, in random
    order (the stock: draw from either end; buried cards; cards played before the history
    begins)."""

    seat: int
    hands: list[list[str]]
    rest: list[str]


class Seen(NamedTuple):
    """What a state leaves unseen: the seat to act, the cards it cannot see (deck indices),
    each seat's hand size (`read_unseen`)."""

    seat: int
    cards: list[int]
    counts: list[int]


def read_unseen(game: Dealer, state: Any) -> Seen:
    """What `state` leaves unseen (see the module); ValueError for a game that does not say
    where its hidden cards lie. (A search deals many worlds from one state: `CardGame.
    deal_unseen` keeps the last state's.)"""
    unseen = game.unseen
    if unseen is None:
        raise ValueError(
            f"{game.name} does not say where its hidden cards lie: declare CardGame(unseen="
            "Unseen(hands=...)) (docs/your-game.md, 'Worlds for search')"
        )
    return Seen(*_unseen(game, unseen, state))


def deal_unseen(game: Dealer, seen: Seen, state: Any, rng: random.Random) -> World:
    """One world consistent with `state` (see the module), from what it leaves unseen
    (`read_unseen`): InvalidState when the state's counts cannot be dealt from those cards."""
    seat, cards, counts = seen
    n = game.players
    others = [s for s in range(n) if s != seat]
    need = sum(counts[s] for s in others)
    if need > len(cards):
        raise InvalidState(
            f"the other seats hold {need} cards but the state leaves {len(cards)} unseen"
        )
    # A random order by sorting on random keys: ~4x cheaper than `rng.shuffle`'s Python
    # loop (96 cards: ~11 against ~44 us), as uniform.
    draw = rng.random
    cards = sorted(cards, key=lambda _: draw())
    names = game.deck.cards
    hands: list[list[str]] = [[] for _ in range(n)]
    at = 0
    for s in others:
        hands[s] = [names[i] for i in sorted(cards[at : at + counts[s]])]
        at += counts[s]
    own = state[game.hand_field]
    hands[seat] = list(own)  # (a `joined` string: a card a character)
    return World(seat, hands, [names[i] for i in cards[at:]])


def _unseen(game: Dealer, unseen: Unseen, state: Any) -> tuple[int, list[int], list[int]]:
    """(the seat to act, the cards it cannot see as deck indices, each seat's hand size)."""
    p = game.parse(state)
    values, n = p.values, game.players
    if unseen.pool is not None:
        left = values[unseen.pool].counts.tolist()
    else:
        seen = p.hand * 0
        for field, per_seat in game.counted:
            for cards in values[field] if per_seat else (values[field],):
                seen = seen + cards.counts
        seen = seen.tolist()
        for field in unseen.gone:
            out = [0] * game.deck.size
            for move in values[field].moves:
                for i in move.cards:
                    out[i] += 1
            seen = [max(a, b) for a, b in zip(seen, out, strict=True)]
        left = [max(c - s, 0) for c, s in zip(game.deck.card_copies, seen, strict=True)]
    cards = [i for i, c in enumerate(left) for _ in range(c)]
    return p.seat, cards, _hand_sizes(unseen, values, n)


def _hand_sizes(unseen: Unseen, values: dict[str, Any], n: int) -> list[int]:
    if isinstance(unseen.hands, str):
        return [int(x) for x in values[unseen.hands]]
    played = [0] * n
    if unseen.played is not None:
        value = values[unseen.played]
        if isinstance(value, list):  # SeatPiles: each seat's cards
            played = [len(cards.ids) for cards in value]
        else:  # History: every move since the deal
            for who, move in zip(value.seats, value.moves, strict=True):
                played[who] += len(move.cards)
    return [max(unseen.hands - k, 0) for k in played]
