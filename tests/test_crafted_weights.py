"""Finite weights crafted to put an illegal action on top never get it served: every sampled
row's action is looked up in its mask (not only when the log-probs look wrong), and a row that
fails goes to the fallback, counted."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from croupier.games.leduc import LeducAdapter
from croupier.games.registry import load_adapter
from croupier.policies.learned import PolicyVersions

F32_MAX = float(np.finfo(np.float32).max)


def _crafted_leduc(versions: PolicyVersions) -> dict[str, np.ndarray]:
    """The review's weights: an output bias of +3.4e38 on "call" (index 0), -1e36 on "raise"
    and "fold" (the legal ones in the probe), 0 on "check"; every output weight 0. The mask
    adds FLOAT_MIN (-3.4e38) to an illegal logit, which this bias cancels: "call" ends at 0,
    far above the legal -1e36, and every logit and log-prob stays finite (the old check
    looked at those only)."""
    weights = {k: v.copy() for k, v in versions.weights().items()}
    weights["pi.net.mlp.0.weight"][...] = 0.0
    weights["pi.net.mlp.0.bias"][...] = np.array([F32_MAX, -1e36, -1e36, 0.0], np.float32)
    return weights


def test_crafted_finite_weights_are_caught_row_by_row():
    torch.set_num_threads(1)
    versions = PolicyVersions(LeducAdapter(), seed=1)
    assert versions.install(1, _crafted_leduc(versions))  # finite: installed
    _, module = versions.resolve(None)
    obs = np.zeros((6, versions.adapter.obs_size), np.float32)
    mask = np.array([[0, 1, 1, 0]] * 3 + [[1, 1, 1, 0]] * 3, np.float32)  # call legal in 3
    for explore in (True, False):
        with np.errstate(over="ignore"):  # the crafted logits overflow in the softmax
            res = versions.act(module, obs, mask, explore=explore)
        assert res.actions.tolist()[:3] == [0, 0, 0]  # what the weights ask for: "call"
        assert res.valid is not None and res.valid.tolist() == [False] * 3 + [True] * 3


def test_crafted_finite_weights_serve_only_legal_actions_via_the_fallback(
    inprocess, leduc_states, tmp_path
):
    """The review's probe: 20 decides with only raise and fold legal on the crafted weights,
    then again after a restart from the saved file. Each is answered legal by the fallback,
    marked and counted, none recorded as learned (they answered "call", `fallback: false`)."""
    state = {**leduc_states[0], "legal_actions": ["raise", "fold"]}

    async def play(client, service, install: bool):
        if install:
            assert service.versions.install(1, _crafted_leduc(service.versions))
        assert service.versions.latest == 1
        seats = {"0": "learned", "1": "rules"}
        created = await client.post("/v1/games", json={"game": "leduc-holdem", "seats": seats})
        gid = created.json()["game_id"]
        url = f"/v1/games/{gid}/decide"
        single = [
            (await client.post(url, json={"seat": "0", "state": state})).json() for _ in range(10)
        ]
        items = [{"game_id": gid, "seat": "0", "state": state}] * 10
        batch = (await client.post("/v1/decide:batch", json={"items": items})).json()["results"]
        ended = await client.post(f"/v1/games/{gid}/end", json={"payoffs": {"0": 1, "1": -1}})
        return single + batch, ended.json(), service.health()

    for install in (True, False):  # the second server reads version 1 from the weights dir
        answers, ended, health = inprocess(
            lambda c, s, install=install: play(c, s, install), game="leduc-holdem",
            data_dir=tmp_path,
        )  # fmt: skip
        assert len(answers) == 20
        for a in answers:
            assert a["action"] in ("raise", "fold"), a
            assert a["fallback"] is True and a["policy"] == "rules" and a["version"] is None
        assert health["batcher"]["invalid"] == 20 and health["fallbacks"] == 20
        assert ended["episodes"] == 0


def test_a_candidate_row_never_gets_another_rows_padding():
    """A candidate game's rows are padded to the batch's longest list; scores crafted to sit
    at the padding's value (the most negative float) tie with it, and a sample could land past
    the row's own candidates. The mask check flags that row instead of serving an index that
    names no move."""
    torch.set_num_threads(1)
    adapter = load_adapter("doudizhu")
    versions = PolicyVersions(adapter, seed=1)
    weights = {k: v.copy() for k, v in versions.weights().items()}
    weights["net.score.3.weight"][...] = 0.0
    weights["net.score.3.bias"][...] = np.finfo(np.float32).min
    assert versions.install(1, weights)
    _, module = versions.resolve(None)
    rng = np.random.default_rng(0)
    obs = [np.zeros(adapter.obs_size, np.float32)] * 2
    cands = [
        rng.random((2, adapter.candidate_size)).astype(np.float32),  # 2 moves
        rng.random((64, adapter.candidate_size)).astype(np.float32),  # pads the first to 64
    ]
    flagged = 0
    for _ in range(20):
        res = versions.act_rows(module, obs, cands)
        past = res.actions[0] >= 2
        ok = res.valid is None or bool(res.valid[0])
        assert not (past and ok), "an index past the row's own candidates was served"
        flagged += bool(past)
    assert flagged > 0  # the probe did reach the padding (uniform over 64: ~97% of samples)


@pytest.mark.parametrize("explore", [True, False])
def test_ordinary_weights_are_never_flagged(explore):
    """The check costs no answer: ordinary weights' rows all pass (valid None)."""
    torch.set_num_threads(1)
    versions = PolicyVersions(LeducAdapter(), seed=2)
    _, module = versions.resolve(None)
    rng = np.random.default_rng(1)
    obs = rng.standard_normal((256, versions.adapter.obs_size)).astype(np.float32)
    mask = (rng.random((256, 4)) < 0.5).astype(np.float32)
    mask[:, 1] = 1.0
    assert versions.act(module, obs, mask, explore=explore).valid is None


