"""Records one learned seat's decisions and closes them into an episode record.

The output is croupier's own versioned episode record (`croupier.trajectories.record`): the
spool stores it and the link carries it; the trainer converts it to RLlib's episode.

Rewards: RLlib's `rewards[t]` is what followed action t. The reward a decide call reports
("what this seat received since its last decision") therefore belongs to the previous step, and
the final payoff given at `end` belongs to the last step.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from croupier.trajectories.record import (
    NO_TEACHER,
    TEACHER,
    make_record,
    record_len,
    record_versions,
)

# The longest episode a trainer takes (`trainer.episodes` refuses longer ones). A learned seat
# still playing at this length has its episode cut here, truncated, and a new one begun: a
# game that never ends is trained on in pieces instead of being lost whole at the trainer.
MAX_EPISODE_STEPS = 10_000

# What a recorded step holds besides its arrays' data (sys.getsizeof): three array headers
# (112 B each), a log-prob and a reward (24 B floats), an action and a version (28 B ints at
# most) and seven list slots (8 B each): 496 B.
STEP_OVERHEAD_BYTES = 512


def step_nbytes(obs: np.ndarray, mask: np.ndarray, logits: np.ndarray) -> int:
    """The memory one recorded step holds (a candidate game's `mask`: its candidates)."""
    return obs.nbytes + mask.nbytes + logits.nbytes + STEP_OVERHEAD_BYTES


@dataclass
class RecordingBudget:
    """Bytes the learned seats' recorders hold in memory until their games end, against two
    bounds: one seat's episode (`max_episode_bytes`) and all recording on the server
    (`max_total_bytes`). A step past either is not recorded (the learned seat still answers):
    its episode so far ends truncated there, as where a fallback answered, and the decider
    counts it here. Without them one engine made a server hold what it liked: a doudizhu
    step listing 512 moves keeps ~330 KB, and one 4 MiB `decide:batch` of such steps added
    ~252 MiB. Event loop only, like every recorder."""

    max_episode_bytes: int
    max_total_bytes: int
    held: int = 0  # bytes all live recorders hold
    # Steps answered but not recorded, by the bound they would have passed.
    over_episode: int = 0
    over_total: int = 0

    def __post_init__(self) -> None:
        if self.max_episode_bytes < 1 or self.max_total_bytes < 1:
            raise ValueError("the recording budgets must be at least 1 byte")

    def refuses(self, recorder: SeatRecorder, nbytes: int) -> bool:
        """Whether a step of `nbytes` would pass a bound (counted when it would)."""
        if recorder.nbytes + nbytes > self.max_episode_bytes:
            self.over_episode += 1
            return True
        if self.held + nbytes > self.max_total_bytes:
            self.over_total += 1
            return True
        return False

    def stats(self) -> dict[str, Any]:
        return {
            "held_bytes": self.held,
            "max_episode_bytes": self.max_episode_bytes,
            "max_total_bytes": self.max_total_bytes,
            "steps_over_episode_budget": self.over_episode,  # answered, not recorded
            "steps_over_total_budget": self.over_total,
        }


@dataclass
class SeatRecorder:
    """Per learned seat: the steps so far, appended on each decision."""

    game_id: str
    seat: str
    policy: str
    episode_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    obs: list[np.ndarray] = field(default_factory=list)
    masks: list[np.ndarray] = field(default_factory=list)
    actions: list[int] = field(default_factory=list)
    logp: list[float] = field(default_factory=list)
    logits: list[np.ndarray] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    last_step: float = field(default_factory=time.perf_counter)
    # What `cut` closed, until the service has spooled it.
    truncated: dict[str, Any] | None = None
    # The server's recording budget (None: unbounded, for tests and tools), and the bytes
    # this recorder's steps hold in it (`step_nbytes`), given back when it closes.
    budget: RecordingBudget | None = None
    nbytes: int = 0
    # A search's choice at some steps (step -> action or candidate index): the labels expert
    # iteration distils (`trainer/distill.py`); the steps keep the policy's own actions.
    teacher: dict[int, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.actions)

    def add_reward(self, reward: float) -> None:
        """Reward received since the last decision (none before the first decision)."""
        if self.actions:
            self.rewards[-1] += float(reward)

    def add_decision(
        self,
        obs: np.ndarray,
        mask: np.ndarray,
        action: int,
        logp: float,
        logits: np.ndarray,
        version: int,
        nbytes: int = 0,
    ) -> None:
        """One step; `nbytes` (`step_nbytes`) is what it holds, counted in the budget."""
        self.nbytes += nbytes
        if self.budget is not None:
            self.budget.held += nbytes
        self.obs.append(obs)
        self.masks.append(mask)
        self.actions.append(int(action))
        self.logp.append(float(logp))
        self.logits.append(logits)
        self.versions.append(int(version))
        self.rewards.append(0.0)
        self.last_step = time.perf_counter()

    def label(self, step: int, choice: int) -> None:
        """The search's choice at `step` (a step of this recorder: a label that arrives after
        its episode was cut at the length limit is dropped)."""
        if 0 <= step < len(self.actions):
            self.teacher[step] = int(choice)

    def _extra(self) -> dict[str, np.ndarray]:
        if not self.teacher:
            return {}
        column = np.full(len(self.actions), NO_TEACHER, np.int64)
        column[list(self.teacher)] = list(self.teacher.values())
        return {TEACHER: column}

    def cut(self, next_obs: np.ndarray, next_mask: np.ndarray) -> SeatRecorder:
        """Close the steps so far as a truncated episode (its last observation the one the
        game goes on from, for the value bootstrap) in `self.truncated`; the game's next
        steps go to the recorder returned."""
        self.truncated = self.close(0.0, (next_obs, next_mask), truncated=True)
        return SeatRecorder(self.game_id, self.seat, self.policy, budget=self.budget)

    def release(self) -> None:
        """Give this recorder's bytes back to the budget (it closed, or its game went)."""
        if self.budget is not None:
            self.budget.held -= self.nbytes
        self.nbytes = 0

    def close(
        self,
        final_reward: float,
        terminal: tuple[np.ndarray, np.ndarray],
        truncated: bool = False,
    ) -> dict[str, Any] | None:
        """The finished episode's record, or None when this seat never decided."""
        self.release()  # the record is a copy: these steps' arrays go with this recorder
        if not self.actions:
            return None
        self.add_reward(final_reward)
        final_obs, final_mask = terminal
        common = {
            "episode_id": self.episode_id,
            "obs": np.stack([*self.obs, final_obs]).astype(np.float32),
            "actions": np.asarray(self.actions, np.int64),
            "rewards": np.asarray(self.rewards, np.float32),
            "logp": np.asarray(self.logp, np.float32),
            "versions": list(self.versions),
            "game_id": self.game_id,
            "seat": self.seat,
            "policy": self.policy,
            "terminated": not truncated,
            "truncated": truncated,
            "start_time": self.started,
            "last_step_time": self.last_step,
            "extra": self._extra(),
        }
        if final_mask.ndim == 2:
            # A candidate game (record version 2): the "masks" are candidate rows; candidates
            # and logits ragged, unpadded.
            cands = [*self.masks, final_mask]
            return make_record(
                **common,
                mask=np.zeros((len(cands), 0), np.float32),
                logits=np.concatenate(self.logits).astype(np.float32),
                candidates=np.concatenate(cands).astype(np.float32),
                candidate_counts=np.fromiter((len(c) for c in cands), np.int64, len(cands)),
            )
        return make_record(
            **common,
            mask=np.stack([*self.masks, final_mask]).astype(np.float32),
            logits=np.stack(self.logits).astype(np.float32),
        )


# The names the rest of the server knows the record's helpers by.
episode_len = record_len
episode_versions = record_versions
