"""A slow server is a gone server, in process: the client's deadlines, the routed client's
circuit breaker (a frozen server's games move, its circuit probed shut again) and the engine's
per-server batch queues. Each server is a real app under uvicorn on loopback behind a TCP
relay that can be frozen as SIGSTOP freezes a process: connections still accepted, nothing
answered. Real processes SIGSTOPped: tests/test_server_freeze.py (`make test-long`)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from croupier.client import CroupierClient, Deadlines, route_game
from croupier.engine.batching import BatchingClient
from croupier.routing import CircuitOpen, RoutedClient, unavailable

GAME = "leduc-holdem"
# Seat 0's first decision of a Leduc hand.
STATE = {"hand": "SJ", "public_card": None, "all_chips": [1, 2], "my_chips": 1,
         "legal_actions": ["call", "raise", "fold"], "current_player": 0}  # fmt: skip
# Short, so the test is quick; far above a loopback answer of an idle in-process app (ms).
FAST = Deadlines(connect_s=1.0, first_byte_s=0.5, total_s=2.0)
LOOP_BOUND_S = 20.0  # every wait below is bounded by this
# Real loopback sockets and deadlines waited out (3-4 s each): `make test`, not the fast tier.
SOCKETS = pytest.mark.integration


class Relay:
    """A loopback TCP relay in front of a server. `freeze()`: bytes stop flowing both ways
    (new connections are still accepted, as the kernel accepts them for a stopped process);
    `thaw()`: what was held flows on."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.server: asyncio.Server | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def start(self) -> Relay:
        self.server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        return self

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    def freeze(self) -> None:
        self.flowing.clear()

    def thaw(self) -> None:
        self.flowing.set()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            self.tasks.discard(task)
            writer.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                await self.flowing.wait()
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def servers(n: int) -> AsyncIterator[list[Relay]]:
    """`n` real apps (leduc, learned,rules) under uvicorn on loopback, each behind a Relay."""
    import uvicorn  # the app's imports (torch) here: the fast tier's tests below need none

    from croupier.api.app import create_app
    from croupier.config import ServerConfig

    async with contextlib.AsyncExitStack() as stack:
        relays = []
        for _ in range(n):
            app = create_app(ServerConfig(game=GAME, data_dir=None))
            server = uvicorn.Server(
                uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
            )
            task = asyncio.create_task(server.serve())
            deadline = time.monotonic() + LOOP_BOUND_S
            while not server.started:
                assert time.monotonic() < deadline and not task.done(), "app did not start"
                await asyncio.sleep(0.02)

            async def stop(server: Any = server, task: asyncio.Task = task) -> None:
                server.should_exit = True
                await asyncio.wait_for(task, LOOP_BOUND_S)

            stack.push_async_callback(stop)
            port = server.servers[0].sockets[0].getsockname()[1]
            relay = await Relay(port).start()
            stack.push_async_callback(relay.close)
            relays.append(relay)
        yield relays


def owned_by(url: str, urls: list[str], prefix: str) -> list[str]:
    """Game ids (of 200 tried) whose owner is `url`."""
    return [g for g in (f"{prefix}-{i}" for i in range(200)) if route_game(g, urls) == url]


