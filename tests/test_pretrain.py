"""Warm start: record the rules as offline episodes, behaviour-clone them with RLlib's BC,
serve the result, and let the trainer continue from it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from croupier.policies.module import ModelSpec
from croupier.policies.weights_file import weights_path
from croupier.trainer.pretrain import pretrain, rules_agreement
from tests.conftest import play_hands_over_http

GAME = "leduc-holdem"

pytestmark = pytest.mark.ray


def _record_rules(inprocess, offline_dir, hands: int) -> dict:
    """Rules vs random through the API, `record: rules` (only the rules seat is recorded)."""

    async def body(client, service):
        def seats(h: int) -> dict[str, str]:
            return {"0": "rules", "1": "random"} if h % 2 else {"0": "random", "1": "rules"}

        await play_hands_over_http(client, GAME, hands, seats, record="rules")
        return service.rollout.offline.stats()

    return inprocess(body, offline_dir=offline_dir)


def test_pretrain_clones_the_rules_and_training_continues_from_it(ray_session, inprocess, tmp_path):
    stats = _record_rules(inprocess, tmp_path / "offline", hands=300)
    # The rules seat acted in most hands (random, acting first, sometimes folds at once).
    assert 200 < stats["episodes"] <= 300
    assert len(list((tmp_path / "offline").glob("*.parquet"))) == 1  # flushed at shutdown

    spec = ModelSpec(algo="ppo", hiddens=[64, 64])
    out = tmp_path / "pre"
    report = pretrain(GAME, tmp_path / "offline", out, spec, iterations=2, iters_per_step=15)
    # Measured on fresh states (rules vs random, other deals): the clone picks the rules'
    # action on most decisions; an untrained module of the same shape does not.
    assert report["rules_agreement"]["decisions"] > 300
    assert report["rules_agreement"]["agreement"] > 0.9
    from croupier.games.registry import load_adapter
    from croupier.policies.learned import PolicyVersions

    untrained = PolicyVersions(load_adapter(GAME), spec, seed=5).weights()
    assert rules_agreement(GAME, spec, untrained)["agreement"] < 0.8
    assert json.loads((out / "pretrain.json").read_text())["version"] == 1

    # The server serves it as version 1 from its weights dir.
    async def served(client, service):
        r = await client.post("/v1/games", json={"game": GAME, "seats": {"0": "learned"}})
        return r.json()["seats"]["0"], service.versions.spec

    seat, served_spec = inprocess(served, weights_dir=out)
    assert seat == {"policy": "learned", "version": 1} and served_spec == spec

    # The trainer starts from it: version 1, the same policy weights on its runner.
    from croupier.trainer.algo import Hyper
    from croupier.trainer.run import Trainer, TrainOptions
    from tests.conftest import free_port

    trainer = Trainer(
        TrainOptions(
            game=GAME,
            algo="ppo",
            listen=f"127.0.0.1:{free_port()}",
            checkpoint_dir=tmp_path / "ckpt",
            hiddens=[64, 64],
            hyper=Hyper.defaults("ppo"),
            init_weights=out,
        )
    )
    trainer.build()
    try:
        assert trainer.weights_seq_no() == 1
        runner_state = trainer.algo.env_runner.module.state_dict()
        with np.load(weights_path(out, 1)) as served_weights:
            for key in served_weights.files:
                np.testing.assert_allclose(runner_state[key].numpy(), served_weights[key])
    finally:
        trainer.algo.stop()
        trainer.algo = None
