"""The RLCard table wrapper the reference engine drives, without a server."""

from __future__ import annotations

import json
import random

import pytest

from croupier.engine.rlcard_games import RLCardTable


def play(table: RLCardTable, rng: random.Random, max_steps: int = 5000) -> list[dict]:
    states = []
    for _ in range(max_steps):
        if table.is_over():
            return states
        state = table.state_json(table.current_player())
        json.dumps(state)  # plain JSON types only
        assert state["legal_actions"] == table.legal_actions()
        states.append(state)
        table.step(rng.choice(state["legal_actions"]))
    raise AssertionError("hand did not finish")


@pytest.mark.parametrize("game", ["leduc-holdem", "uno"])
def test_hands_play_to_completion(game):
    table = RLCardTable(game)
    rng = random.Random(0)
    for hand in range(20 if game == "uno" else 200):
        table.reset(seed=hand)
        assert play(table, rng)
        payoffs = table.payoffs()
        assert len(payoffs) == 2 and all(type(p) is float for p in payoffs)
        assert sum(payoffs) == pytest.approx(0.0)


def test_same_seed_same_deal():
    a, b = RLCardTable("leduc-holdem"), RLCardTable("leduc-holdem")
    a.reset(seed=42)
    b.reset(seed=42)
    assert a.state_json(a.current_player()) == b.state_json(b.current_player())


def test_illegal_action_rejected():
    table = RLCardTable("leduc-holdem")
    table.reset(seed=1)
    state = table.state_json(table.current_player())
    illegal = next(a for a in ["call", "raise", "fold", "check"] if a not in state["legal_actions"])
    with pytest.raises(ValueError):
        table.step(illegal)


def test_unknown_game():
    with pytest.raises(ValueError):
        RLCardTable("chess")


def test_doudizhu_hands_play_to_completion_with_states_the_adapter_reads():
    from croupier.games.registry import load_adapter

    adapter = load_adapter("doudizhu")
    table = RLCardTable("doudizhu")
    rng = random.Random(0)
    for hand in range(5):
        table.reset(seed=hand)
        roles = table.roles()
        assert roles is not None and sorted(roles) == ["landlord", "peasant", "peasant"]
        for state in play(table, rng):
            obs, cands = adapter.encode(state)  # own hand, played cards, trace, cards left...
            assert len(cands) == len(state["legal_actions"]) and obs.shape == (adapter.obs_size,)
        payoffs = table.payoffs()
        assert len(payoffs) == 3 and sorted(payoffs) in ([0.0, 0.0, 1.0], [0.0, 1.0, 1.0])
    table.reset(seed=7)
    first = (table.roles(), table.state_json(table.current_player()))
    table.reset(seed=7)  # a replayed deal: the same cards, the same landlord
    assert (table.roles(), table.state_json(table.current_player())) == first


@pytest.mark.parametrize("game", ["leduc-holdem", "uno", "doudizhu"])
def test_the_tables_states_are_rlcards_own_env_states(game):
    """The table steps RLCard's game, not its env, and doudizhu's reuses the state the game
    kept from its last step: hand for hand, the same states, legal moves and payoffs as
    RLCard's env gives (a stale cached state would differ here)."""
    import rlcard

    from croupier.engine.rlcard_games import to_json

    table, env = RLCardTable(game), rlcard.make(game)
    rng = random.Random(3)
    for hand in range(10):
        table.reset(seed=hand)
        env.seed(hand)
        env.reset()
        while not env.is_over():
            player = env.get_player_id()
            assert table.current_player() == player and not table.is_over()
            raw = to_json(env.get_state(player)["raw_obs"])
            mine = table.state_json(player)
            if game == "doudizhu":
                raw["legal_actions"] = raw.pop("actions")
            assert {k: mine[k] for k in raw} == raw
            for other in range(table.num_players):  # every seat's view, built afresh
                fresh = to_json(env.game.get_state(other))
                assert {k: table.state_json(other).get(k) for k in fresh if k != "actions"} == {
                    k: v for k, v in fresh.items() if k != "actions"}  # fmt: skip
            legal = [str(a) for a in env.get_state(player)["raw_legal_actions"]]
            assert table.legal_actions() == legal
            action = rng.choice(legal)
            table.step(action)
            env.step(action, raw_action=True)
        assert table.is_over() and table.payoffs() == [float(p) for p in env.get_payoffs()]