def test_a_model_spec_asking_for_an_absurd_network_is_refused_before_it_is_built():
    """A link token holder's SET_CONFIG could ask for `[65536] * 50` (the review): the server
    would try to build it. Specs past the layer count or `MAX_PARAMETERS` (counted for the
    game's own sizes) are refused with a clear error; every preset passes."""
    from croupier.policies.module import MAX_LAYERS, MAX_PARAMETERS, ModelSpec

    leduc = LeducAdapter()
    sizes = (leduc.obs_size, leduc.num_actions)
    for hiddens, why in (
        ([65536] * 50, "1 to 16 layer"),
        ([8] * (MAX_LAYERS + 1), "1 to 16 layer"),
        ([65536, 65536], "parameters"),
        ([4096] * 3, "parameters"),
        ([0], "sizes from 1"),
        ("128", "layer sizes"),
    ):
        with pytest.raises(ValueError, match=why):
            ModelSpec.from_dict({"algo": "ppo", "hiddens": hiddens}, *sizes)
    # A wide output counts: 4096 units into a game of 10,000 actions is ~41 M parameters.
    with pytest.raises(ValueError, match="parameters"):
        ModelSpec.from_dict({"hiddens": [4096]}, 64, 10_000)
    assert ModelSpec.from_dict({"hiddens": [4096]}, 64, 100).hiddens == [4096]
    doudizhu = load_adapter("doudizhu")
    for game, adapter, cand in (("leduc-holdem", leduc, 0), ("doudizhu", doudizhu, 161)):
        spec = ModelSpec.for_game(game)
        n = spec.parameters(adapter.obs_size, adapter.num_actions, cand)
        assert n < MAX_PARAMETERS // 100
        assert ModelSpec.from_dict(spec.to_dict(), adapter.obs_size, adapter.num_actions, cand)
