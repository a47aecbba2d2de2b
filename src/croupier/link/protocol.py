"""The link protocol, defined once: the messages a policy server and the trainer exchange.

Both ends build and read messages here; `wire` frames them, `auth` guards the handshake.
In the order of a connection (server → trainer unless marked):

    PING / PONG (trainer)        the handshake (`croupier.link.auth`: with a token, an HMAC
                                 challenge-response both ways, then every frame tagged)
    GET_CONFIG / SET_CONFIG      the trainer's `LinkConfig`: game, sizes, model, frame limit
    GET_STATE / SET_STATE        weights and their `weights_seq_no`; the trainer also pushes
                                 SET_STATE unasked whenever it has a new version
    EPISODES                     episode records (`croupier.trajectories.record`)
    ACK (trainer)                ids the trainer has taken: the server deletes them

The state keys are RLlib's names (a stock RLlib peer speaks them too);
tests/test_rllib_private.py checks they still are.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ray.rllib.env.external.rllink import RLlink

from croupier.link.wire import DEFAULT_MAX_FRAME, LinkExt

CONFIG_FORMAT = "croupier/1"
# SET_STATE's keys: the module's weights (RLlib's COMPONENT_RL_MODULE), which a stock RLlib
# peer nests under the module id (DEFAULT_MODULE_ID), and their version (WEIGHTS_SEQ_NO).
STATE_MODULE = "rl_module"
DEFAULT_POLICY = "default_policy"
WEIGHTS_SEQ_NO = "weights_seq_no"


class ProtocolError(ValueError):
    """A message whose fields are not what the protocol says."""


@dataclass(frozen=True)
class LinkConfig:
    """SET_CONFIG's payload: plain data, never a pickle (RLlib's stock runner pickles its
    AlgorithmConfig here). Fields a peer left out take their defaults; the server checks the
    ones it depends on (sizes, model) against its own game."""

    game: str = ""
    obs_size: int | None = None
    num_actions: int | None = None
    observation_space: dict[str, Any] | None = None
    action_space: dict[str, Any] | None = None
    module_class: str = ""  # "module:qualname", informative: servers never import it
    model: dict[str, Any] = field(default_factory=dict)
    weights_seq_no: int = 0
    acks: bool = False  # the trainer sends ACKs (servers keep episodes until acked)
    # Servers keep each message's body at most this big (a frame over it is refused).
    max_frame_bytes: int = DEFAULT_MAX_FRAME

    def to_dict(self) -> dict[str, Any]:
        return {"format": CONFIG_FORMAT, **asdict(self)}

    @classmethod
    def from_dict(cls, value: Any) -> LinkConfig:
        if not isinstance(value, dict) or value.get("format") != CONFIG_FORMAT:
            raise ProtocolError(
                f"no {CONFIG_FORMAT} config (RLlib's stock runner? use --rllib-compat)"
            )
        frame = value.get("max_frame_bytes", DEFAULT_MAX_FRAME)
        if not isinstance(frame, int) or isinstance(frame, bool):
            raise ProtocolError(f"a frame limit of {frame!r} bytes")
        model = value.get("model") or {}
        if not isinstance(model, dict):
            raise ProtocolError("a model spec that is not a map")
        return cls(
            game=str(value.get("game", "")),
            obs_size=_int_or_none(value.get("obs_size")),
            num_actions=_int_or_none(value.get("num_actions")),
            observation_space=_dict_or_none(value.get("observation_space")),
            action_space=_dict_or_none(value.get("action_space")),
            module_class=str(value.get("module_class", "")),
            model=model,
            weights_seq_no=_int_or_none(value.get("weights_seq_no")) or 0,
            acks=value.get("acks") is True,
            max_frame_bytes=frame,
        )


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _dict_or_none(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


# --- messages (plain dicts with a "type", as `wire.pack_body` takes them) -------------------


def ping() -> dict[str, Any]:
    return {"type": RLlink.PING.name}


def pong() -> dict[str, Any]:
    return {"type": RLlink.PONG.name}


def get_config() -> dict[str, Any]:
    return {"type": RLlink.GET_CONFIG.name}


def set_config(config: LinkConfig) -> dict[str, Any]:
    return {"type": RLlink.SET_CONFIG.name, "config": config.to_dict()}


def get_state() -> dict[str, Any]:
    return {"type": RLlink.GET_STATE.name}


def set_state(weights: dict[str, Any], weights_seq_no: int) -> dict[str, Any]:
    return {
        "type": RLlink.SET_STATE.name,
        "state": {STATE_MODULE: weights, WEIGHTS_SEQ_NO: weights_seq_no},
    }


def episodes(records: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": RLlink.EPISODES.name, "episodes": records}


def ack(ids: list[str]) -> dict[str, Any]:
    return {"type": LinkExt.ACK.value, "ids": ids}


# --- reading what a peer sent --------------------------------------------------------------


def read_set_config(body: dict[str, Any]) -> Any:
    """SET_CONFIG's config as sent: a `LinkConfig` dict, or RLlib's pickle in compat mode
    (the caller decides whether to read that)."""
    if "config" not in body:
        raise ProtocolError("SET_CONFIG without a config")
    return body["config"]


def read_set_state(body: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """(module weights, the weights_seq_no as sent: the caller checks its range)."""
    state = body.get("state")
    if not isinstance(state, dict):
        raise ProtocolError("SET_STATE without a state")
    weights = state.get(STATE_MODULE)
    if isinstance(weights, dict) and DEFAULT_POLICY in weights:
        weights = weights[DEFAULT_POLICY]
    if not isinstance(weights, dict):
        raise ProtocolError("SET_STATE without module weights")
    return weights, state.get(WEIGHTS_SEQ_NO, 0)


def read_episodes(body: dict[str, Any]) -> list[Any]:
    records = body.get("episodes")
    if not isinstance(records, list):
        raise ProtocolError("EPISODES needs a list of episodes")
    return records


def read_ack(body: dict[str, Any]) -> list[str]:
    ids = body.get("ids")
    if not isinstance(ids, list):
        raise ProtocolError("ACK needs a list of ids")
    return [i for i in ids if isinstance(i, str)]
