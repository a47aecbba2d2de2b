"""The adapters a `CardGame` declaration gives: a fixed head and scored candidates
(`croupier.games.cards`)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from croupier import stages
from croupier.games.base import CandidateAdapter, GameAdapter, InvalidState
from croupier.games.cards.game import CardGame, Parsed

# --- the adapters ------------------------------------------------------------------------------


class CardGameAdapter(GameAdapter):
    """A declared card game with a fixed action head: set `game = CardGame(...)` (and, as
    any adapter, `simulator`, `rules()`, `preset`). A slot of the head stands for the first
    legal move listed in it (`Kind.head`). `action_names`: the slots named in index order
    (`CardGame.slot_names`), what an exported head's `policy.json` lists."""

    game: ClassVar[CardGame]
    action_names: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        g = getattr(cls, "game", None)
        if g is not None:
            cls.name, cls.num_players = g.name, g.players
            cls.obs_size, cls.num_actions = g.obs_size, g.num_actions
            cls.payoff_range = g.payoff_range
            cls.action_names = g.slot_names()

    def parse(self, state: dict[str, Any]) -> Parsed:
        return self.game.parse(state)

    def encode(self, state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        p = self.game.parse(state)
        return self.game.features(p), self.game.mask(p)

    def check(self, state: dict[str, Any]) -> np.ndarray:
        return self.game.mask(self.game.parse(state))

    def action_value(self, index: int, state: dict[str, Any]) -> Any:
        p = self.game.parse(state)
        for m, text in zip(p.legal, state[self.game.legal_field], strict=True):
            if self.game.slot(m) == int(index):
                return text
        raise InvalidState(f"action {index!r} is not legal here")

    def action_index(self, value: Any, state: dict[str, Any]) -> int:
        return self.game.slot(self.game.move(value, "action"))

    def teams(self, state: dict[str, Any]) -> list[list[str]] | None:
        teams = self.game.teams(state)
        return None if teams is None else [[str(s) for s in team] for team in teams]

    def state_schema(self) -> dict[str, Any]:
        return self.game.state_schema()

    def action_schema(self) -> dict[str, Any]:
        return self.game.move_schema()


class CardCandidatesAdapter(CardGameAdapter, CandidateAdapter):
    """The same declared game with each legal move scored as a candidate (`CardGame.
    candidates`): what is learned of one move carries to moves like it."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        g = getattr(cls, "game", None)
        if g is not None:
            cls.candidate_size, cls.max_candidates = g.candidate_size, g.max_legal

    def encode_candidates(self, state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        g = self.game
        if not stages.ON:
            p = g.parse(state)
            return g.features(p), g.candidates(p)
        t0 = stages.clock()  # (`--profile-stages`: the stages as the hand-made adapters')
        p = g.parse(state)
        t0 = stages.add(stages.VALIDATE, t0)
        obs = g.features(p)
        t0 = stages.add(stages.STATE_FEATURES, t0)
        cands = g.candidates(p)
        stages.add(stages.CANDIDATE_FEATURES, t0)
        return obs, cands

    def candidate_count(self, state: dict[str, Any]) -> int:
        t0 = stages.clock() if stages.ON else 0
        count = len(self.game.parse(state).legal)
        if stages.ON:
            stages.add(stages.VALIDATE, t0)
        return count

    def candidate_value(self, k: int, state: dict[str, Any]) -> Any:
        legal = state[self.game.legal_field]
        if not 0 <= k < len(legal):
            raise InvalidState(f"candidate {k!r} out of range of the state's legal moves")
        return legal[k]