async def until(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + LOOP_BOUND_S
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def test_deadlines_reach_aiohttp_and_refuse_nonsense():
    timeout = Deadlines(connect_s=1.0, first_byte_s=3.0, total_s=7.0).client_timeout()
    assert (timeout.sock_connect, timeout.sock_read, timeout.total) == (1.0, 3.0, 7.0)
    # A phase is never allowed longer than the whole request.
    timeout = Deadlines(connect_s=9.0, first_byte_s=9.0, total_s=2.0).client_timeout()
    assert (timeout.sock_connect, timeout.sock_read) == (2.0, 2.0)
    with pytest.raises(ValueError, match="positive"):
        Deadlines(first_byte_s=0)
    # Far below the single 30 s bound there was.
    assert Deadlines().total_s <= 10 and Deadlines().first_byte_s <= 3


def test_a_timeout_and_an_open_circuit_are_unavailable():
    assert unavailable(TimeoutError())
    assert unavailable(CircuitOpen("http://a:1"))


@SOCKETS
def test_a_frozen_server_is_unavailable_after_the_first_byte_deadline():
    async def body() -> None:
        async with servers(1) as [relay], CroupierClient(relay.url, deadlines=FAST) as client:
            assert (await client.health())["status"] == "ok"
            relay.freeze()
            t0 = time.monotonic()
            with pytest.raises(Exception) as caught:  # noqa: PT011 - whatever aiohttp raises
                await client.health()
            waited = time.monotonic() - t0
            assert unavailable(caught.value), repr(caught.value)
            # The first-byte deadline ended it, not the total (nor a 30 s default).
            assert FAST.first_byte_s * 0.9 <= waited < FAST.total_s, waited
            relay.thaw()

    asyncio.run(body())


@SOCKETS
def test_a_frozen_servers_games_move_at_once_and_its_circuit_closes_when_it_thaws():
    async def body() -> None:
        async with servers(2) as relays:
            frozen, healthy = relays
            urls = [r.url for r in relays]
            async with RoutedClient(urls, deadlines=FAST, down_for_s=0.2) as client:
                on_frozen = owned_by(frozen.url, urls, "f")[:6]
                for gid in on_frozen:
                    await client.create_game(GAME, game_id=gid, seats={"0": "learned"})
                    assert client.url_for(gid) == frozen.url
                frozen.freeze()
                # The first call waits out the deadline, then its game moves and is answered.
                t0 = time.monotonic()
                answer = await client.decide(on_frozen[0], "0", STATE)
                assert answer["action"] in STATE["legal_actions"]
                assert time.monotonic() - t0 >= FAST.first_byte_s * 0.9
                assert client.url_for(on_frozen[0]) == healthy.url
                assert client.failover.circuits_opened == 1
                # The circuit is open: the frozen server's other games move without a try.
                t0 = time.monotonic()
                answers = await asyncio.gather(
                    *(client.decide(g, "0", STATE) for g in on_frozen[1:])
                )
                assert all(a["action"] in STATE["legal_actions"] for a in answers)
                assert time.monotonic() - t0 < FAST.first_byte_s
                assert {client.url_for(g) for g in on_frozen} == {healthy.url}
                assert client.failover.games_moved == len(on_frozen)
                # New games it owns go to the other server meanwhile.
                new = owned_by(frozen.url, urls, "n")[0]
                await client.create_game(GAME, game_id=new)
                assert client.url_for(new) == healthy.url
                # Its probes find it still silent (each a deadline long) ...
                await until(lambda: client.failover.probes_failed >= 1, "a failed probe")
                assert client.is_open(frozen.url)
                # ... until it thaws: a probe answers, the circuit closes, new games reach it.
                frozen.thaw()
                await until(lambda: not client.is_open(frozen.url), "the circuit to close")
                assert client.failover.circuits_closed == 1
                back = owned_by(frozen.url, urls, "b")[0]
                await client.create_game(GAME, game_id=back)
                assert client.url_for(back) == frozen.url
                # The moved games stay where they went.
                assert {client.url_for(g) for g in on_frozen} == {healthy.url}

    asyncio.run(body())


@SOCKETS
def test_batched_calls_of_a_healthy_server_do_not_wait_for_a_frozen_one():
    """One batch per server: the healthy server's decisions are answered while the frozen
    one's are still waiting for their deadline (one shared batch would hold them all)."""
    slow = Deadlines(connect_s=1.0, first_byte_s=3.0, total_s=6.0)

    async def body() -> None:
        async with servers(2) as relays:
            frozen, healthy = relays
            urls = [r.url for r in relays]
            async with (
                RoutedClient(urls, deadlines=slow) as routed,
                BatchingClient(routed) as batching,
            ):
                ids = {relay.url: owned_by(relay.url, urls, "g")[:4] for relay in relays}
                for gid in ids[frozen.url] + ids[healthy.url]:
                    await batching.create_game(GAME, game_id=gid, seats={"0": "learned"})
                frozen.freeze()
                # Asked together, as tables do: one pass of the event loop.
                waiting = [
                    asyncio.create_task(batching.decide(g, "0", STATE)) for g in ids[frozen.url]
                ]
                answered = [
                    asyncio.create_task(batching.decide(g, "0", STATE)) for g in ids[healthy.url]
                ]
                done, _ = await asyncio.wait(answered, timeout=slow.first_byte_s * 0.8)
                assert done == set(answered), "the healthy server's decisions waited"
                assert not any(t.done() for t in waiting)
                # The frozen server's games move after the deadline, answered too.
                moved = await asyncio.wait_for(asyncio.gather(*waiting), LOOP_BOUND_S)
                assert all(a["action"] in STATE["legal_actions"] for a in moved)
                assert {routed.url_for(g) for g in ids[frozen.url]} == {healthy.url}
                assert set(batching.calls["decide"].lanes) == set(urls)
                frozen.thaw()

    asyncio.run(body())
