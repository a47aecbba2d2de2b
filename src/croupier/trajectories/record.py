"""Croupier's own episode record: what the spool stores and the link carries, versioned.

One learned seat's finished (or cut) episode, as plain data: str, int, float, bool, lists and
numeric numpy arrays only (so the msgpack codec never has to carry, or accept, a pickle). The
trainer converts it to RLlib's episode (`croupier.trainer.episodes`); nothing here depends on
RLlib's layout, so an RLlib upgrade cannot make a spool unreadable.

Layout, version 1 (`n` steps, one more observation than actions):

    record     1
    id         episode id (uuid hex)
    game_id, seat, policy
    terminated, truncated      bools (a cut episode is truncated)
    versions   list[int], n    the weights version that took each action
    obs        float32 (n+1, obs_size)    observations, the last one after the last action
    mask       float32 (n+1, num_actions) legal-action masks beside them
    actions    int64 (n,)
    rewards    float32 (n,)   rewards[t] is what followed action t
    logp       float32 (n,)   log-probability of each action under the policy that took it
    logits     float32 (n, num_actions)
    start_time, last_step_time  floats (perf_counter) or None
    extra      {name: array with n (or n+1) rows}: optional per-step arrays a later policy
               needs (e.g. candidate features); absent or empty today. A reader keeps the
               names it does not know, so adding one is not a format break.
    extra["teacher"]  int64 (n,): where a search labelled a step, its choice (an action
               index, or a candidate's index at that step); -1 where none did
               (`TEACHER`: expert iteration, `trainer/distill.py`)
    hands, silent_payoff   optional: the hands this record stands for (itself plus those just
               before it in which a learned seat never acted, so had no episode) and those
               silent hands' payoffs; absent means 1 and 0 (`hand_payoff`)
    table      optional: the kind of table the seat played at (`policies/tables.py`: "rules"
               when every opponent played the game's rules; "league", "best-response",
               "self-play", ...): the learner judges the policy against the rules' own record
               on "rules" tables alone. Absent (a server from before it): not known, so not
               judged there (`record_table`)

Version 2 adds scored candidate actions (a `CandidateAdapter` game, e.g. doudizhu), stored
ragged, unpadded (a doudizhu state lists ~6 of up to 512 moves; padded, a step would be 110 KB):

    candidate_counts  int64 (n+1,)        K_t, the legal candidates at each observation
    candidates        float32 (sum K_t, F) their features, step after step
    mask              float32 (n+1, 0)    (no fixed-size mask)
    logits            float32 (sum of K_t over the n acting steps,)  each step's K_t logits
    actions           the chosen candidate's index, 0 <= a_t < K_t

The trainer pads them to the game's `max_candidates` (`trainer.episodes`). A record without
`candidate_counts` is a fixed-size one, laid out as in version 1; version-1 records are read
as they are.

A record of a newer version than `RECORD_VERSION` is refused (counted by the reader), never
half-read. The layout before this record (RLlib's `SingleAgentEpisode.get_state()`, which the
recorder wrote until it had its own) is migrated on read by `from_legacy_state`: spools written
then stay readable (tests/fixtures/spool_v0).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

RECORD_VERSION = 2
ARRAYS = ("obs", "mask", "actions", "rewards", "logp", "logits")
MAX_TABLE_CHARS = 32  # a table kind's name (`policies/tables.py`: "best-response" the longest)
# The `extra` array of a search's labels, one a step (-1: not labelled).
TEACHER = "teacher"
NO_TEACHER = -1


class RecordError(ValueError):
    """A body that is not an episode record this version can read."""


def make_record(
    *,
    episode_id: str,
    obs: np.ndarray,
    mask: np.ndarray,
    actions: np.ndarray,
    rewards: np.ndarray,
    logp: np.ndarray,
    logits: np.ndarray,
    versions: list[int],
    game_id: str = "",
    seat: str = "",
    policy: str = "",
    terminated: bool = True,
    truncated: bool = False,
    start_time: float | None = None,
    last_step_time: float | None = None,
    extra: dict[str, np.ndarray] | None = None,
    candidates: np.ndarray | None = None,
    candidate_counts: np.ndarray | None = None,
) -> dict[str, Any]:
    """A record of `len(actions)` steps (the arrays as given: no copy, no check); with
    `candidates`, a candidate record (see the module docstring)."""
    record = {
        "record": RECORD_VERSION,
        "id": episode_id,
        "game_id": game_id,
        "seat": seat,
        "policy": policy,
        "terminated": terminated,
        "truncated": truncated,
        "versions": list(versions),
        "obs": obs,
        "mask": mask,
        "actions": actions,
        "rewards": rewards,
        "logp": logp,
        "logits": logits,
        "start_time": start_time,
        "last_step_time": last_step_time,
        "extra": dict(extra or {}),
    }
    if candidates is not None:
        record["candidates"] = candidates
        record["candidate_counts"] = candidate_counts
    return record


def is_legacy(value: Any) -> bool:
    """The `SingleAgentEpisode.get_state()` layout the recorder wrote before version 1."""
    return isinstance(value, dict) and "record" not in value and "id_" in value and "t" in value


def from_legacy_state(state: dict[str, Any]) -> dict[str, Any]:
    """A version-1 record from the pre-record layout (RLlib's episode state as croupier wrote
    it: `id_`, `observations.data.{observations,action_mask}`, `extra_model_outputs`,
    `custom_data`, `is_terminated`...). Moves fields, checks nothing beyond their presence:
    the trainer validates what it is given either way."""
    try:
        if int(state["t_started"]) != 0 or int(state["t"]) != len(state["actions"]["data"]):
            raise RecordError("an old-layout episode must start at t 0 and hold t actions")
        obs = state["observations"]["data"]
        extra = state["extra_model_outputs"]
        custom = state.get("custom_data") or {}
        return make_record(
            episode_id=state["id_"],
            obs=obs["observations"],
            mask=obs["action_mask"],
            actions=state["actions"]["data"],
            rewards=state["rewards"]["data"],
            logp=extra["action_logp"]["data"],
            logits=extra["action_dist_inputs"]["data"],
            versions=custom.get("versions", []),
            game_id=custom.get("game_id", ""),
            seat=custom.get("seat", ""),
            policy=custom.get("policy", ""),
            terminated=state.get("is_terminated") is True,
            truncated=state.get("is_truncated") is True,
            start_time=state.get("_start_time"),
            last_step_time=state.get("_last_step_time"),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise RecordError(f"not an episode state of the old layout: {e!r}") from None


def read_record(value: Any) -> dict[str, Any]:
    """A record this version understands, from decoded data (old layouts migrated);
    `RecordError` for anything else. Cheap: no array is copied or checked here."""
    if is_legacy(value):
        return from_legacy_state(value)
    if not isinstance(value, dict):
        raise RecordError("an episode record must be a map")
    version = value.get("record")
    if not isinstance(version, int) or isinstance(version, bool):
        raise RecordError("an episode record needs an integer 'record' version")
    if version > RECORD_VERSION:
        raise RecordError(f"record version {version} is newer than this croupier reads")
    if version < 1:
        raise RecordError(f"record version {version} does not exist")
    if not isinstance(value.get("id"), str):
        raise RecordError("id must be a string")
    return value


def silent_hands(record: Any) -> tuple[int, float]:
    """(hands, silent payoff): the hands a record stands for, its own and those just before it
    in which a learned seat never acted (no episode of their own: `hands` - 1 of them), and
    those hands' payoffs summed. A record without the fields (older servers, the legacy
    layout) is one hand; a piece cut at the length limit is none (`hands` 0: its rewards are
    its hand's, counted when the hand ends)."""
    if not isinstance(record, dict):
        return 1, 0.0
    hands, silent = record.get("hands", 1), record.get("silent_payoff", 0.0)
    if type(hands) is not int or not 0 <= hands <= 1_000_000:
        hands = 1
    if type(silent) not in (int, float) or not math.isfinite(silent):
        silent = 0.0
    return hands, float(silent)


def record_table(record: Any) -> str:
    """The kind of table a record says its seat played at; "" when it does not say (older
    servers, the legacy layout) or says it oddly (not a short string)."""
    table = record.get("table", "") if isinstance(record, dict) else ""
    return table if isinstance(table, str) and len(table) <= MAX_TABLE_CHARS else ""


def record_len(record: dict[str, Any]) -> int:
    return len(record["actions"])


def record_versions(record: dict[str, Any]) -> list[int]:
    return list(record.get("versions", []))


def record_id(value: Any) -> str | None:
    """The episode id a body claims (either layout), even when the rest is unreadable: a
    refused episode is still acknowledged, so its server does not send it forever."""
    if not isinstance(value, dict):
        return None
    episode_id = value.get("id") if "record" in value else value.get("id_")
    return episode_id if isinstance(episode_id, str) else None
