"""Where search seats search: off the server's event loop, in a pool of workers, each with
its own table of the game (`policies/search.py` is the algorithm they run).

- `LocalSearchPool`: worker processes on this machine (spawned, never forked: the server runs
  threads, and a forked child inherits their locks held), one decision at a time each, fed
  by the event loop through a pipe each.
- `RaySearchPool`: Ray actors on a Ray cluster (`croupier serve --search-address ADDRESS`), as
  many as the cluster has CPUs unless told: a studio adds search capacity by adding machines
  to the cluster. Ray is croupier's one distributed engine (the trainer's too).

`SearchSeats` is what the decision service holds: whether this game can be searched at all
(`problem`), the pool started at the first game that seats a search seat (a server that never
seats one pays nothing; until its workers are warm such games are refused with 503 and
Retry-After), and `search(...)`, which answers within the decision's deadline or not at all
(None: the caller answers the base policy's move, `"fallback": true`). A worker checks the
deadline too: a request that waited in the queue past it is dropped at once, and one that
waited part of it searches for the rest only, so a queue behind a busy pool sheds load
instead of growing.

Why ~570 lines in one module: the local processes, the Ray actors and `SearchSeats` share one
request, one deadline rule and one worker protocol; split, the deadline arithmetic would be
read apart from the pools that honour it."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import multiprocessing
import os
import random
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import orjson

from croupier.games.registry import load_adapter, load_rules, load_simulator
from croupier.policies.search import Act, Prior, SearchResult, random_base, search
from croupier.policies.seats import SearchSpec, SeatUnavailable

log = logging.getLogger(__name__)

# The answer's way back (a pipe or Ray's object store, then the event loop) is kept out of
# the worker's share of the deadline: it searches until `ms` less this much. Measured on this
# 2-core VM under 100 parallel games: an answer's trip back took up to ~6 ms.
RETURN_MARGIN_S = 0.010
# The server stops waiting this much before the deadline: the fallback's own move and the
# answer's way out through the event loop fit in it.
ANSWER_MARGIN_S = 0.002
WORKER_NICENESS = 10
VERSIONS_HELD = 4  # version bases a worker keeps loaded (a game pins one for its life)
MAX_REPLACED = 4  # dead workers started again, per worker of the pool, over its life
WARM_UP_TIMEOUT_S = 120.0  # spawning a worker imports croupier and the game (~2-5 s each)


class SearchStarting(SeatUnavailable):
    """The search workers are starting: a search seat can be seated in a few seconds (503 with
    Retry-After, not 409: the same request will succeed)."""


@dataclass(frozen=True)
class SearchRequest:
    """One decision to search: what the seat was sent, its seat's settings, and the time it
    may take counted from `sent_at` (`time.time()`: a worker on another machine of a Ray
    cluster compares it with its own clock)."""

    state: dict[str, Any]
    spec: SearchSpec
    budget_s: float
    sent_at: float
    seed: int


@dataclass
class Searcher:
    """One worker's table of the game and the base policies its rollouts play: the rules,
    random play, and the versions searches ask for (`frozen@N`, read from the server's weights
    dir when first asked, the newest `VERSIONS_HELD` kept)."""

    game: str
    rules_path: str | None = None  # the server's own `--rules`, if it has one
    weights_dir: Path | None = None  # where a version base's weights are (the server's)
    bases: dict[str, Act] = field(default_factory=dict)
    priors: dict[str, Prior] = field(default_factory=dict)
    # The versions' networks read (`_version_logits`), the newest used last.
    _networks: dict[int, Callable[[dict[str, Any]], np.ndarray]] = field(
        default_factory=dict, init=False, repr=False
    )

    def __post_init__(self) -> None:
        self.table = load_simulator(self.game)
        self.adapter = load_adapter(self.game)
        # The server validates every state before its rules act; the rollouts' states are the
        # simulator's own, valid by construction: the bot without a second validation.
        adapter = self.adapter
        rules = load_rules(self.rules_path) if self.rules_path else adapter.checked_rules()
        if rules is not None:
            self.bases["rules"] = rules
        self.bases["random"] = random_base

    def base(self, name: str) -> Act:
        """The base policy `name` (`rules`, `random`, `frozen@N[:greedy]`)."""
        act = self.bases.get(name)
        if act is None:
            act = self._version_base(name)
        return act

    def _version_base(self, name: str) -> Act:
        """`frozen@N[:greedy]`: version N from the weights dir, greedy or sampled from
        numpy's global generator (seeded per world by `playout`, as the rules' draws are);
        also its prior (the version's logits over the legal moves: which moves to search)."""
        version = SearchSpec(base=name).base_version
        if version is None or self.weights_dir is None:
            raise ValueError(f"no base policy {name!r} here (a version needs a weights dir)")
        logits = self._version_logits(version)
        adapter, greedy = self.adapter, name.endswith(":greedy")

        def act(state: dict[str, Any]) -> Any:
            row = logits(state)  # illegal moves at the float minimum: never drawn
            if not greedy:
                row = row + np.random.gumbel(size=len(row))
            return adapter.action_value(int(np.argmax(row)), state)

        def prior(state: dict[str, Any]) -> list[float]:
            row = logits(state)
            return [float(row[adapter.action_index(v, state)]) for v in state["legal_actions"]]

        for old in [k for k in self.bases if k.startswith("frozen@")][: -VERSIONS_HELD + 1]:
            del self.bases[old]
            self.priors.pop(old, None)
        self.bases[name], self.priors[name] = act, prior
        return act

    def _version_logits(self, version: int) -> Callable[[dict[str, Any]], np.ndarray]:
        """Version `version`'s logits for a state, its network read from the weights dir once
        for its greedy and sampled bases alike (the warm-up loads the newest: a greedy search
        over it, a tier's, then starts warm)."""
        logits = self._networks.pop(version, None) or self._read_network(version)
        self._networks[version] = logits  # the newest used last: the oldest go first
        for old in list(self._networks)[:-VERSIONS_HELD]:
            del self._networks[old]
        return logits

    def _read_network(self, version: int) -> Callable[[dict[str, Any]], np.ndarray]:
        """Version `version`'s network from the weights dir, as a state's logits."""
        from croupier.policies.learned import PolicyVersions
        from croupier.policies.module import ModelSpec
        from croupier.policies.weights_file import read_weights, weights_path

        assert self.weights_dir is not None
        meta = orjson.loads((self.weights_dir / "latest.json").read_bytes())
        versions = PolicyVersions(self.adapter, ModelSpec.from_dict(meta["spec"]))
        versions.install(version, read_weights(weights_path(self.weights_dir, version)))
        module, adapter = versions.resolve(version)[1], self.adapter

        def logits(state: dict[str, Any]) -> np.ndarray:
            obs, mask = adapter.encode(state)
            return np.asarray(versions.act_rows(module, [obs], [mask], explore=False).logits[0])

        return logits

    def search(self, request: SearchRequest) -> SearchResult:
        """The search, within what is left of the request's budget (none: no search)."""
        waited = max(0.0, time.time() - request.sent_at)
        left = request.budget_s - waited
        if left <= 0:
            return SearchResult(None)
        spec = request.spec
        base, others = self.base(spec.base), self.base(spec.vs) if spec.vs else None
        rng, prior = random.Random(request.seed), self.priors.get(spec.base)
        deadline = time.monotonic() + left
        return search(self.table, request.state, base, spec, rng, deadline, prior=prior,
                      others=others)  # fmt: skip

    def warm_up(self) -> bool:
        """One small search on a fresh deal: the first rules decision loads what it loads;
        and the newest version in the weights dir, if any: the first search over a version
        would otherwise pay for loading torch and the network (~1-5 s here) past its
        deadline (a search seat over `learned@latest` or `production` most often plays it)."""
        self.table.reset(0)
        state = self.table.state(self.table.current_player())
        if "rules" in self.bases:
            spec = SearchSpec(base="rules", rollouts=2, ms=200)
            self.search(SearchRequest(state, spec, 0.2, time.time(), 0))
        latest = self.weights_dir / "latest.json" if self.weights_dir is not None else None
        if latest is not None and latest.exists():
            try:
                self.base(f"frozen@{int(orjson.loads(latest.read_bytes())['version'])}")
            except (ValueError, KeyError, OSError):
                log.warning("search: the newest version in %s did not load", self.weights_dir)
        return True


class SearchPool(Protocol):
    workers: int

    def start(self) -> None:
        """Start the workers and wait until each is warm (called off the event loop)."""

    async def search(self, request: SearchRequest) -> SearchResult: ...

    def alive(self) -> int:
        """Workers serving now."""

    def close(self) -> None: ...


# --- local processes ---------------------------------------------------------------------


def _worker_main(
    conn: Connection, game: str, rules_path: str | None, weights_dir: Path | None
) -> None:
    """A pool process: its searcher, then one request at a time from the pipe (JSON both
    ways: what crosses is a state and a result, never pickled objects), until it closes."""
    # Below the server's own priority: a busy worker must not delay the event loop that
    # answers every decision (and every search's deadline) on the same cores.
    os.nice(WORKER_NICENESS)
    searcher = Searcher(game, rules_path, weights_dir)
    _one_core()
    searcher.warm_up()
    conn.send_bytes(b"ready")
    while True:
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):
            return
        request = orjson.loads(message)
        request["spec"] = SearchSpec(**request["spec"])
        try:
            answer = dataclasses.asdict(searcher.search(SearchRequest(**request)))
        except Exception as e:  # noqa: BLE001 — the request's failure, not the worker's
            answer = {"error": f"{type(e).__name__}: {e}"}
        conn.send_bytes(orjson.dumps(answer))


