"""The adapter interface: an engine's JSON game state in, a policy's view of it out.

A policy never sees the engine's own data structures. It sees a fixed-size observation
vector and a legal-action mask over a fixed `Discrete(num_actions)` action space. An adapter
translates both ways: `encode` maps the engine's state to (observation, mask), `action_value`
maps an action index back to whatever the engine calls that action.

An adapter also says, as JSON Schema, what it takes and gives (`state_schema`, `action_schema`,
`payoff_schema`): the server's OpenAPI document carries them, so a client generator types the
state an engine sends and the action it gets back (see `GameAdapter.state_schema`).

Why ~430 lines in one module: the interface and its two specialisations (`NamedActionsAdapter`,
`CandidateAdapter`) are what every adapter author reads, together; split, the contract a
state schema keeps would sit in one file and the legal-list checks it mirrors in another.
"""

from __future__ import annotations

import contextlib
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import numpy as np

# What a rule-based bot is: engine state in, engine action value out.
RulesFn = Callable[[dict[str, Any]], Any]


class InvalidState(ValueError):
    """The engine sent a state this adapter cannot turn into an observation (answered 422)."""


def json_int(x: Any) -> bool:
    """Whether `x` is an integer as JSON Schema counts one (what a state schema's `integer`
    admits): an int, not a bool, or a float without a fraction (`2.0` is the integer 2; JSON
    clients send either). numpy integers too, for in-process callers."""
    t = type(x)
    if t is int:  # the common case first: JSON gives plain ints
        return True
    if t is float:
        return x.is_integer()
    return isinstance(x, np.integer)


# A custom game's payoff range until its adapter declares one: wide enough for any scoring a
# card game uses (points, chips, cents of a stake), narrow enough that statistics over millions
# of games stay exact in float64 and no engine bug (a garbage field, 1e200) becomes evidence.
DEFAULT_PAYOFF_RANGE = (-1e6, 1e6)


