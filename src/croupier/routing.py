"""Several policy servers as one client: each game lives on the server `route_game` picks for
its id, so every engine process (and a proxy hashing the same way) agrees without talking.

    async with RoutedClient(["http://a:8000", "http://b:8000"]) as c:
        g = await c.create_game("leduc-holdem")   # the id is chosen here, then routed
        await c.decide(g["game_id"], "0", state)

Failover (docs/scale-out.md): the client remembers, for every game it created, the server
holding it and the seats its create answered. When that server is unavailable (connection
refused, reset or cut off mid-answer, a gateway's 502/504, a restarting server's 503
"starting"), the call goes to the next server in the game's rendezvous order: the game is
re-created there with the same id and seats (`POST /v1/games/{id}/resume`), then the call is
sent again. The player sees no error; what the dead server had recorded of the game's learned
seats is lost, and counted (`failover.fragments_dropped`, and the new server's
`resumed_fragments_dropped`). A game stays where it moved when its first server comes back; new
games route as before. A server that answers 404 for a game the client holds (it restarted, or
expired the game) gets it resumed in place. An overloaded server's 503 is not failed over: it
is alive and holds its games.

A server that does not answer in time (connect, first byte, total: `client.Deadlines`) is
unavailable too: hung, SIGSTOPped or swapping, it accepts connections and answers nothing.
Each server has a circuit breaker: the first unavailable answer opens it; while open, calls
for its games move them at once (no deadline paid per call) and new games go elsewhere; after
`down_for_s` (doubling up to `max_down_for_s` while it stays down) one `GET /healthz` probes
it in the background (half-open), and an answer closes it. One server's slowness never holds
another's games: a batch is one request per server, each failed over on its own, and the
engine's batching keeps one queue per server (engine/batching.py).

Why ~570 lines in one module: routing and failover are one state machine over the same
per-game record (`_Game`: its server, seats, learned seats that acted there); split, each
half would reach into the other's table.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from types import TracebackType
from typing import Any, TypeVar

import aiohttp

from croupier.client import CroupierClient, CroupierError, rank_servers, route_game

T = TypeVar("T")

# Games remembered for failover (oldest forgotten first): ~0.5 kB each. An engine keeps far
# fewer games open at once; a game forgotten is only routed by its id again.
GAMES_TRACKED = 100_000
# A server that failed is skipped this long before a probe asks it again, doubling while the
# probes fail, up to the max: a dead host costs one failed probe per few seconds, not one
# failed call per game; a frozen one that thaws is found within 15 s.
DOWN_FOR_S = 2.0
MAX_DOWN_FOR_S = 15.0
# The policies that record a learned seat's steps (`SeatPolicy.label`).
RECORDING = frozenset({"learned", "learned@latest"})


def parse_urls(text: str) -> list[str]:
    """`http://a:8000,http://b:8000` -> the list (one url is a list of one)."""
    urls = [u.strip().rstrip("/") for u in text.split(",") if u.strip()]
    if not urls:
        raise ValueError("no server url given")
    return urls


STARTING = "urn:croupier:problem:starting"  # `api/early.py`'s answer while a server starts


class CircuitOpen(Exception):
    """A call not sent: its server's circuit is open (it failed, and no probe has answered
    since). Unavailable, as the failure that opened it."""

    def __init__(self, url: str):
        super().__init__(f"{url}: unavailable (circuit open until a probe answers)")
        self.url = url


def unavailable(exc: BaseException) -> bool:
    """The server is not there to hold its games: refused, reset or gone mid-answer, silent
    past a deadline (`client.Deadlines`), a gateway's 502/504, or restarting (503
    "starting", `api/early.py`). An overloaded server's 503 is not this (alive, holding its
    games: retry after `Retry-After`)."""
    # A payload cut short is a server gone mid-answer too: killed after its headers were
    # sent, the body never came (seen under SIGKILL: "received 0 of 131 bytes"). A timeout:
    # a frozen server's connection is accepted by the kernel and never answered (SIGSTOP).
    if isinstance(
        exc,
        aiohttp.ClientConnectionError | aiohttp.ClientPayloadError | TimeoutError | CircuitOpen,
    ):
        return True
    if not isinstance(exc, CroupierError):
        return False
    if exc.status in (502, 504):
        return True
    if exc.status != 503:
        return False
    # A `Problem` of type `starting`; a server before it answered {"status": "starting"}.
    detail = exc.detail
    return exc.problem_type == STARTING or (
        isinstance(detail, dict) and detail.get("status") == "starting"
    )


def _lost(outcome: Any) -> bool:
    """The server answers but has no such game (an exception, or a batch item's error)."""
    if isinstance(outcome, CroupierError):
        return outcome.status == 404
    error = outcome.get("error") if isinstance(outcome, dict) else None
    return isinstance(error, dict) and error.get("status") == 404


@dataclass
class _Game:
    """What the client needs to re-create a game elsewhere."""

    url: str
    game: str
    seats: dict[str, dict[str, Any]]  # as the create (or the last resume) answered
    record: bool | str | None
    # Learned seats that recorded a step on the game's current server (lost if it dies).
    acted: set[str] = field(default_factory=set)

    def recording(self, seat: str) -> bool:
        info = self.seats.get(seat)
        return self.record is not False and info is not None and info["policy"] in RECORDING


@dataclass
class FailoverStats:
    games_moved: int = 0  # re-created on the next server: theirs was unavailable
    games_resumed_in_place: int = 0  # their server answered 404 (restarted): re-created there
    fragments_dropped: int = 0  # learned seats' recorded steps lost with a server
    versions_substituted: int = 0  # seats whose pinned version the new server did not hold
    calls_retried: int = 0  # calls sent again after a move
    creates_rerouted: int = 0  # new games sent past an unavailable server
    circuits_opened: int = 0  # a server found unavailable (closed -> open)
    probes_failed: int = 0  # half-open probes a server did not answer
    circuits_closed: int = 0  # an open server answered again (a probe or a call)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


class RoutedClient:
    """The `CroupierClient` API over many servers, routed by game id (rendezvous hashing),
    failing over to the next server in a game's rendezvous order when its server is gone."""

    def __init__(
        self,
        urls: list[str],
        *,
        failover: bool = True,
        down_for_s: float = DOWN_FOR_S,
        max_down_for_s: float = MAX_DOWN_FOR_S,
        **client_options: Any,
    ):
        if not urls:
            raise ValueError("no server urls to route to")
        self.urls = list(urls)
        self.clients = {url: CroupierClient(url, **client_options) for url in self.urls}
        self.failover_enabled = failover and len(self.urls) > 1
        self.down_for_s = down_for_s
        self.max_down_for_s = max(max_down_for_s, down_for_s)
        self.failover = FailoverStats()
        self._games: OrderedDict[str, _Game] = OrderedDict()
        # url -> the probe of its open circuit (a closed circuit: absent)
        self._open: dict[str, asyncio.Task[None]] = {}
        self._moving: dict[str, asyncio.Future[None]] = {}  # game id -> its move in progress

    def url_for(self, game_id: str) -> str:
        """Where the game is: where it was created or moved to, else its id's owner."""
        game = self._games.get(game_id)
        return game.url if game is not None else route_game(game_id, self.urls)

    def client_for(self, game_id: str) -> CroupierClient:
        return self.clients[self.url_for(game_id)]

    async def __aenter__(self) -> RoutedClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        probes = list(self._open.values())
        self._open.clear()
        for probe in probes:
            probe.cancel()
        await asyncio.gather(*probes, return_exceptions=True)
        await asyncio.gather(*(c.close() for c in self.clients.values()))

    # --- where games go --------------------------------------------------------------------

    def _order(self, game_id: str, skip: set[str] | frozenset[str] = frozenset()) -> list[str]:
        """The game's rendezvous order, servers with an open circuit last, `skip` left out."""
        ranked = [u for u in rank_servers(game_id, self.urls) if u not in skip]
        if not self._open:
            return ranked
        up = [u for u in ranked if u not in self._open]
        return up + [u for u in ranked if u not in up]

    def first_choice(self, game_id: str) -> str:
        """Where a new game with this id goes first (its owner, unless that one is down)."""
        return self._order(game_id)[0] if self.failover_enabled else self.url_for(game_id)

    def is_open(self, url: str) -> bool:
        """Whether `url`'s circuit is open: its games move, new games skip it."""
        return url in self._open

    def _mark_down(self, url: str) -> None:
        """Open `url`'s circuit (if closed), its probe started."""
        if url not in self._open:
            self._open[url] = asyncio.get_running_loop().create_task(self._probe(url))
            self.failover.circuits_opened += 1

    def _answered(self, url: str) -> None:
        """A call `url` answered: its circuit, if open, closes."""
        probe = self._open.pop(url, None)
        if probe is not None:
            self.failover.circuits_closed += 1
            if probe is not asyncio.current_task():
                probe.cancel()

    async def _probe(self, url: str) -> None:
        """Half-open, after `down_for_s`: one `GET /healthz`, bounded by the client's
        deadlines. Any answer but an unavailable one closes the circuit; none waits twice as
        long (up to `max_down_for_s`) and asks again. Runs until the server answers or the
        client closes (which cancels it)."""
        wait = self.down_for_s
        while url in self._open:
            await asyncio.sleep(wait)
            try:
                await self.clients[url].health()
            except Exception as e:
                if unavailable(e):
                    self.failover.probes_failed += 1
                    wait = min(2 * wait, self.max_down_for_s)
                    continue
                # Anything else (a 4xx, an overloaded 503) is an answer: it is there.
            self._answered(url)

    def _track(self, game_id: str, url: str, game: str, created: Any, record: Any) -> None:
        if not self.failover_enabled or not isinstance(created, dict):
            return
        seats = created.get("seats")
        if not isinstance(seats, dict):  # a batch item's error
            return
        self._games[game_id] = _Game(url, game, seats, record)
        if len(self._games) > GAMES_TRACKED:
            self._games.popitem(last=False)

    def _acted(self, game_id: str, seat: str, decision: Any) -> None:
        """A recorded learned step (not a fallback's): lost if the game's server dies."""
        game = self._games.get(game_id)
        if game is None or not isinstance(decision, dict) or decision.get("fallback") is not False:
            return
        if game.recording(seat):
            game.acted.add(seat)

    async def _relocate(self, game_id: str, game: _Game, failed: str, tried: set[str]) -> None:
        """Re-create the game away from `failed` (unavailable: tried is updated) or, when
        `failed` answered 404, on it again. Raises when no server can take it."""
        if game_id in self._moving:  # another call is moving it: follow it
            await self._moving[game_id]
            return
        if game.url != failed:  # moved while this call was in flight
            return
        in_place = failed not in tried
        candidates = [failed] if in_place else self._order(game_id, skip=tried)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._moving[game_id] = done
        try:
            last: BaseException | None = None
            for url in candidates:
                try:
                    answer = await self.clients[url].resume_game(
                        game_id, game.game, game.seats, record=game.record
                    )
                except Exception as e:
                    if not unavailable(e):
                        raise
                    self._mark_down(url)
                    tried.add(url)
                    last = e
                    continue
                self._answered(url)
                if answer.get("resumed"):
                    self.failover.fragments_dropped += len(game.acted)
                    game.acted.clear()
                    if in_place:
                        self.failover.games_resumed_in_place += 1
                    else:
                        self.failover.games_moved += 1
                    self.failover.versions_substituted += len(answer.get("substituted") or {})
                game.url, game.seats = url, answer["seats"]
                return
            raise last or CroupierError(503, f"no server could take game {game_id!r}")
        finally:
            del self._moving[game_id]
            done.set_result(None)

    async def _on_game(
        self, game_id: str, call: Callable[[CroupierClient], Awaitable[T]]
    ) -> tuple[T, str]:
        """`call` on the game's server, failing over as the module says; (result, url)."""
        game = self._games.get(game_id)
        if game is None:
            url = self.url_for(game_id)
            return await call(self.clients[url]), url
        tried: set[str] = set()
        resumed_in_place: set[str] = set()
        while True:
            url = game.url
            try:
                # An open circuit's games move without a try, unless every server is open.
                if url in self._open and len(tried) + 1 < len(self.urls):
                    raise CircuitOpen(url)
                answer = await call(self.clients[url])
                if self._open:
                    self._answered(url)
                return answer, url
            except Exception as e:
                if unavailable(e):
                    self._mark_down(url)
                    tried.add(url)
                elif _lost(e) and url not in resumed_in_place:
                    resumed_in_place.add(url)
                else:
                    raise
                await self._relocate(game_id, game, url, tried)
                self.failover.calls_retried += 1

    # --- the API ---------------------------------------------------------------------------

    async def create_game(
        self,
        game: str,
        *,
        seats: dict[str, str] | None = None,
        game_id: str | None = None,
        pin: str | None = None,
        record: bool | str | None = None,
    ) -> dict[str, Any]:
        # Routing needs the id before the server exists to make one up: we pick it.
        game_id = game_id or uuid.uuid4().hex
        order = self._order(game_id) if self.failover_enabled else [self.url_for(game_id)]
        for url in order:
            try:
                created = await self.clients[url].create_game(
                    game, seats=seats, game_id=game_id, pin=pin, record=record
                )
            except Exception as e:
                if not (self.failover_enabled and unavailable(e)) or url == order[-1]:
                    raise
                self._mark_down(url)
                self.failover.creates_rerouted += 1
                continue
            self._answered(url)
            self._track(game_id, url, game, created, record)
            return created
        raise AssertionError("unreachable: the last server's error is raised")

    async def decide(
        self,
        game_id: str,
        seat: str,
        state: dict[str, Any],
        *,
        reward: float | None = None,
        turn: int | None = None,
    ) -> dict[str, Any]:
        decision, _ = await self._on_game(
            game_id, lambda c: c.decide(game_id, seat, state, reward=reward, turn=turn)
        )
        self._acted(game_id, seat, decision)
        return decision

    async def end(self, game_id: str, payoffs: dict[str, float]) -> dict[str, Any]:
        try:
            ended, _ = await self._on_game(game_id, lambda c: c.end(game_id, payoffs))
        except CroupierError as e:
            if e.status == 409:  # ended already: nothing left to fail over
                self._games.pop(game_id, None)
            raise
        self._games.pop(game_id, None)
        return ended

    async def abort(self, game_id: str) -> None:
        game = self._games.pop(game_id, None)
        url = game.url if game is not None else self.url_for(game_id)
        try:
            await self.clients[url].abort(game_id)
        except Exception as e:
            # Its server is gone, and the game with it: what an abort asked for.
            if game is None or not unavailable(e):
                raise

    async def decide_batch(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        results = await self._game_batch(items, "decide_batch")
        for item, result in zip(items, results, strict=True):
            if not result.get("error"):
                self._acted(str(item.get("game_id")), str(item.get("seat")), result)
        return results

    async def end_games(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        results = await self._game_batch(items, "end_games")
        for item, result in zip(items, results, strict=True):
            error = result.get("error")
            if not error or error.get("status") == 409:
                self._games.pop(str(item.get("game_id")), None)
        return results

    async def create_games(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # Routing needs every id before any server would make one up: we pick them.
        items = [{**item, "game_id": item.get("game_id") or uuid.uuid4().hex} for item in items]
        if not self.failover_enabled:
            return await self._per_server(items, "create_games", self.url_for)
        out: list[dict[str, Any]] = [{}] * len(items)
        tried: list[set[str]] = [set() for _ in items]
        todo = list(range(len(items)))
        while todo:
            route = {i: self._order(items[i]["game_id"], skip=tried[i])[0] for i in todo}
            answers = await self._send(items, todo, "create_games", route.__getitem__)
            todo = []
            for url, rows, answer in answers:
                if isinstance(answer, BaseException):
                    last_server = any(len(tried[i]) + 1 >= len(self.urls) for i in rows)
                    if not unavailable(answer) or last_server:
                        raise answer
                    self._mark_down(url)
                    self.failover.creates_rerouted += len(rows)
                    for i in rows:
                        tried[i].add(url)
                    todo += rows
                    continue
                for i, result in zip(rows, answer, strict=True):
                    out[i] = result
                    game_id = items[i]["game_id"]
                    self._track(game_id, url, items[i].get("game"), result, items[i].get("record"))
        return out

    async def _game_batch(self, items: list[dict[str, Any]], call: str) -> list[dict[str, Any]]:
        """A batch of calls on existing games: one request per server, sent together; the
        items of a server found unavailable (or of games it lost) are failed over and sent
        again. Results in `items` order."""
        if not self.failover_enabled:
            return await self._per_server(items, call, self.url_for)
        out: list[dict[str, Any]] = [{}] * len(items)
        tried: dict[str, set[str]] = {}
        resumed_in_place: dict[str, set[str]] = {}
        todo = list(range(len(items)))
        while todo:
            # Every server open: send anyway (the last resort), as `_on_game` does.
            skip_open = len(self._open) < len(self.urls)
            answers = await self._send(
                items, todo, call, lambda i: self.url_for(str(items[i].get("game_id"))), skip_open
            )
            todo, moves = [], []
            for url, rows, answer in answers:
                for i, result in zip(rows, self._spread(answer, rows), strict=True):
                    game_id = str(items[i].get("game_id"))
                    game = self._games.get(game_id)
                    if isinstance(result, BaseException):
                        if game is None or not unavailable(result):
                            raise result
                        self._mark_down(url)
                        seen = tried.setdefault(game_id, set())
                        seen.add(url)
                    elif game is not None and _lost(result):
                        seen = resumed_in_place.setdefault(game_id, set())
                        if url in seen:
                            out[i] = result
                            continue
                        seen.add(url)
                    else:
                        out[i] = result
                        continue
                    moves.append(
                        self._relocate(game_id, game, url, tried.setdefault(game_id, set()))
                    )
                    todo.append(i)
            await asyncio.gather(*moves)
            self.failover.calls_retried += len(todo)
        return out

    @staticmethod
    def _spread(answer: Any, rows: list[int]) -> list[Any]:
        """A server's batch answer as one outcome per row (its exception for every row)."""
        return [answer] * len(rows) if isinstance(answer, BaseException) else list(answer)

    async def _send(
        self,
        items: list[dict[str, Any]],
        rows: list[int],
        call: str,
        url_of: Callable[[int], str],
        skip_open: bool = False,
    ) -> list[tuple[str, list[int], Any]]:
        """One batch request per server for `rows`, sent together: (url, rows, answer or the
        exception it raised). `skip_open`: a server whose circuit is open is not sent to
        (`CircuitOpen` for its rows: its games move)."""
        groups: dict[str, list[int]] = {}
        for i in rows:
            groups.setdefault(url_of(i), []).append(i)
        answers = await asyncio.gather(
            *(
                self._batch_call(url, call, [items[i] for i in group], skip_open)
                for url, group in groups.items()
            ),
            return_exceptions=True,
        )
        return [(url, group, a) for (url, group), a in zip(groups.items(), answers, strict=True)]

    async def _batch_call(
        self, url: str, call: str, batch: list[dict[str, Any]], skip_open: bool
    ) -> list[dict[str, Any]]:
        if skip_open and url in self._open:
            raise CircuitOpen(url)
        answer = await getattr(self.clients[url], call)(batch)
        if self._open:
            self._answered(url)
        return answer

    async def _per_server(
        self, items: list[dict[str, Any]], call: str, url_of: Callable[[str], str]
    ) -> list[dict[str, Any]]:
        """One batch request per server involved, sent together; results in `items` order."""
        out: list[dict[str, Any]] = [{}] * len(items)
        sent = await self._send(
            items, list(range(len(items))), call, lambda i: url_of(str(items[i].get("game_id")))
        )
        for _, rows, results in sent:
            if isinstance(results, BaseException):
                raise results
            for i, result in zip(rows, results, strict=True):
                out[i] = result
        return out

    async def health(self) -> dict[str, Any]:
        """Every server's /healthz, by url."""
        answers = await asyncio.gather(*(c.health() for c in self.clients.values()))
        return dict(zip(self.urls, answers, strict=True))


def client_for_urls(url_text: str, **client_options: Any) -> CroupierClient | RoutedClient:
    """One server: a plain client; a comma-separated list: a routed one."""
    urls = parse_urls(url_text)
    if len(urls) == 1:
        return CroupierClient(urls[0], **client_options)
    return RoutedClient(urls, **client_options)