def _one_core() -> None:
    """A worker is one core's worth: a game that imported torch gets no intra-op threads of
    its own (torch is not imported for it: ~1 s of a worker's ~1 s start without it)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


@dataclass
class _Worker:
    process: Any
    conn: Connection
    busy: asyncio.Future[SearchResult] | None = None
    alive: bool = True


class LocalSearchPool:
    """`workers` spawned processes on this machine (0: one per CPU core), each fed one
    request at a time by the event loop through its own pipe, read with `add_reader`.

    Why not `concurrent.futures.ProcessPoolExecutor`: its answer crosses two threads of this
    process (the pool's manager and its queue's feeder) before the event loop sees it; under
    a loaded 2-core VM each hop waited for the scheduler, and a 7 ms search took 40-170 ms
    to come back (every one of 140 decisions at a 60 ms deadline fell back). Here a request
    is one write when a worker is free, an answer one read on the loop. And requests wait
    here, not in the workers' pipes: one whose deadline passed while it waited is dropped
    before it costs a worker anything."""

    def __init__(self, game: str, workers: int = 0, rules_path: str | None = None,
                 weights_dir: Path | None = None):  # fmt: skip
        self.game, self.rules_path, self.weights_dir = game, rules_path, weights_dir
        self.workers = workers or os.cpu_count() or 1
        self._workers: list[_Worker] = []
        self._waiting: collections.deque[tuple[SearchRequest, asyncio.Future[SearchResult]]]
        self._waiting = collections.deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.died = 0  # workers lost (their searches answered by the base policy)
        self.replaced = 0  # and started again in their place
        self._closed = False

    def start(self) -> None:
        workers = [self._spawn() for _ in range(self.workers)]
        for worker in workers:
            if not self._ready(worker):
                raise RuntimeError(f"a search worker was not ready in {WARM_UP_TIMEOUT_S:g} s")
        self._workers = workers
        log.info("search: %d worker processes warm", len(self._workers))

    def _spawn(self) -> _Worker:
        context = multiprocessing.get_context("spawn")  # never fork a threaded server
        mine, theirs = context.Pipe()
        process = context.Process(
            target=_worker_main,
            args=(theirs, self.game, self.rules_path, self.weights_dir),
            daemon=True,
        )
        process.start()
        theirs.close()
        return _Worker(process, mine)

    @staticmethod
    def _ready(worker: _Worker) -> bool:
        try:
            return worker.conn.poll(WARM_UP_TIMEOUT_S) and worker.conn.recv_bytes() == b"ready"
        except (EOFError, OSError):
            return False

    async def search(self, request: SearchRequest) -> SearchResult:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # the first search (or a new loop: tests): read here
            self._loop = loop
            for worker in self._workers:
                if worker.alive:
                    loop.add_reader(worker.conn.fileno(), self._answered, worker)
        future: asyncio.Future[SearchResult] = loop.create_future()
        self._waiting.append((request, future))
        self._dispatch()
        return await future

    def alive(self) -> int:
        return sum(w.alive for w in self._workers)

    def _dispatch(self) -> None:
        """Give each free worker the oldest request still worth searching."""
        for worker in self._workers:
            if not worker.alive or worker.busy is not None:
                continue
            while self._waiting:
                request, future = self._waiting.popleft()
                if future.done():  # its decision stopped waiting (the deadline passed)
                    continue
                if time.time() - request.sent_at >= request.budget_s:
                    future.set_result(SearchResult(None))
                    continue
                message = dataclasses.asdict(request)
                try:
                    worker.conn.send_bytes(orjson.dumps(message))
                except OSError:
                    self._lost(worker)
                    self._waiting.appendleft((request, future))
                    break
                worker.busy = future
                break
        if self._waiting and not any(w.alive for w in self._workers):
            while self._waiting:  # nothing left to search: every waiting decision falls back
                _, future = self._waiting.popleft()
                if not future.done():
                    future.set_exception(RuntimeError("every search worker died"))

    def _answered(self, worker: _Worker) -> None:
        try:
            data = worker.conn.recv_bytes()
        except (EOFError, OSError):
            self._lost(worker)
            self._dispatch()
            return
        future, worker.busy = worker.busy, None
        if future is not None and not future.done():
            answer = orjson.loads(data)
            if "error" in answer:  # the caller answers the base's move (counted as failed)
                future.set_exception(RuntimeError(f"a search failed: {answer['error']}"))
            else:
                future.set_result(SearchResult(**answer))
        self._dispatch()

    def _lost(self, worker: _Worker) -> None:
        """A worker died (its process killed, or a crash): its search fails (the base
        answers it), the others go on; counted."""
        worker.alive = False
        self.died += 1
        if self._loop is not None:
            self._loop.remove_reader(worker.conn.fileno())
        if worker.busy is not None and not worker.busy.done():
            worker.busy.set_exception(RuntimeError("a search worker died"))
        worker.busy = None
        log.error("a search worker died: %d of %d left", sum(w.alive for w in self._workers),
                  len(self._workers))  # fmt: skip
        if not self._closed and self.replaced < MAX_REPLACED * len(self._workers):
            threading.Thread(target=self._replace, args=(worker,), daemon=True).start()

    def _replace(self, dead: _Worker) -> None:
        """Start a worker in `dead`'s place (off the event loop: a start takes seconds), and
        hand it to the loop once warm. Bounded (`MAX_REPLACED`): a game whose every search
        kills its worker must not spawn for ever."""
        dead.conn.close()
        dead.process.join(timeout=5.0)
        worker = self._spawn()
        if not self._ready(worker) or self._closed or self._loop is None:
            worker.process.kill()
            return
        self._loop.call_soon_threadsafe(self._install, dead, worker)

    def _install(self, dead: _Worker, worker: _Worker) -> None:
        if self._closed or dead not in self._workers:
            worker.process.kill()
            return
        self._workers[self._workers.index(dead)] = worker
        assert self._loop is not None
        self._loop.add_reader(worker.conn.fileno(), self._answered, worker)
        self.replaced += 1
        log.info("a search worker started in a dead one's place")
        self._dispatch()

    def close(self) -> None:
        self._closed = True
        for worker in self._workers:
            if self._loop is not None and worker.alive and not self._loop.is_closed():
                self._loop.remove_reader(worker.conn.fileno())
            worker.conn.close()
            worker.process.join(timeout=2.0)
            if worker.process.is_alive():
                worker.process.kill()
        self._workers = []


# --- Ray actors ----------------------------------------------------------------------------


class RaySearchPool:
    """Ray actors on the cluster at `address`, one CPU each: `workers` of them, or (0) as many
    as the cluster has CPUs when the pool starts. Each request goes to the actor with the
    fewest in flight. The cluster's machines need croupier and the game's package installed,
    as for the trainer's Ray workers (docs/scale-out.md)."""

    def __init__(self, game: str, address: str | None, workers: int = 0,
                 rules_path: str | None = None, weights_dir: Path | None = None):  # fmt: skip
        self.game, self.address, self.rules_path = game, address, rules_path
        self.weights_dir = weights_dir  # a version base's: on storage every machine reads
        self.workers = workers
        self._actors: list[Any] = []
        self._in_flight: list[int] = []

    def start(self) -> None:
        import ray

        if not ray.is_initialized():
            ray.init(address=self.address, include_dashboard=False, log_to_driver=False)
        if not self.workers:
            self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        actor = ray.remote(num_cpus=1)(_SearchActor)
        self._actors = [
            actor.remote(self.game, self.rules_path, self.weights_dir) for _ in range(self.workers)
        ]
        self._in_flight = [0] * len(self._actors)
        ray.get([a.warm_up.remote() for a in self._actors], timeout=WARM_UP_TIMEOUT_S)
        log.info("search: %d Ray actors warm", len(self._actors))

    def alive(self) -> int:
        return len(self._actors)

    async def search(self, request: SearchRequest) -> SearchResult:
        i = min(range(len(self._actors)), key=self._in_flight.__getitem__)
        self._in_flight[i] += 1
        try:
            return await self._actors[i].search.remote(request)
        finally:
            self._in_flight[i] -= 1

    def close(self) -> None:
        import ray

        for a in self._actors:
            ray.kill(a)
        self._actors = []