class GameAdapter(ABC):
    """Turns one game's engine states into observations and legal-action masks."""

    name: str
    obs_size: int
    num_actions: int
    num_players: int = 2
    # Every payoff a seat can end a game with, inclusive, in the engine's units: `end` refuses
    # payoffs outside it and `decide` a per-step reward larger in magnitude (422, counted,
    # nothing recorded). Built-in games declare theirs from their rules.
    payoff_range: tuple[float, float] = DEFAULT_PAYOFF_RANGE

    @abstractmethod
    def encode(self, state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """Return (observation float32[obs_size], legal mask float32[num_actions]).

        Raises InvalidState when the state is malformed or has no legal action.
        """

    def check(self, state: dict[str, Any]) -> np.ndarray:
        """`state` validated as `encode` validates it, and its legal mask, without the
        observation: what a rules or random seat needs. By default the whole `encode`; a game
        whose features cost more than its checks overrides it."""
        return self.encode(state)[1]

    @abstractmethod
    def action_value(self, index: int, state: dict[str, Any]) -> Any:
        """The engine's own value for action `index` (what the engine applies)."""

    @abstractmethod
    def action_index(self, value: Any, state: dict[str, Any]) -> int:
        """Inverse of `action_value`: the index of an engine action value."""

    def rules(self) -> RulesFn | None:
        """The game's rule-based bot, if it has one: it validates what it is given."""
        return None

    def checked_rules(self) -> RulesFn | None:
        """The rule-based bot for states `check` or `encode` has already passed: the server
        validates every state before a seat acts, so a built-in bot skips a second validation
        there (doudizhu: the checks are ~40% of a rules decision). By default `rules()`."""
        return self.rules()

    def checking(self, act: RulesFn) -> RulesFn:
        """`act` (a bot for checked states) behind this adapter's `check`: what `rules()`
        returns for a caller whose states nothing has validated."""

        def rule_action(state: dict[str, Any]) -> Any:
            self.check(state)
            return act(state)

        return rule_action

    def warm_up(self) -> None:
        """Load now what the first rules decision would load (RLCard's rule agents import
        their models on first use: ~0.4 s that would stall the server's event loop)."""
        return None

    # --- derived, shared by every adapter -------------------------------------------------

    @property
    def reward_bound(self) -> float:
        """The largest magnitude a per-step `reward` may have: a reward is part of what a seat
        wins over the game, so never more than the largest payoff."""
        low, high = self.payoff_range
        return max(abs(low), abs(high))

    def payoff_problem(self, payoffs: dict[str, float]) -> str | None:
        """Why these final payoffs cannot be this game's (None when they can)."""
        low, high = self.payoff_range
        for seat, value in payoffs.items():
            if not math.isfinite(value):
                return f"payoff of seat {seat!r} must be a finite number"
            if not low <= value <= high:
                return (
                    f"payoff {value!r} of seat {seat!r} is outside {self.name}'s payoff range "
                    f"[{low:g}, {high:g}]"
                )
        return None

    def reward_problem(self, reward: float) -> str | None:
        """Why this per-step reward cannot be this game's (None when it can)."""
        if not math.isfinite(reward):
            return "reward must be a finite number"
        bound = self.reward_bound
        if abs(reward) > bound:
            return f"reward {reward!r} is beyond {self.name}'s payoffs (|reward| <= {bound:g})"
        return None

    @property
    def seats(self) -> list[str]:
        return [str(i) for i in range(self.num_players)]

    @property
    def observation_space(self) -> gym.spaces.Dict:
        """The space the learned policy sees: observation plus the legal-action mask."""
        return gym.spaces.Dict(
            {
                "observations": gym.spaces.Box(-np.inf, np.inf, (self.obs_size,), np.float32),
                "action_mask": gym.spaces.Box(0.0, 1.0, (self.num_actions,), np.float32),
            }
        )

    @property
    def action_space(self) -> gym.spaces.Discrete:
        return gym.spaces.Discrete(self.num_actions)

    def terminal_observation(self) -> tuple[np.ndarray, np.ndarray]:
        """What closes an episode: zeros, with an all-ones mask (an all-zero mask would give
        the learner NaN logits on the final observation)."""
        return (
            np.zeros(self.obs_size, np.float32),
            np.ones(self.num_actions, np.float32),
        )

    # --- legal actions, as the server's deciding path reads them ---------------------------
    # Overridden where the second array `encode` returns is not a 0/1 mask (candidate games:
    # it holds the legal moves' features, one row each).

    def legal_indices(self, mask: np.ndarray) -> np.ndarray:
        """The legal action indices of an encoded state's mask."""
        return np.flatnonzero(mask)

    def legal_count(self, mask: np.ndarray) -> int:
        """How many legal actions an encoded state's mask holds: `len(legal_indices(mask))`,
        counted without building the indices (0.3 us against 1.1 us, on every learned
        decision's forced-move check). A game that overrides one overrides both."""
        return int(np.count_nonzero(mask))

    def is_legal(self, mask: np.ndarray, index: int) -> bool:
        return 0 <= index < len(mask) and bool(mask[index])

    def teams(self, state: dict[str, Any]) -> list[list[str]] | None:
        """Seats that share one result (partners), read from a state of the game; None: every
        seat plays for itself. A game with teams has its partners' payoffs averaged at `end`,
        so each learned partner's episode ends with the team's payoff."""
        return None

    # --- the contract, as JSON Schema (2020-12: what OpenAPI 3.1 documents carry) -------------

    def state_schema(self) -> dict[str, Any] | None:
        """The JSON Schema of a state this game takes, as the engine sends it in `decide`; the
        server's OpenAPI document publishes it as the game's state type (`<Game>State`), so a
        client generator types it and schemathesis generates real states from it. None (the
        default): the state is typed as any JSON object, and nothing else changes.

        The contract a schema keeps, checked by `tests/test_state_schema.py` for every
        built-in game and the Kuhn example:
        - never stricter than `encode`: a state the schema refuses, the adapter refuses too
          (422), so a client that validates against the document never rejects a state the
          server takes; where the adapter ignores a field, the schema leaves it open;
        - as strict as JSON Schema can say: every state the schema admits, the adapter takes,
          except for checks that relate fields to each other in ways JSON Schema cannot state
          (a hand's size against its card count, legal moves made of cards in the hand); those
          stay 422s, and the adapter's docstring lists them;
        - every state the game's own engine produces validates.
        Write `integer` where the adapter reads an integer and accept a float without a
        fraction there (`json_int`): for JSON Schema `2.0` is an integer."""
        return None

    def action_schema(self) -> dict[str, Any] | None:
        """The JSON Schema of the engine's action value, `action` in a `decide` answer (what
        `action_value` returns). None (the default): a string or an integer."""
        return None

    def payoff_schema(self) -> dict[str, Any]:
        """The JSON Schema of one seat's payoff at `end`: `payoff_range`, inclusive."""
        low, high = self.payoff_range
        return {"type": "number", "minimum": low, "maximum": high}

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "obs_size": self.obs_size,
            "num_actions": self.num_actions,
            "num_players": self.num_players,
            "has_rules": self.rules() is not None,
            "payoff_range": list(self.payoff_range),
        }


