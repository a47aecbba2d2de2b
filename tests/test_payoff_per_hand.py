"""The trainer's payoff per hand: hands in which a learned seat never acted have no episode,
so RLlib's episode return leaves them out; the episode after them carries them (`hands`,
`silent_payoff`) and the trainer reports both figures."""

from __future__ import annotations

import numpy as np

from croupier.trainer.progress import format_progress, per_hand
from croupier.trajectories.record import silent_hands

GAME = "leduc-holdem"


def test_a_silent_hand_rides_on_the_next_episode(inprocess, leduc_states) -> None:
    state = next(s for s in leduc_states if s["current_player"] == 0)

    async def run(c, service) -> list[dict]:
        # The learned seat (1) never acts: no episode, its +0.5 must still count.
        g = (
            await c.post("/v1/games", json={"game": GAME, "seats": {"0": "rules", "1": "learned"}})
        ).json()
        await c.post(f"/v1/games/{g['game_id']}/decide", json={"seat": "0", "state": state})
        await c.post(f"/v1/games/{g['game_id']}/end", json={"payoffs": {"0": -0.5, "1": 0.5}})
        # It acts in the next hand and wins 1.
        g = (
            await c.post("/v1/games", json={"game": GAME, "seats": {"0": "learned", "1": "rules"}})
        ).json()
        await c.post(f"/v1/games/{g['game_id']}/decide", json={"seat": "0", "state": state})
        await c.post(f"/v1/games/{g['game_id']}/end", json={"payoffs": {"0": 1, "1": -1}})
        return service.outbox.take()

    [episode] = inprocess(run)
    assert silent_hands(episode) == (2, 0.5)
    own = float(np.sum(episode["rewards"]))  # the episode's return: 1.0
    assert own == 1.0 and (own + 0.5) / 2 == 0.75  # the payoff per hand the trainer reports


def test_silent_hands_reads_old_records_and_cut_pieces() -> None:
    assert silent_hands({"rewards": [1.0]}) == (1, 0.0)  # an older server's record
    assert silent_hands({"hands": 0}) == (0, 0.0)  # a cut piece: its hand counts at the end
    assert silent_hands({"hands": True, "silent_payoff": "x"}) == (1, 0.0)  # nonsense: 1 hand
    assert silent_hands({"hands": 3, "silent_payoff": -1.0}) == (3, -1.0)
    assert silent_hands(["legacy", "layout"]) == (1, 0.0)


def test_the_progress_line_shows_return_and_payoff_per_hand() -> None:
    stats = {"hands_received": 110, "hand_payoff_received": 70.0}
    payoff = per_hand(stats, (10, 0.0))
    assert payoff == 0.7
    assert per_hand(stats, (110, 70.0)) is None  # no hand since
    line = format_progress(
        {
            "iteration": 3, "version": 3, "env_steps_per_s": 10.0, "env_steps": 100,
            "lag": {"p50": 0, "p90": 1}, "episode_return_mean": 0.85,
            "payoff_per_hand": payoff, "connected_servers": 1,
        }
    )  # fmt: skip
    assert "return 0.85  per hand 0.7  servers 1" in line  # no entropy logged: none shown
    line = format_progress(
        {
            "iteration": 3, "version": 3, "env_steps_per_s": 10.0, "env_steps": 100,
            "lag": {"p50": 0, "p90": 1}, "episode_return_mean": 0.85,
            "payoff_per_hand": payoff, "connected_servers": 1, "policy_entropy": 0.4234,
        }
    )  # fmt: skip
    assert "per hand 0.7  entropy 0.423  servers 1" in line
