"""Payoffs and rewards an engine cannot break monitoring with: each game's declared payoff range
refused outside (422, counted, nothing recorded), statistics that cannot overflow, and
`/metrics`, `/v1/arena/live` and the dashboard data answering 200 after any sequence of
requests a key holder can send."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import httpx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from croupier.games.base import DEFAULT_PAYOFF_RANGE
from croupier.games.registry import MAX_PAYOFF, check_payoff_range, load_adapter
from croupier.games.vector import VectorAdapter
from croupier.stats import Mean
from tests.helpers.api import STATE
from tests.helpers.prometheus import parse, value

ENGINE = {"Authorization": "Bearer eng"}
READ = {"Authorization": "Bearer rd"}
KEYS = dict(api_keys=["eng"], read_keys=["rd"], admin_keys=["adm"])


async def _monitoring(client: httpx.AsyncClient) -> dict[str, Any]:
    """The three views an operator reads; each must answer 200 with a well-formed body."""
    metrics = await client.get("/metrics")
    live = await client.get("/v1/arena/live", headers=READ)
    data = await client.get("/dashboard/data.json", headers=READ)
    assert (metrics.status_code, live.status_code, data.status_code) == (200, 200, 200), (
        metrics.text[-300:],
        live.text[-300:],
        data.text[-300:],
    )
    return {"metrics": parse(metrics.text), "live": live.json(), "data": data.json()}


async def _leduc_game(client: httpx.AsyncClient, seats: dict[str, str]) -> str:
    r = await client.post(
        "/v1/games", json={"game": "leduc-holdem", "seats": seats}, headers=ENGINE
    )
    assert r.status_code == 201, r.text
    game_id = r.json()["game_id"]
    d = await client.post(
        f"/v1/games/{game_id}/decide", json={"seat": "0", "state": STATE}, headers=ENGINE
    )
    assert d.status_code == 200, d.text
    return game_id


def test_the_reviews_sequence_is_refused_and_monitoring_stays_up(inprocess, tmp_path) -> None:
    """Three games ended with payoffs {0: 1e200, 1: -1e200} (the probe that turned /metrics,
    /v1/arena/live and the dashboard data into 500s until a restart): each `end` is a 422
    naming the range, nothing is recorded or counted as a game, the games stay open for a
    correct `end`, and every monitoring view answers 200."""

    async def play(client: httpx.AsyncClient, service: Any) -> None:
        before = await _monitoring(client)
        recorded = service.outbox.stats()["recorded"]
        for _ in range(3):
            game_id = await _leduc_game(client, {"0": "learned", "1": "rules"})
            end = await client.post(
                f"/v1/games/{game_id}/end",
                json={"payoffs": {"0": 1e200, "1": -1e200}},
                headers=ENGINE,
            )
            assert end.status_code == 422, end.text
            problem = end.json()
            assert "payoff range" in problem["detail"] and "[-7, 7]" in problem["detail"]
            # the game is still open: a correct end closes it and records its episode
            ok = await client.post(
                f"/v1/games/{game_id}/end", json={"payoffs": {"0": 1.0, "1": -1.0}}, headers=ENGINE
            )
            assert ok.status_code == 200, ok.text
        after = await _monitoring(client)
        assert service.outbox.stats()["recorded"] == recorded + 3  # the three correct ends only
        assert after["live"]["games"] == before["live"]["games"] + 3
        assert all(abs(row["mean"]) <= 7 for row in after["live"]["rows"])
        assert value(after["metrics"], "croupier_refused_payoffs_total") == 3
        # a reward beyond what the game can pay is refused the same way
        game_id = await _leduc_game(client, {"0": "rules", "1": "rules"})
        far = await client.post(
            f"/v1/games/{game_id}/decide",
            json={"seat": "0", "state": STATE, "reward": -1e200},
            headers=ENGINE,
        )
        assert far.status_code == 422 and "reward" in far.json()["detail"], far.text
        metrics = (await _monitoring(client))["metrics"]
        assert value(metrics, "croupier_refused_payoffs_total") == 4

    inprocess(play, game="leduc-holdem", weights_dir=tmp_path, seed=1, **KEYS)


def test_built_in_games_declare_their_payoff_ranges() -> None:
    """Ranges from each game's rules; a custom game gets the default; `describe` says it."""
    ranges = {
        "leduc-holdem": (-7.0, 7.0),
        "uno": (-1.0, 1.0),
        "doudizhu": (0.0, 1.0),
        "examples.kuhn.adapter:KuhnAdapter": (-2.0, 2.0),
    }
    for game, expected in ranges.items():
        adapter = load_adapter(game)
        assert tuple(adapter.payoff_range) == expected
        assert adapter.describe()["payoff_range"] == list(expected)
    vector = load_adapter("vector", obs_size=3, num_actions=2)
    assert tuple(vector.payoff_range) == DEFAULT_PAYOFF_RANGE
    assert vector.payoff_problem({"0": 1e5, "1": -1e5}) is None
    assert "outside" in vector.payoff_problem({"0": 1e7, "1": 0.0})
    assert "finite" in vector.payoff_problem({"0": math.nan, "1": 0.0})
    assert vector.reward_problem(-1e6) is None and vector.reward_problem(1.5e6) is not None


