"""Limit hold'em as a studio's engine would hand it to croupier: RLCard's game, its raw state
for the seat to act with the seat and the moves so far added (`Simulator`)."""

from __future__ import annotations

import random
from typing import Any

import rlcard
from rlcard.games.base import Card

from croupier.engine.rlcard_games import to_json
from croupier.games.simulator import Simulator
from examples.limit_holdem.adapter import GAME

# RLCard's cards by name ("SA"): never changed by its game, so one of each serves every world.
CARDS = {card: Card(card[0], card[1]) for card in GAME.deck.cards}


class LimitHoldemSimulator(Simulator):
    name = "limit-holdem"
    adapter = "examples.limit_holdem.adapter:LimitHoldem"

    def __init__(self) -> None:
        self.env = rlcard.make("limit-holdem")
        self.moves: list[list[Any]] = []

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self.env.seed(seed)
        self.env.game.init_game()
        self.moves = []

    def resample(self, state: dict[str, Any], rng: random.Random) -> None:
        """The other seat's two cards dealt from what this seat cannot see
        (`GAME.deal_unseen`), the rest the stock the board comes from; then RLCard's game
        dealt so and the hand replayed from the state's moves (it lists every move). The
        small blind is the first to act (RLCard's two seats): the first move's seat."""
        world = GAME.deal_unseen(state, rng)
        game, moves = self.env.game, state["moves"]
        game.init_game()
        small = moves[0][0] if moves else world.seat
        for seat, player in enumerate(game.players):
            player.hand = [CARDS[c] for c in world.hands[seat]]
            player.in_chips = game.small_blind if seat == small else game.big_blind
        board = [CARDS[c] for c in reversed(state["public_cards"])]  # dealt again, in order
        game.dealer.deck = [CARDS[c] for c in world.rest] + board
        game.game_pointer = small
        game.round.start_new_round(game_pointer=small, raised=[p.in_chips for p in game.players])
        self.moves = []
        for _, action in moves:
            self.step(action)

    def current_player(self) -> int:
        return int(self.env.game.get_player_id())

    def state(self, seat: int) -> dict[str, Any]:
        state = to_json(self.env.game.get_state(seat))
        state["seat"] = seat
        state["moves"] = [list(m) for m in self.moves]
        return state

    def step(self, action: Any) -> None:
        legal = [str(a) for a in self.env.game.get_legal_actions()]
        if self.is_over() or action not in legal:
            raise ValueError(f"illegal action {action!r}; legal: {legal}")
        self.moves.append([self.current_player(), action])
        self.env.game.step(action)

    def is_over(self) -> bool:
        return bool(self.env.game.is_over())

    def payoffs(self) -> list[float]:
        return [float(p) for p in self.env.game.get_payoffs()]