def mask_from_indices(indices: Any, num_actions: int) -> np.ndarray:
    """A legal-action mask from a list of action ids (integers as JSON Schema counts them,
    `json_int`: no booleans, no numeric strings, nothing numpy would truncate)."""
    if type(indices) is list and not all(map(json_int, indices)):  # JSON; numpy arrays pass
        raise InvalidState("legal actions must be integer ids")
    try:
        ids = np.asarray(indices, dtype=np.int64)
    except (TypeError, ValueError, OverflowError) as e:
        raise InvalidState(f"legal actions must be integer ids: {e}") from None
    if ids.ndim != 1 or ids.size == 0:
        raise InvalidState("the state lists no legal action")
    if ids.size > num_actions:
        raise InvalidState(f"more legal actions ({ids.size}) than the game has ({num_actions})")
    if ids.min() < 0 or ids.max() >= num_actions:
        raise InvalidState(f"legal action id out of range 0..{num_actions - 1}")
    mask = np.zeros(num_actions, np.float32)
    mask[ids] = 1.0
    if np.count_nonzero(mask) != ids.size:
        raise InvalidState("an action is listed twice in 'legal_actions'")
    return mask


class NamedActionsAdapter(GameAdapter):
    """A game whose actions are a fixed list of names (as RLCard's are): the engine's value
    for an action is its name, its index the name's place in `action_names`."""

    action_names: tuple[str, ...] = ()
    _action_ids: dict[str, int] = {}
    # Masks already built, by their tuple of legal names: a game has few distinct legal sets
    # (Leduc: a handful), and a lookup costs a fraction of building one. Bounded for games
    # with many (UNO); the masks are read-only, since every decision with that set shares one.
    # Only valid lists are cached (at most `num_actions` names), keyed by the adapter's own
    # name strings, not the request's: an entry costs at most ~8 bytes a name plus the mask
    # (UNO, 61 actions: < 1 KiB, so < 4 MiB for the whole cache). Keyed by the request's
    # list, any length, 150 lists of 40k names had grown a server by 413 MiB.
    MASKS_CACHED = 4096
    _masks: dict[tuple[str, ...], np.ndarray] = {}
    # A name listed twice is refused (422) unless the game's engine really does that: RLCard's
    # UNO lists one entry per playable card held, so two red sevens give "r-7" twice (~4% of
    # its states). Either way a list longer than the game's actions is refused.
    REPEATED_LEGAL_ACTIONS = False

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        if cls.action_names:
            cls.num_actions = len(cls.action_names)
            cls._action_ids = {a: i for i, a in enumerate(cls.action_names)}
        cls._masks = {}

    def action_value(self, index: int, state: dict[str, Any]) -> str:
        if not 0 <= int(index) < self.num_actions:
            raise InvalidState(f"action index {index!r} out of range 0..{self.num_actions - 1}")
        return self.action_names[int(index)]

    def action_index(self, value: Any, state: dict[str, Any]) -> int:
        if not isinstance(value, str) or value not in self._action_ids:
            raise InvalidState(f"unknown {self.name} action {value!r}")
        return self._action_ids[value]

    def action_schema(self) -> dict[str, Any]:
        return {"type": "string", "enum": list(self.action_names)}

    def legal_actions_schema(self) -> dict[str, Any]:
        """What `legal_mask` takes, as JSON Schema: a non-empty list of this game's action
        names, none twice (unless `REPEATED_LEGAL_ACTIONS`), at most `num_actions`."""
        schema = {
            "type": "array",
            "items": self.action_schema(),
            "minItems": 1,
            "maxItems": self.num_actions,
            "description": "The actions legal now, by name.",
        }
        if not self.REPEATED_LEGAL_ACTIONS:
            schema["uniqueItems"] = True
        return schema

    def legal_mask(self, legal: Any) -> np.ndarray:
        """The mask for a list of legal action names; rejects a non-list, an empty list and
        unknown names."""
        key: tuple[str, ...] | None = None
        # (not any iterable: a dict's keys would pass as names; nor a list longer than the
        # game's actions: never valid, refused below without building a key)
        if type(legal) is list and len(legal) <= self.num_actions:
            try:
                key = tuple(legal)
                cached = self._masks.get(key)
            except TypeError:  # an unhashable item: the checks below name it
                key = cached = None
            if cached is not None:
                return cached
        if not isinstance(legal, list):
            raise InvalidState(f"'legal_actions' must be a list of action names, got {legal!r}")
        if not legal:
            raise InvalidState("the state lists no legal action")
        if len(legal) > self.num_actions:
            raise InvalidState(
                f"more legal actions ({len(legal)}) than {self.name} has ({self.num_actions})"
            )
        known = self._action_ids
        mask = np.zeros(self.num_actions, np.float32)
        # Names looked up one by one and the mask set slot by slot: for a few legal actions
        # this beats building an index list and numpy's fancy indexing.
        for a in legal:
            i = known.get(a, -1) if isinstance(a, str) else -1
            if i < 0:
                bad = [a for a in legal if not (isinstance(a, str) and a in known)]
                raise InvalidState(f"unknown action(s) {bad!r}")
            if mask[i] and not self.REPEATED_LEGAL_ACTIONS:
                raise InvalidState(f"action {a!r} is listed twice in 'legal_actions'")
            mask[i] = 1.0
        mask.flags.writeable = False
        if key is not None and len(self._masks) < self.MASKS_CACHED:
            names = self.action_names
            self._masks[tuple(names[known[a]] for a in legal)] = mask
        return mask