def test_the_leduc_range_is_the_games_own() -> None:
    """RLCard's leduc pays at most 7 (14 chips over a big blind of 2), reached by raising at
    every turn: the declared range is tight, not a guess."""
    import rlcard

    env = rlcard.make("leduc-holdem")
    largest = 0.0
    for seed in range(200):
        env.seed(seed)
        env.reset()
        game = env.game
        while not game.is_over():
            legal = game.get_legal_actions()
            game.step("raise" if "raise" in legal else "call" if "call" in legal else legal[0])
        largest = max(largest, *map(abs, env.get_payoffs()))
    assert largest == load_adapter("leduc-holdem").payoff_range[1]


@pytest.mark.parametrize(
    "declared", [(math.nan, 1.0), (-math.inf, 1.0), (1.0, -1.0), (-1e13, 0.0), ("a", "b"), (1,)]
)
def test_a_declared_range_must_be_finite_ordered_and_bounded(declared) -> None:
    adapter = VectorAdapter(3, 2)
    adapter.payoff_range = declared  # type: ignore[assignment]
    with pytest.raises(ValueError, match="payoff_range"):
        check_payoff_range(adapter)


@given(st.lists(st.floats(-MAX_PAYOFF, MAX_PAYOFF), min_size=0, max_size=60))
def test_mean_is_finite_and_agrees_with_numpy_for_any_payoffs_in_range(xs: list[float]) -> None:
    """Welford's mean and variance over the widest payoffs a game may declare: finite, and
    merged halves equal the whole."""
    whole, left, right = Mean(), Mean(), Mean()
    for i, x in enumerate(xs):
        whole.add(x)
        (left if i % 2 else right).add(x)
    left.merge(right)
    for m in (whole, left):
        assert m.n == len(xs) and math.isfinite(m.mean) and math.isfinite(m.var)
        d = m.to_dict()
        assert d["n"] == len(xs)
    if len(xs) >= 2:
        arr = np.array(xs)
        scale = max(1.0, float(np.abs(arr).max()))
        assert whole.mean == pytest.approx(arr.mean(), abs=1e-9 * scale)
        assert whole.var == pytest.approx(arr.var(ddof=1), rel=1e-6, abs=1e-9 * scale**2)
        assert left.var == pytest.approx(whole.var, rel=1e-6, abs=1e-9 * scale**2)


def test_mean_of_published_summaries_merges_like_the_samples() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(3, 2, 500), rng.normal(-1, 5, 300)
    merged = Mean.of(len(a), a.mean(), a.std(ddof=1))
    merged.merge(Mean.of(len(b), b.mean(), b.std(ddof=1)))
    both = np.concatenate([a, b])
    assert merged.mean == pytest.approx(both.mean()) and merged.var == pytest.approx(
        both.var(ddof=1)
    )


class WideGame(VectorAdapter):
    """A custom game declaring the widest range allowed: the worst an adapter can ask for."""

    def __init__(self) -> None:
        super().__init__(obs_size=4, num_actions=3, name="wide")
        self.payoff_range = (-MAX_PAYOFF, MAX_PAYOFF)


_payoff = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e200, -1e200, MAX_PAYOFF, -MAX_PAYOFF, 0.0, 5e-324]),
    st.integers(-(10**20), 10**20),
)
_action = st.one_of(
    st.tuples(st.just("end"), st.integers(0, 5), _payoff, _payoff),
    st.tuples(st.just("decide"), st.integers(0, 5), _payoff, st.booleans()),
    st.tuples(st.just("create"), st.sampled_from(["learned", "rules", "random", "learned:greedy"])),
)


