"""One RLCard table: deal a hand, hand out JSON states, apply raw actions: the built-in games'
`Simulator` (`games/simulator.py`).

Each table owns its own env (RLCard envs keep the hand in mutable state); under asyncio one
table is driven by one task, so no locking is needed.

A table set from a seat's view (`resample`, worlds for search) plays on in RLCard's own game
where it can be set so cheaply (Leduc: dealt, then its few moves replayed); UNO and doudizhu
play on in a plain-Python model of RLCard's rules from a position (`uno_position.py`,
`doudizhu_position.py`: RLCard's game a move cost ~34 and ~97 us of CPU there, the models
6.7 and 16, `croupier bench worlds`; the same states, move by move), until the next `reset`.
"""

from __future__ import annotations

import itertools
import random
from collections import deque
from typing import Any

import numpy as np
import rlcard
from rlcard.games.base import Card

from croupier.engine.doudizhu_position import DoudizhuPosition
from croupier.engine.uno_position import UnoPosition, Wild, card
from croupier.games.simulator import Simulator

GAMES = ("leduc-holdem", "uno", "doudizhu")
# UNO: how many of the latest moves a state carries (what a real table shows: the discard pile's
# recent cards, who drew). RLCard's raw state has neither the moves nor a recoloured wild's
# colour (its `target` keeps the wild's printed colour), so the table adds both.
UNO_MOVES_SENT = 16


