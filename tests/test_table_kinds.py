"""Where each hand was played travels with its episode, server to learner: the record's
`table` (`policies/tables.py`), kept through the spool and the link, in the RLlib episode's
`custom_data`, and as the learner's `rules_table` column; and the rules anchor's evidence
reads the rules' tables alone (`trainer/rules_anchor.py` `Release`, `_gain`)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns

from croupier.games.leduc import LeducAdapter
from croupier.link import protocol, wire
from croupier.policies.learned import module_weights
from croupier.policies.module import ModelSpec
from croupier.policies.seats import SeatPolicy
from croupier.policies.tables import RULES_TABLE, table_kind
from croupier.trainer import rules_anchor as ra
from croupier.trainer.algo import Hyper, base_config
from croupier.trainer.episodes import validate_episode
from croupier.trainer.hand_returns import HAND_RETURN
from croupier.trainer.rules_tables import RULES_TABLE as COLUMN
from croupier.trainer.rules_tables import RulesTables
from croupier.trajectories.record import record_table

GAME = "leduc-holdem"
ADAPTER = LeducAdapter()
LEARNED, RULES = SeatPolicy("learned", record=True), SeatPolicy("rules")


def test_a_tables_kind_is_named_by_the_seats_opponents():
    frozen, br = SeatPolicy("frozen", 4), SeatPolicy("best-response")
    assert table_kind({"0": LEARNED, "1": RULES}, "0") == RULES_TABLE
    assert table_kind({"0": LEARNED, "1": SeatPolicy("rules", channel="shadow")}, "0") == "rules"
    assert table_kind({"0": LEARNED, "1": br}, "0") == "best-response"
    assert table_kind({"0": LEARNED, "1": frozen}, "0") == "league"
    assert table_kind({"0": LEARNED, "1": SeatPolicy("frozen", 2, rules_share=0.5)}, "0") == (
        "league"
    )  # a tier's mix is a version still
    assert table_kind({"0": LEARNED, "1": LEARNED}, "0") == "self-play"
    assert table_kind({"0": LEARNED, "1": SeatPolicy("random")}, "0") == "random"
    assert table_kind({"0": LEARNED, "1": RULES, "2": br}, "0") == "best-response"
    assert table_kind({"0": LEARNED, "1": frozen, "2": br}, "0") == "mixed"
    # Partners (doudizhu's peasants): a learned partner is the policy itself, a rules partner
    # what the rules' record was made with; an opponent is an opponent whatever its side.
    peasants = {"landlord": RULES, "p1": LEARNED, "p2": LEARNED}
    teams = [["p1", "p2"]]
    assert table_kind(peasants, "p1", teams) == RULES_TABLE
    assert table_kind(peasants, "p1") == "self-play"  # without teams, the other peasant plays
    assert table_kind({**peasants, "p2": frozen}, "p1", teams) == "league"
    assert table_kind({"landlord": LEARNED, "p1": LEARNED, "p2": RULES}, "landlord", teams) == (
        "self-play"
    )


def test_a_records_table_is_read_or_unknown():
    assert record_table({"table": "best-response"}) == "best-response"
    for odd in ({}, {"table": 3}, {"table": "x" * 33}, None, [1]):
        assert record_table(odd) == ""


def test_each_episode_carries_its_table_from_the_server_to_the_learners_column(
    inprocess, leduc_states
):
    """Games against the rules, a past version and the learner itself: each recorded
    episode says which it was, in the spool, over the link, in the RLlib episode and in the
    batch column the learner reads; a record from a server that does not say is no rules
    table's."""
    states = [s for s in leduc_states if len(s["legal_actions"]) >= 2][:2]
    tables = {"rules": {"0": "learned", "1": "rules"}, "league": {"0": "learned", "1": "frozen@0"},
              "self-play": {"0": "learned", "1": "learned"}}  # fmt: skip

    async def body(client, service):
        for seats in tables.values():
            game_id = service.create_game(GAME, seats=seats)["game_id"]
            for state in states:
                for seat in seats:
                    await service.decide(game_id, seat, state)
            await service.end_game(game_id, {"0": 1.0, "1": -1.0})
        return service.outbox.take()

    records = inprocess(body)  # the spool's records, as a server ships them
    by_game: dict[str, list[str]] = {}
    for record in records:
        by_game.setdefault(record["game_id"], []).append(record["table"])
    assert sorted(map(tuple, by_game.values())) == [
        ("league",),
        ("rules",),
        ("self-play", "self-play"),
    ]
    untagged = {k: v for k, v in records[0].items() if k != "table"}  # an older server's
    untagged["id"] = "untagged"
    # Over the link: one EPISODES frame, framed and read back as the trainer does.
    kind, body = wire.unpack_body(wire.pack_body(protocol.episodes([*records, untagged])))
    received = protocol.read_episodes(body)
    episodes = [validate_episode(r, ADAPTER.obs_size, ADAPTER.num_actions) for r in received]
    assert [e.custom_data["table"] for e in episodes] == [*(r["table"] for r in records), ""]
    batch: dict = {}
    RulesTables()(rl_module=None, batch=batch, episodes=episodes)
    columns = [np.concatenate(v) for v in batch[COLUMN].values()]
    assert [len(c) for c in columns] == [len(e) for e in episodes]
    for column, record in zip(columns, [*records, untagged], strict=True):
        assert set(column.tolist()) == {1.0 if record.get("table") == "rules" else 0.0}
    # The in-process trainer's seat env makes untagged episodes, all at its one table.
    batch = {}
    RulesTables(untagged="rules")(rl_module=None, batch=batch, episodes=episodes[-1:])
    assert set(np.concatenate(next(iter(batch[COLUMN].values()))).tolist()) == {1.0}