def test_monitoring_answers_200_after_any_sequence_of_hostile_payoffs() -> None:
    """Hypothesis plays sequences of creates, decides (with rewards) and ends (with payoffs of
    any magnitude, NaN and infinities as JSON can or cannot carry them) against one server
    (state accumulates across examples, as on a real one); after each, every monitoring view
    answers 200 and no number it publishes is out of the declared range."""
    from croupier.api.app import create_app
    from croupier.config import ServerConfig

    loop = asyncio.new_event_loop()
    app = create_app(ServerConfig(game="tests.test_hostile_payoffs:WideGame", seed=0, **KEYS))
    lifespan = app.router.lifespan_context(app)
    loop.run_until_complete(lifespan.__aenter__())
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://c")
    games: list[str] = []
    state = {"obs": [0.1, 0.2, 0.3, 0.4], "legal_actions": [0, 2]}

    async def run(actions: list[tuple]) -> None:
        for action in actions:
            if action[0] == "create":
                r = await client.post(
                    "/v1/games",
                    json={"game": "wide", "seats": {"0": action[1], "1": "rules"}},
                    headers=ENGINE,
                )
                if r.status_code == 201:
                    games.append(r.json()["game_id"])
                    if len(games) > 8:
                        games.pop(0)
                continue
            if not games:
                continue
            game_id = games[action[1] % len(games)]
            if action[0] == "decide":
                body = {"seat": "0", "state": state}
                if action[3]:
                    body["reward"] = action[2]
                r = await client.post(
                    f"/v1/games/{game_id}/decide",
                    content=_dumps(body),
                    headers={**ENGINE, "content-type": "application/json"},
                )
            else:
                body = {"payoffs": {"0": action[2], "1": action[3]}}
                r = await client.post(
                    f"/v1/games/{game_id}/end",
                    content=_dumps(body),
                    headers={**ENGINE, "content-type": "application/json"},
                )
            assert r.status_code < 500, r.text
        views = await _monitoring(client)
        for row in views["live"]["rows"]:
            assert abs(row["mean"]) <= MAX_PAYOFF and math.isfinite(row["std"])

    @settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(st.lists(_action, min_size=1, max_size=25))
    def sequence(actions: list[tuple]) -> None:
        loop.run_until_complete(run(actions))

    try:
        sequence()
    finally:
        loop.run_until_complete(client.aclose())
        loop.run_until_complete(lifespan.__aexit__(None, None, None))
        loop.close()


def _dumps(body: dict[str, Any]) -> bytes:
    """JSON as a careless engine writes it: NaN and Infinity as bare words (Python's json)."""
    import json

    return json.dumps(body).encode()


def test_one_failing_collector_leaves_the_scrape_up(inprocess) -> None:
    """A collector that raises costs only its own metrics, counted; the scrape is a 200."""

    class Broken:
        def collect(self):  # noqa: ANN202
            raise OverflowError("a bug in one collector")

    async def scrape(client: httpx.AsyncClient, service: Any) -> dict:
        client._transport.app.state.metrics.register("broken", Broken())  # type: ignore[attr-defined]
        r = await client.get("/metrics")
        assert r.status_code == 200
        return parse(r.text)

    metrics = inprocess(scrape, game="leduc-holdem")
    assert value(metrics, "croupier_metrics_collector_errors_total", collector="broken") == 1
    assert value(metrics, "croupier_games_created_total") == 0  # the others are all there


def test_a_server_can_take_its_engines_own_scoring_of_a_built_in_game(inprocess) -> None:
    """`--payoff-range` replaces the declared range: doudizhu scored +-2 by a studio's engine."""
    from croupier.config import ServerConfig

    assert ServerConfig().payoff_range is None
    adapter = load_adapter("doudizhu", payoff_range=(-2.0, 2.0))
    assert adapter.payoff_problem({"0": -2.0, "1": 2.0, "2": 0.0}) is None
    assert load_adapter("doudizhu").payoff_problem({"0": -2.0, "1": 2.0, "2": 0.0}) is not None
    with pytest.raises(ValueError, match="payoff_range"):
        load_adapter("doudizhu", payoff_range=(2.0, -2.0))

    async def end(client: httpx.AsyncClient, service: Any) -> int:
        r = await client.post("/v1/games", json={"game": "leduc-holdem"})
        game_id = r.json()["game_id"]
        r = await client.post(f"/v1/games/{game_id}/end", json={"payoffs": {"0": 12, "1": -12}})
        return r.status_code

    assert inprocess(end, game="leduc-holdem", payoff_range=(-14.0, 14.0)) == 200
    assert inprocess(end, game="leduc-holdem") == 422
