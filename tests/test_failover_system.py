"""Failover with real processes: two `croupier serve`, an engine loop over `RoutedClient`
playing many concurrent games, one server SIGKILLed mid-play and started again. The engine
sees no failed decision; the moved games' lost fragments are counted at both ends; games that
moved stay where they went when the dead server is back (no 404), new games reach it again."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from croupier.client import route_game
from croupier.engine.batching import BatchingClient
from croupier.engine.rlcard_games import RLCardTable
from croupier.local_server import free_port, get_json, start_serve, stop, wait_until_up
from croupier.routing import RoutedClient

pytestmark = pytest.mark.system

GAME = "leduc-holdem"
TABLES = 24
ARGS = ("--game", GAME, "--seats", "learned,rules", "--data-dir", "none", "--log-level", "warning")


@contextlib.contextmanager
def two_servers() -> Iterator[list[dict[str, Any]]]:
    """Two servers started together (their imports overlap); each {"url", "port", "proc"}."""
    servers: list[dict[str, Any]] = []
    try:
        for _ in range(2):
            port = free_port()
            proc = start_serve(ARGS, port)
            servers.append({"url": f"http://127.0.0.1:{port}", "port": port, "proc": proc})
        for s in servers:
            wait_until_up(s["url"], s["proc"], timeout=60, poll_s=0.1)
        yield servers
    finally:
        for s in servers:
            stop(s["proc"], 10)


def checked(answer: dict[str, Any]) -> dict[str, Any]:
    """A batch route's item: its error raised, as a player would see it."""
    if answer.get("error"):
        raise AssertionError(f"item failed: {answer['error']}")
    return answer


class Engine:
    """`TABLES` tables playing hands through one RoutedClient (a third of them through its
    batch routes); every failure counted."""

    def __init__(self, client: RoutedClient, batching: BatchingClient):
        self.client = client
        self.batching = batching
        self.hands = self.decisions = 0
        self.failed: list[BaseException] = []
        self.stop = asyncio.Event()
        self.mid_hand: set[str] = set()  # games between create and end right now

    async def table(self, index: int) -> None:
        table = RLCardTable(GAME)
        table.reset(index)
        client: Any = self.batching if index % 3 == 0 else self.client
        while not self.stop.is_set():
            try:
                seats = {"0": "learned", "1": "rules"} if index % 2 else None
                created = checked(await client.create_game(GAME, seats=seats))
                gid = created["game_id"]
                self.mid_hand.add(gid)
                table.reset()
                while not table.is_over():
                    p = table.current_player()
                    d = checked(await client.decide(gid, str(p), table.state_json(p)))
                    table.step(d["action"])
                    self.decisions += 1
                    await asyncio.sleep(0.002)  # a table's pace: hands span the kill
                payoffs = dict(zip(("0", "1"), table.payoffs(), strict=True))
                checked(await client.end(gid, payoffs))
                self.mid_hand.discard(gid)
                self.hands += 1
            except Exception as e:  # a player-facing error: the test fails on any
                self.failed.append(e)
                await asyncio.sleep(0.05)


# Seat 0's first decision of a Leduc hand (the game's seats: the server's mix).
STATE = {"hand": "SJ", "public_card": None, "all_chips": [1, 2], "my_chips": 1,
         "legal_actions": ["call", "raise", "fold"], "current_player": 0}  # fmt: skip


def owned_by(url: str, urls: list[str]) -> str:
    """A fresh game id that routes to `url`."""
    return next(g for g in (f"idle-{i}" for i in range(1000)) if route_game(g, urls) == url)


async def until(predicate: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


def test_sigkill_of_one_of_two_servers_mid_play_fails_no_decision() -> None:
    started = time.monotonic()
    with two_servers() as servers:
        print(f"\nservers up in {time.monotonic() - started:.1f} s")
        urls = [s["url"] for s in servers]
        victim = servers[0]

        async def play() -> dict[str, Any]:
            async with (
                RoutedClient(urls, max_connections=TABLES) as client,
                BatchingClient(client) as batching,
            ):
                engine = Engine(client, batching)
                tasks = [asyncio.create_task(engine.table(i)) for i in range(TABLES)]
                t0 = time.monotonic()
                try:
                    await until(lambda: engine.hands >= 150, 20)
                    # A game on the victim that stays idle through the outage (one decision
                    # in): when the victim is back without it, a 404, resumed in place.
                    idle = await client.create_game(GAME, game_id=owned_by(victim["url"], urls))
                    await client.decide(idle["game_id"], "0", STATE)
                    t_kill = time.monotonic()
                    on_victim = {g for g in engine.mid_hand if client.url_for(g) == victim["url"]}
                    victim["proc"].kill()  # SIGKILL: nothing flushed, nothing said
                    victim["proc"].wait(10)
                    killed_at = engine.hands
                    await until(lambda: engine.hands >= killed_at + 200, 20)
                    moved = client.failover.games_moved
                    # The victim comes back on its port; new games reach it again.
                    victim["proc"] = start_serve(ARGS, victim["port"])
                    await asyncio.to_thread(wait_until_up, victim["url"], victim["proc"], 60, 0.1)
                    # The client's breaker probes it (every 15 s at most): then it is back.
                    await until(lambda: not client.is_open(victim["url"]), 30)
                    back_at = engine.hands
                    await client.decide(idle["game_id"], "0", STATE)  # lost there: resumed
                    assert client.url_for(idle["game_id"]) == victim["url"]
                    t_back = time.monotonic()
                    await until(lambda: engine.hands >= back_at + 150, 20)
                finally:
                    engine.stop.set()
                    await asyncio.gather(*tasks)
                return {
                    "engine": engine,
                    "stats": client.failover.to_dict(),
                    "on_victim": on_victim,
                    "moved_before_return": moved,
                    "killed_at": killed_at,
                    "phases_s": [
                        round(t_kill - t0, 1),
                        round(t_back - t_kill, 1),
                        round(time.monotonic() - t_back, 1),
                    ],
                }

        out = asyncio.run(play())
        engine, stats = out["engine"], out["stats"]
        assert engine.failed == [], (len(engine.failed), engine.failed[:3])
        assert engine.hands > out["killed_at"] + 350
        # Games mid-hand on the victim at the kill moved (give or take those whose answer it
        # had already sent, a create's included: a SIGKILL does not take back bytes on the wire).
        assert out["on_victim"] and stats["games_moved"] >= 1
        assert stats["games_moved"] == out["moved_before_return"]  # none moved back
        assert stats["fragments_dropped"] >= 1 and stats["games_resumed_in_place"] == 1
        survivor = get_json(servers[1]["url"] + "/healthz")
        assert survivor["games_resumed"] == stats["games_moved"]
        back = get_json(victim["url"] + "/healthz")
        # Each server counts every recorded seat of the games it resumed (the idle game's on
        # the victim, back); the client only seats that had acted: never more than theirs.
        dropped_there = survivor["resumed_fragments_dropped"] + back["resumed_fragments_dropped"]
        assert dropped_there >= stats["fragments_dropped"], (survivor, back, stats)
        assert back["games_created"] > 0  # new games route to it again
        assert back["games_resumed"] == 1  # the idle game only: nothing moved back
        print(
            f"\nfailover: {engine.hands} hands, {engine.decisions} decisions, "
            f"0 failed; {stats}; survivor {survivor['games_resumed']} resumed, "
            f"{survivor['resumed_fragments_dropped']} fragments dropped; phases {out['phases_s']}"
        )