class _InProcessClient:
    """The engine's client calls answered by a `DecisionService` in this process."""

    def __init__(self, service):  # noqa: ANN001
        self.service = service

    async def create_game(self, game, seats=None, record=None):  # noqa: ANN001, ANN201
        record = True if record is None else record
        return self.service.create_game(game, None, seats, record=record)

    async def decide(self, game_id, seat, state):  # noqa: ANN001, ANN201
        return (await self.service.decide(game_id, seat, state)).to_dict()

    async def end(self, game_id, payoffs):  # noqa: ANN001, ANN201
        return await self.service.end_game(game_id, payoffs)

    async def abort(self, game_id):  # noqa: ANN001, ANN201
        self.service.abort_game(game_id)


def test_doudizhu_deals_are_replayed_with_roles_rotated_and_scored_per_side(tmp_path):
    import asyncio

    from croupier.api.components import build_components
    from croupier.config import ServerConfig
    from croupier.engine.runner import _table_loop, _Tally

    service = build_components(ServerConfig(game="doudizhu", data_dir=tmp_path)).service
    client = _InProcessClient(service)
    created: list[dict] = []
    create = service.create_game
    service.create_game = lambda *a, **k: created.append(a[2]) or create(*a, **k)
    tally = _Tally("doudizhu", hands=6, seconds=None)
    asyncio.run(_table_loop(client, client.decide, "doudizhu", 0, tally,
                            ["random", "rules", "rules"], seed=1))  # fmt: skip
    assert tally.hands == 6 and tally.errors == 0
    # Two deals, each played under the three rotations of the seats' policies.
    assert [c["0"] for c in created] == ["random", "rules", "rules"] * 2
    summary = tally.summary()
    sides = summary.sides
    # Every deal gives `random` each seat once: as landlord once, as a peasant twice.
    assert sides["random as landlord"].n == 2 and sides["random as peasant"].n == 4
    assert 0.0 <= sides["rules as landlord"].mean <= 1.0
    assert "random as landlord" in summary.format_table()


def test_tables_take_turns_with_several_maps_of_sides(tmp_path, monkeypatch):
    """A league's training mix: with two maps of side to policy, half the tables seat each
    (table i the map i mod 2), every hand seated after its deal."""
    import asyncio
    import contextlib

    from croupier.api.components import build_components
    from croupier.config import ServerConfig
    from croupier.engine import runner

    class _Yielding(_InProcessClient):
        async def create_game(self, game, seats=None, record=None):  # noqa: ANN001, ANN201
            await asyncio.sleep(0)  # as a request would: the other tables go on meanwhile
            return await super().create_game(game, seats, record)

    service = build_components(ServerConfig(game="doudizhu", data_dir=tmp_path)).service
    client = _Yielding(service)

    @contextlib.asynccontextmanager
    async def in_process(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        yield client

    monkeypatch.setattr(runner, "client_for_urls", in_process)
    mixes = [{"landlord": "random", "peasant": "rules"}, {"landlord": "rules", "peasant": "rules"}]
    summary = asyncio.run(runner.run_engine("in-process", "doudizhu", 4, None, 16, None,
                                            sides=mixes))  # fmt: skip
    assert summary.hands == 16 and summary.errors == 0
    # Only the first map seats `random`, and only as the landlord; both maps were played.
    random_landlord, rules_landlord = (
        summary.sides[f"{p} as landlord"].n for p in ("random", "rules")
    )
    assert random_landlord + rules_landlord == 16 and random_landlord >= 4 and rules_landlord >= 4
    assert "random as peasant" not in summary.sides
    assert summary.sides["rules as peasant"].n == 16  # one result a hand for the pair
    with pytest.raises(ValueError, match="name landlord and peasant"):
        asyncio.run(runner.run_engine("in-process", "doudizhu", 4, None, 16, None,
                                      sides=[mixes[0], {"landlord": "rules"}]))  # fmt: skip


@pytest.mark.parametrize(
    "sides, message",
    [(["landlord=learned"], "name landlord and peasant"),
     (["landlord=learned,peasant=rules", "landlord"], "expected side=policy")],
)  # fmt: skip
def test_engine_sides_it_cannot_seat_are_a_one_line_usage_error(sides, message):
    """Checked before any hand or connection (no server at this URL): exit 2, no traceback."""
    from typer.testing import CliRunner

    from croupier.cli import app

    args = ["engine", "--url", "http://127.0.0.1:9", "--game", "doudizhu", "--hands", "3"]
    result = CliRunner().invoke(app, args + [a for s in sides for a in ("--sides", s)])
    assert result.exit_code == 2 and message in result.output, result.output
    assert "Traceback" not in result.output