class CandidateAdapter(ABC):
    """Mixin for games whose moves are combinations (doudizhu: 27,472 possible moves, a few
    legal at a time): each legal action the engine sends is described by a feature vector,
    and a policy scores (state, candidate) pairs instead of a fixed softmax over every move.

    Additive: a class mixing this into a `GameAdapter` keeps `encode`/mask working for the
    fixed-size path; candidate-scoring policies use the methods below. Candidate k is the k-th
    legal action in the order the engine listed them, so the engine's value is recovered from
    the state alone (nothing per decision has to be remembered by the server).
    """

    candidate_size: int
    # Padding bound for fixed-shape spaces (RLlib batches need one shape): the most legal
    # actions a state of this game can list. A state listing more is refused (422).
    max_candidates: int

    @abstractmethod
    def encode_candidates(self, state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """Return (state features float32[obs_size], candidates float32[K, candidate_size]),
        K = the number of legal actions, in the engine's order. Raises InvalidState."""

    @abstractmethod
    def candidate_value(self, k: int, state: dict[str, Any]) -> Any:
        """The engine's own value of candidate k (what the engine applies)."""

    def encode_candidates_many(
        self, states: list[dict[str, Any]]
    ) -> list[tuple[np.ndarray, np.ndarray] | InvalidState]:
        """`encode_candidates` of each state (a refused one: its InvalidState, in its place).
        By default one at a time; a game may build the features of all at once."""
        out: list[tuple[np.ndarray, np.ndarray] | InvalidState] = []
        for state in states:
            try:
                out.append(self.encode_candidates(state))
            except InvalidState as e:
                out.append(e)
        return out

    def candidate_count(self, state: dict[str, Any]) -> int:
        """K, the number of legal actions, with `state` validated as `encode_candidates`
        validates it (raises InvalidState). By default the whole encode."""
        return len(self.encode_candidates(state)[1])

    def candidate_features(self, state: dict[str, Any]) -> np.ndarray:
        """float32[K, candidate_size]: one row per legal action, in the engine's order."""
        return self.encode_candidates(state)[1]

    @property
    def candidate_observation_space(self) -> gym.spaces.Dict:
        """The padded space a candidate-scoring RLModule sees (see `pad_candidates`)."""
        obs_size = self.obs_size  # type: ignore[attr-defined]  # from the GameAdapter side
        return gym.spaces.Dict(
            {
                "observations": gym.spaces.Box(-np.inf, np.inf, (obs_size,), np.float32),
                "candidates": gym.spaces.Box(
                    -np.inf, np.inf, (self.max_candidates, self.candidate_size), np.float32
                ),
                "candidate_mask": gym.spaces.Box(0.0, 1.0, (self.max_candidates,), np.float32),
            }
        )

    @property
    def candidate_action_space(self) -> gym.spaces.Discrete:
        return gym.spaces.Discrete(self.max_candidates)

    def checked_count(self, k: int) -> int:
        """`k` legal actions, refused (InvalidState) outside 1..`max_candidates`."""
        if not 0 < k <= self.max_candidates:
            raise InvalidState(f"{k} legal actions; this game allows 1..{self.max_candidates}")
        return k

    def pad_candidates(self, obs: np.ndarray, cands: np.ndarray) -> dict[str, np.ndarray]:
        """One observation of `candidate_observation_space`: candidates padded with zero rows
        that the mask marks illegal."""
        k = self.checked_count(len(cands))
        padded = np.zeros((self.max_candidates, self.candidate_size), np.float32)
        padded[:k] = cands
        mask = np.zeros(self.max_candidates, np.float32)
        mask[:k] = 1.0
        return {"observations": obs, "candidates": padded, "candidate_mask": mask}

    def terminal_candidates(self) -> dict[str, np.ndarray]:
        """What closes an episode: zeros, with one legal candidate (an all-zero mask would
        give the learner NaN logits)."""
        obs_size = self.obs_size  # type: ignore[attr-defined]
        return self.pad_candidates(
            np.zeros(obs_size, np.float32), np.zeros((1, self.candidate_size), np.float32)
        )


@contextlib.contextmanager
def rules_seeded(seed: int) -> Iterator[None]:
    """RLCard's rule agents (`doudizhu-rule-v1`, `uno-rule-v1`) draw from numpy's global
    generator: seed it for a fixed set of deals (an evaluation), and give the caller its own
    stream back afterwards."""
    outer = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(outer)