def to_json(x: Any) -> Any:
    """RLCard's raw observation as plain JSON types: no numpy scalars, no tuples."""
    if isinstance(x, dict):
        return {str(k): to_json(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [to_json(v) for v in x]
    if isinstance(x, np.ndarray):
        return to_json(x.tolist())
    if isinstance(x, np.generic):  # np.int64, np.str_, np.bool_, ...
        return x.item()
    return x


class UnknownGame(ValueError):
    """A game the engine cannot play (the CLI says so in one line)."""


class RLCardTable(Simulator):
    """A single-hand-at-a-time wrapper around one RLCard env."""

    def __init__(self, game: str):
        if game not in GAMES:
            raise UnknownGame(f"unsupported game {game!r}; expected one of {GAMES}")
        self.game = self.name = self.adapter = game
        self.env = rlcard.make(game)
        self.num_players = int(self.env.num_players)
        # RLCard's doudizhu pays 1 to each seat of the winning side, 0 to the others.
        self.zero_sum = game != "doudizhu"
        self._dealt = False
        # Leduc keeps every move of the hand (at most 8); UNO its latest `UNO_MOVES_SENT`.
        self._moves: deque[list[Any]] = deque(maxlen=UNO_MOVES_SENT if game == "uno" else None)
        self._small_blind = 0
        # A world set by `resample` plays on here instead of RLCard's game (UNO, doudizhu).
        self._position: UnoPosition | DoudizhuPosition | None = None

    def reset(self, seed: int | None = None) -> None:
        """Deal a new hand; the same seed deals the same cards. Without a seed the table's
        generator goes on (re-seeding costs more than a whole leduc hand)."""
        if seed is not None:
            self.env.seed(seed)
        # The game, not the env: env.reset would also encode RLCard's observation arrays,
        # which nothing here reads (the same for env.step below).
        self.env.game.init_game()
        self._started()

    def _started(self) -> None:
        self._dealt = True
        self._position = None
        self._moves.clear()
        if self.game == "leduc-holdem":  # the small blind acts first
            self._small_blind = int(self.env.game.game_pointer)

    def current_player(self) -> int:
        if self._position is not None:
            return self._position.current_player()
        return int(self.env.get_player_id())

    def legal_actions(self) -> list[str]:
        if self._position is not None:
            return list(self._position.legal_actions())
        if self.game == "doudizhu":  # its game has no get_legal_actions: the state lists them
            return [str(a) for a in self._current_state()["actions"]]
        return [str(a) for a in self.env.game.get_legal_actions()]

    def state(self, seat: int) -> dict[str, Any]:
        if self._position is not None:
            return self._position.state(seat)
        return self.state_json(seat)

    def teams(self) -> list[list[int]]:
        if self.game == "doudizhu":  # the landlord against the two peasants; drawn per deal
            landlord = self._landlord()
            return [[landlord], [s for s in range(self.num_players) if s != landlord]]
        return super().teams()

    def _landlord(self) -> int:
        if isinstance(self._position, DoudizhuPosition):
            return self._position.landlord
        return int(self.env.game.round.landlord_id)

    def roles(self) -> list[str] | None:
        """Each seat's side in this deal (doudizhu: landlord or peasant); None: no sides."""
        if self.game != "doudizhu":
            return None
        landlord = self._landlord()
        return ["landlord" if s == landlord else "peasant" for s in range(self.num_players)]

    def _current_state(self) -> dict[str, Any]:
        """The player to act's raw state. Doudizhu's game keeps it from its last step (building
        one lists every legal move and the others' cards: in the reference engine, building
        it three times a decision and RLCard's observation arrays once were ~60% of its CPU)."""
        if self.game == "doudizhu":
            return self.env.game.state
        return self.env.game.get_state(self.current_player())

    def state_json(self, player: int) -> dict[str, Any]:
        # game.get_state is the raw observation; env.get_state would also build the obs array.
        mine = player == self.current_player()
        state = to_json(self._current_state() if mine else self.env.game.get_state(player))
        if self.game == "doudizhu":
            # croupier's engines list the legal moves as "legal_actions" (RLCard: "actions").
            state["legal_actions"] = state.pop("actions")
        if self.game == "uno":
            # Added keys only: RLCard's own keys keep their meaning for its rule agents.
            state["color"] = str(self.env.game.round.target.color)
            state["moves"] = [list(m) for m in self._moves]
        elif self.game == "leduc-holdem":
            # Added keys, as for UNO: RLCard's raw state has no betting history and no blinds
            # (its rule agents ignore these). [seat, action, betting round] per move so far.
            state["moves"] = [list(m) for m in self._moves]
            state["small_blind"] = self._small_blind
        return state

    def step(self, action_value: str) -> None:
        if self._position is not None:
            self._position.step(action_value)
            return
        # RLCard applies whatever it is given; an illegal action corrupts the hand silently.
        if not self._dealt or self.is_over():
            raise RuntimeError("no hand in progress")
        if action_value not in self.legal_actions():
            raise ValueError(f"illegal action {action_value!r}; legal: {self.legal_actions()}")
        if self.game == "uno":
            # [seat, action, the colour that seat faced]: a draw facing red says it had no red.
            color = str(self.env.game.round.target.color)
            self._moves.append([self.current_player(), action_value, color])
        elif self.game == "leduc-holdem":
            self._moves.append([self.current_player(), action_value, self.env.game.round_counter])
        self.env.game.step(action_value)

    def is_over(self) -> bool:
        if self._position is not None:
            return self._position.is_over()
        return bool(self.env.is_over())

    def payoffs(self) -> list[float]:
        if self._position is not None:
            return self._position.payoffs()
        return [float(p) for p in self.env.get_payoffs()]


# The built-in games' simulators by import path (what their adapters name: `simulator`).
# Leduc's deck (RLCard's `LeducholdemDealer`): two suits of J, Q, K.
LEDUC_CARDS = tuple(f"{suit}{rank}" for rank in "JQK" for suit in "SH")


class LeducTable(RLCardTable):
    name = adapter = "leduc-holdem"

    def __init__(self) -> None:
        super().__init__("leduc-holdem")

    def deals(self) -> list[tuple[Any, float]]:
        """(small blind's seat, seat 0's card, seat 1's card, the public card): 2 x 6 x 5 x 4
        = 240, equally likely, as RLCard deals (a shuffled deck popped for each hand, then
        the public card; the small blind drawn uniformly)."""
        deals = [
            (small_blind, *cards)
            for small_blind in range(2)
            for cards in itertools.permutations(LEDUC_CARDS, 3)
        ]
        return [(d, 1.0 / len(deals)) for d in deals]

    def deal(self, deal: Any) -> None:
        small_blind, *cards = deal
        game = self.env.game
        game.init_game()  # RLCard's own start, then its random draws replaced by `deal`
        card = {c: Card(c[0], c[1]) for c in LEDUC_CARDS}
        for seat, player in enumerate(game.players):
            player.hand = card[cards[seat]]
            player.in_chips = game.small_blind if seat == small_blind else game.big_blind
        # The public card is popped from the deck after the first round.
        game.dealer.deck = [card[c] for c in LEDUC_CARDS if c not in cards] + [card[cards[2]]]
        game.game_pointer = small_blind
        game.round.start_new_round(
            game_pointer=small_blind, raised=[p.in_chips for p in game.players]
        )
        self._started()

    def resample(self, state: dict[str, Any], rng: random.Random) -> None:
        """The other seat's card, and the public card before it shows, drawn from the four
        or five cards this seat cannot see; then RLCard's own game dealt so (`deal`) and the
        hand replayed from the state's moves (it lists every move). Nothing else is hidden."""
        seat, public = state["current_player"], state["public_card"]
        seen = (state["hand"], public)
        hidden = rng.sample([c for c in LEDUC_CARDS if c not in seen], 2)
        cards = [state["hand"], hidden[0]] if seat == 0 else [hidden[0], state["hand"]]
        self.deal((state["small_blind"], *cards, public or hidden[1]))
        for _, action, _ in state["moves"]:
            self.step(action)

    def information(self, state: dict[str, Any]) -> str:
        """`BB J | public Q | SB call, BB check / SB raise`: the seat's blind, its card's rank,
        the public card's rank, each round's moves by blind ("-": none yet). Suits never
        matter in Leduc, nor seat numbers: the blinds are drawn each hand."""
        small_blind = state["small_blind"]

        def blind(seat: int) -> str:
            return "SB" if seat == small_blind else "BB"

        rounds: list[list[str]] = [[], []]
        for seat, action, round_ in state["moves"]:
            rounds[round_].append(f"{blind(seat)} {action}")
        public = state["public_card"]
        return (
            f"{blind(state['current_player'])} {state['hand'][1]} | "
            f"public {public[1] if public else '-'} | "
            + " / ".join(", ".join(r) or "-" for r in rounds[: 1 + (public is not None)])
        )


class UnoTable(RLCardTable):
    name = adapter = "uno"

    def __init__(self) -> None:
        super().__init__("uno")

    def resample(self, state: dict[str, Any], rng: random.Random) -> None:
        """The opponent's hand and the draw pile dealt from what this seat cannot see
        (`croupier.games.uno_cards`' `GAME.deal_unseen`), played on by `UnoPosition`. Not in
        a state, so drawn: the colour printed on a wild nobody has seen (what `target`
        shows once it is drawn and played), and the order of the draw pile. A wild target
        is the newest played card, printed as `target` says."""
        from croupier.games.uno_cards import GAME  # (the games stage's; loaded on first use)

        world = GAME.deal_unseen(state, rng)
        # (A wild by its deck name, "wild": the only dealt names not led by a colour.)
        hands = [[_wild(c, rng) if c[0] == "w" else c for c in hand] for hand in world.hands]
        hands[world.seat] = [card(c) for c in state["hand"]]
        played = [card(c) for c in state["played_cards"]]
        target = played[-1] if played else card(state["target"])
        if isinstance(target, Wild):
            target.printed, target.color = state["target"][0], state["color"]
        deck = [_wild(c, rng) if c[0] == "w" else c for c in world.rest]
        moves = [list(m) for m in state.get("moves", [])]  # (optional in a state)
        self._position = UnoPosition(
            hands, deck, played, target, state["color"], world.seat, moves, rng
        )
        self._dealt = True


def _wild(name: str, rng: random.Random) -> Wild:
    """A wild the toolkit dealt ("wild", "wild_draw_4"), printed and coloured at random."""
    color = "rgby"[int(rng.random() * 4)]
    return Wild(color, color, name)


class DoudizhuTable(RLCardTable):
    name = adapter = "doudizhu"

    def __init__(self) -> None:
        super().__init__("doudizhu")

    def resample(self, state: dict[str, Any], rng: random.Random) -> None:
        """The other two hands dealt from `others_hand` by their counts
        (`croupier.games.doudizhu_cards`' `GAME.deal_unseen`), played on by
        `DoudizhuPosition`; the trace, the played cards and the landlord are the state's:
        nothing else is hidden. The legal moves are RLCard's set; a lead lists them in
        another order (RLCard's is a set's, not kept from one process to the next)."""
        from croupier.games.doudizhu_cards import GAME  # (the games stage's: first use)

        world = GAME.deal_unseen(state, rng)
        hands = ["".join(h) for h in world.hands]
        trace = [list(t) for t in state["trace"]]
        self._position = DoudizhuPosition(
            hands, trace, list(state["played_cards"]), state["seen_cards"],
            state["landlord"], world.seat,
        )  # fmt: skip
        self._dealt = True