class _SearchActor:
    """A Ray actor's searcher (`ray.remote` wraps it in `RaySearchPool.start`)."""

    def __init__(self, game: str, rules_path: str | None, weights_dir: Path | None):
        self.searcher = Searcher(game, rules_path, weights_dir)
        _one_core()

    def warm_up(self) -> bool:
        return self.searcher.warm_up()

    def search(self, request: SearchRequest) -> SearchResult:
        return self.searcher.search(request)


# --- what the decision service holds ------------------------------------------------------


class SearchSeats:
    """The server's search seats: can this game be searched, the pool (started at the first
    search seat), and one search per decision within its deadline."""

    def __init__(self, game: str, workers: int = 0, address: str | None = None,
                 rules_path: str | None = None, has_rules: bool = True,
                 weights_dir: Path | None = None):  # fmt: skip
        self.game, self.address = game, address
        self.has_rules, self.weights_dir = has_rules, weights_dir
        self.pool: SearchPool = (
            RaySearchPool(game, address, workers, rules_path, weights_dir)
            if address
            else LocalSearchPool(game, workers, rules_path, weights_dir)
        )
        self._problem: str | None = None
        self._checked = False
        self._lock = threading.Lock()
        self._starting: threading.Thread | None = None
        self.ready = False
        self.start_error: str | None = None
        self.failed = 0  # searches that raised (a worker died, a simulator's error): fallbacks
        self._seed = random.Random(0x5EA4C4)

    def problem(self, spec: SearchSpec) -> str | None:
        """Why a search seat of `spec` cannot be seated on this game (None: it can)."""
        if not self._checked:
            try:
                table = load_simulator(self.game)
                if not table.resamples():
                    self._problem = (
                        f"{self.game}'s simulator ({type(table).__name__}) cannot set a table "
                        "from a seat's view (Simulator.resample): its game cannot be searched"
                    )
            except ValueError as e:
                self._problem = f"a search seat needs the game's simulator: {e}"
            self._checked = True
        if self._problem is None and "rules" in (spec.base, spec.vs) and not self.has_rules:
            return f"{self.game} has no rules policy to play the rollouts: use random"
        if self._problem is None and spec.base_version is not None and self.weights_dir is None:
            return (
                "a search over a version needs the server's weights dir (--weights-dir or "
                "--data-dir): its workers read the version there"
            )
        return self._problem

    def admit(self, spec: SearchSpec) -> None:
        """Raise SeatUnavailable (409) if `spec` cannot be searched here, SearchStarting (503)
        while the workers start (started now, at the first search seat)."""
        problem = self.problem(spec)
        if problem is not None:
            raise SeatUnavailable(problem)
        if self.start_error is not None:
            raise SeatUnavailable(f"the search workers failed to start: {self.start_error}")
        if self.ready:
            return
        with self._lock:
            if self._starting is None:
                self._starting = threading.Thread(target=self._start, daemon=True)
                self._starting.start()
        raise SearchStarting(
            f"the search workers are starting ({self.pool.workers or 'one per CPU'}): "
            "try again in a few seconds"
        )

    def start(self) -> None:
        """Start the workers now and wait until they are warm (tests, benchmarks)."""
        with self._lock:
            if self._starting is None:
                self._starting = threading.current_thread()
                self._start()
        while not self.ready and self.start_error is None:  # another thread is starting it
            time.sleep(0.05)

    def _start(self) -> None:
        try:
            self.pool.start()
            self.ready = True
        except Exception as e:  # noqa: BLE001 — said on every later search seat (409)
            log.exception("search workers failed to start")
            self.start_error = f"{type(e).__name__}: {e}"

    async def search(self, state: dict[str, Any], spec: SearchSpec, budget_s: float,
                     ) -> SearchResult | None:  # fmt: skip
        """The search's result if it comes within `budget_s` (None: late, or it failed)."""
        # A short deadline keeps most of itself for the search: at most a fifth goes back.
        margin = min(RETURN_MARGIN_S, spec.ms / 5000.0)
        request = SearchRequest(
            state, spec, budget_s - margin, time.time(), self._seed.getrandbits(63)
        )
        try:
            return await asyncio.wait_for(self.pool.search(request), budget_s - ANSWER_MARGIN_S)
        except TimeoutError:
            return None
        except Exception:  # noqa: BLE001 — a dead worker or a simulator's bug: the base answers
            self.failed += 1
            log.exception("a search failed: the base policy answers")
            return None

    def stats(self) -> dict[str, Any]:
        return {
            "workers": self.pool.alive() if self.ready else 0,
            "ready": self.ready,
            "failed": self.failed,
            "workers_died": getattr(self.pool, "died", 0),
            "workers_replaced": getattr(self.pool, "replaced", 0),
        }

    def close(self) -> None:
        if self.ready:
            self.pool.close()
