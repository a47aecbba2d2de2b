"""The link's messages, defined once (`croupier.link.protocol`): what one end builds, the other
reads back, and what a peer gets wrong is refused with a reason."""

from __future__ import annotations

import numpy as np
import pytest

from croupier.link import protocol, wire


def _through_the_wire(message: dict) -> tuple[str, dict]:
    kind, body = wire.unpack_body(wire.pack_body(message))
    return kind.name if hasattr(kind, "name") else kind, body


def test_link_config_round_trips_and_is_plain_data():
    config = protocol.LinkConfig(
        game="leduc-holdem",
        obs_size=36,
        num_actions=4,
        observation_space={"type": "Dict"},
        action_space={"type": "Discrete", "n": 4},
        module_class="croupier.policies.module:MaskedPPOModule",
        model={"algo": "ppo", "hiddens": [16]},
        weights_seq_no=7,
        acks=True,
        max_frame_bytes=1 << 20,
    )
    kind, body = _through_the_wire(protocol.set_config(config))
    assert kind == "SET_CONFIG"
    sent = protocol.read_set_config(body)
    assert sent["format"] == protocol.CONFIG_FORMAT == "croupier/1"
    assert protocol.LinkConfig.from_dict(sent) == config


def test_a_partial_config_takes_defaults_and_a_wrong_one_is_refused():
    minimal = protocol.LinkConfig.from_dict({"format": "croupier/1", "future_field": 1})
    assert minimal.acks is False and minimal.model == {}
    assert minimal.max_frame_bytes == wire.DEFAULT_MAX_FRAME
    for bad, why in (
        ({"format": "croupier/2"}, "croupier/1 config"),
        (b"a pickle", "croupier/1 config"),
        ({"format": "croupier/1", "max_frame_bytes": "lots"}, "frame limit"),
        ({"format": "croupier/1", "max_frame_bytes": True}, "frame limit"),
        ({"format": "croupier/1", "model": [1]}, "not a map"),
    ):
        with pytest.raises(protocol.ProtocolError, match=why):
            protocol.LinkConfig.from_dict(bad)
    with pytest.raises(protocol.ProtocolError, match="without a config"):
        protocol.read_set_config({})


def test_state_messages_carry_weights_and_their_version():
    weights = {"w": np.ones((2, 2), np.float32)}
    kind, body = _through_the_wire(protocol.set_state(weights, 12))
    assert kind == "SET_STATE"
    got, seq = protocol.read_set_state(body)
    assert seq == 12 and np.array_equal(got["w"], weights["w"])
    # A stock RLlib peer nests the weights under the module id.
    nested = {"state": {"rl_module": {"default_policy": weights}, "weights_seq_no": 3}}
    assert protocol.read_set_state(nested)[1] == 3
    assert protocol.read_set_state({"state": {"rl_module": weights}})[1] == 0
    for bad, why in (({}, "without a state"), ({"state": {"rl_module": 5}}, "module weights")):
        with pytest.raises(protocol.ProtocolError, match=why):
            protocol.read_set_state(bad)


def test_episodes_and_acks():
    kind, body = _through_the_wire(protocol.episodes([{"id": "a"}]))
    assert kind == "EPISODES" and protocol.read_episodes(body) == [{"id": "a"}]
    with pytest.raises(protocol.ProtocolError):
        protocol.read_episodes({"episodes": 7})
    kind, body = _through_the_wire(protocol.ack(["a", "b"]))
    assert kind == "ACK" and protocol.read_ack(body) == ["a", "b"]
    assert protocol.read_ack({"ids": ["a", 3, None]}) == ["a"]
    with pytest.raises(protocol.ProtocolError):
        protocol.read_ack({"ids": "a"})
    builders = {"PING": protocol.ping, "PONG": protocol.pong}
    builders |= {"GET_CONFIG": protocol.get_config, "GET_STATE": protocol.get_state}
    for name, build in builders.items():
        assert _through_the_wire(build())[0] == name