OBS, SLOTS = 6, 5
SPACE = gym.spaces.Dict({
    "observations": gym.spaces.Box(-np.inf, np.inf, (OBS,), np.float32),
    "action_mask": gym.spaces.Box(0.0, 1.0, (SLOTS,), np.float32),
})  # fmt: skip


@pytest.mark.integration  # builds an RLlib learner in-process (no Ray session)
def test_the_release_never_sees_a_hand_from_another_table():
    """An update of hands mostly at a best response's table (-1.07 a hand against the
    clone's values, as leduc's league) and some at the rules' (+0.5): the gain the anchor
    judges is the rules' hands' alone, and it lets go; read over every hand (the bug: -0.87,
    below the clone's floor) it would have pulled back. An update of no rules hands gives
    no gain: the anchor's clock then runs on (no verdict, the coefficient decays)."""
    torch.manual_seed(0)
    config = base_config(ModelSpec(algo="ppo", hiddens=[8]), Hyper(train_batch_size=8,
                         minibatch_size=8), SPACE, gym.spaces.Discrete(SLOTS))  # fmt: skip
    learner = config.build_learner(spaces={DEFAULT_MODULE_ID: (SPACE, gym.spaces.Discrete(SLOTS))})
    module = learner.module[DEFAULT_MODULE_ID].unwrapped()
    learner.set_rules_reference(module_weights(module), DEFAULT_MODULE_ID)
    rows = 64
    rng = np.random.default_rng(0)
    obs = {"observations": torch.from_numpy(rng.normal(size=(rows, OBS)).astype(np.float32)),
           "action_mask": torch.ones(rows, SLOTS)}  # fmt: skip
    batch = {Columns.OBS: obs, Columns.ACTIONS: torch.zeros(rows, dtype=torch.int64)}
    with torch.no_grad():
        fwd = module.forward_train(batch)
        values = module.compute_values(batch, embeddings=fwd.get(Columns.EMBEDDINGS))
    first = torch.arange(rows) % 2 == 0  # a hand every two steps: 32 hands
    at_rules = (torch.arange(rows) % 16 < 2).float()  # 4 of them at the rules' table
    gain = torch.where(at_rules > 0, 0.5, -1.07)
    returns = torch.where(first, values + gain, torch.nan)
    learner.metrics.reduce()

    def update(table_column: torch.Tensor) -> dict:
        part = {**batch, HAND_RETURN: returns, COLUMN: table_column}
        with torch.no_grad():
            learner._anchor_term(DEFAULT_MODULE_ID, part, module.forward_train(part))
        reduced = learner.metrics.reduce()[DEFAULT_MODULE_ID]
        stats = {k: float(v.peek()) for k, v in reduced.items()}
        return ra.learner_stats({"learners": {DEFAULT_MODULE_ID: stats}})

    rules_only = update(at_rules)
    assert rules_only["gain"] == pytest.approx(0.5, abs=1e-5)  # the 4 rules hands, no other
    every_hand = update(torch.ones(rows))  # as if every table were the rules'
    assert every_hand["gain"] == pytest.approx((4 * 0.5 - 28 * 1.07) / 32, abs=1e-5)
    assert "gain" not in update(torch.zeros(rows))  # a league-only update: no evidence

    def judged(stats: dict | None) -> ra.Release:
        anchor, release = ra.RulesAnchor(), ra.Release(floor=-0.29)
        for update_no in range(1, 6):
            gain, se = (None, None) if stats is None else (stats["gain"], stats["gain_se"] + 0.01)
            release.observe(gain, se, update_no * 4000.0, anchor)
        return release

    assert judged(rules_only).released
    pulled = judged(every_hand)
    assert not pulled.released and pulled.held_back > 0  # what the league bench met
    unjudged = judged(None)  # five updates without a rules hand
    assert unjudged.gains == [] and unjudged.verdict() == 0 and not unjudged.released
    assert unjudged.clock(20_000.0) == 20_000.0  # never set back: the pull decays


def test_the_in_process_trainers_episodes_are_at_its_seat_envs_one_table():
    """`bench train`, `bench rules-anchor` and `croupier tune` play a seat env against one
    opponent: their untagged episodes count as its table (the rules' by default)."""
    from croupier.games.registry import load_adapter
    from croupier.trainer.algo import anchor_config

    adapter, spec = load_adapter(GAME), ModelSpec(algo="ppo", hiddens=[8])

    def untagged(**env_config: str) -> list[str]:
        config = anchor_config(GAME, spec, env_config=env_config or None)
        pipeline = config.build_learner_connector(adapter.observation_space, adapter.action_space)
        return [p.untagged for p in pipeline.connectors if isinstance(p, RulesTables)]

    assert untagged() == [RULES_TABLE]
    assert untagged(opponent="random") == ["random"]
