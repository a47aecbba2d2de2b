"""Shared fixtures: a real `croupier serve` subprocess, an in-process app, sample game states."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from croupier.local_server import (
    ServerExited,
    free_port,
    start_serve,
    stop,
    wait_until_up,
)

STARTUP_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 10.0


def _log_tail(log: Any, n: int = 4000) -> str:
    log.flush()
    log.seek(0)
    return log.read().decode(errors="replace")[-n:]


def _stop(proc: subprocess.Popen) -> None:
    stop(proc, STOP_TIMEOUT_S)


APT_TIMEOUT_S = 600
# The tools some tests need, by Debian package, in the order they are installed: the small
# ones first (promtool for the alert and metrics tests), Chromium (the dashboard's browser
# test) last. On a fresh machine `apt_tool` would install each inside its test, a worker of
# two blocked on the download for minutes; `pytest_configure` starts them all at once in the
# background instead, while the tests that need none run.
TOOL_PACKAGES = {"promtool": "prometheus", "node": "nodejs", "npm": "npm", "chromium": "chromium"}
TOOLS_DIR_ENV = "CROUPIER_TOOLS_INSTALLING"  # the background install's folder, for the workers
TYPESCRIPT_PROJECT = Path(__file__).resolve().parent / "typescript"


def pytest_configure(config: pytest.Config) -> None:
    """Start installing the missing tools in the background, once (the controller, not an
    xdist worker: the workers inherit the folder's name through the environment), as root
    where apt-get runs; each package writes `<package>.done` (apt-get's exit status) there
    when installed, and the TypeScript check's `npm ci` follows Node's."""
    import shlex
    import shutil

    if hasattr(config, "workerinput") or os.environ.get(TOOLS_DIR_ENV):
        return
    if not _may_collect_tool_tests(config):  # the kernel tests alone start no apt-get
        return
    missing = [pkg for tool, pkg in TOOL_PACKAGES.items() if shutil.which(tool) is None]
    if not missing or os.geteuid() != 0 or not shutil.which("apt-get"):
        return
    folder = tempfile.mkdtemp(prefix="croupier-tools-")
    steps = ["apt-get update -q"]
    npm_ci = f"cd {shlex.quote(str(TYPESCRIPT_PROJECT))} && npm ci --no-audit --no-fund"
    for pkg in dict.fromkeys(missing):  # in TOOL_PACKAGES' order, once each
        install = f"apt-get install -y -q {pkg}"
        if pkg == "npm":
            install += f" && ({npm_ci})"
        done = shlex.quote(f"{folder}/{pkg}.done")
        steps.append(f"{install}; echo $? > {done}.tmp; mv {done}.tmp {done}")
    log = open(f"{folder}/install.log", "wb")  # noqa: SIM115 (the background process holds it)
    subprocess.Popen(["bash", "-c", "; ".join(steps)], stdout=log, stderr=subprocess.STDOUT,
                     env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
                     start_new_session=True)  # fmt: skip
    os.environ[TOOLS_DIR_ENV] = folder


def _may_collect_tool_tests(config: pytest.Config) -> bool:
    """Whether the paths pytest was given (its `testpaths` when none) hold a module that
    needs a tool (`_TOOL_MODULES_LAST`): a run of other modules installs nothing beside them
    (an apt-get of Chromium on 2 cores slowed the servers those tests start)."""
    for arg in config.args or [str(config.rootpath / "tests")]:
        path = Path(arg.partition("::")[0])
        if not path.is_absolute():
            path = Path(config.invocation_params.dir, path)
        if path.is_dir():
            if any(next(path.rglob(f"{stem}.py"), None) for stem in _TOOL_MODULES_LAST):
                return True
        elif path.stem in _TOOL_MODULES_LAST:
            return True
    return False


def _wait_for_background_install(packages: tuple[str, ...]) -> None:
    """Wait (bounded) until the background install (`pytest_configure`) has tried `packages`."""
    folder = os.environ.get(TOOLS_DIR_ENV)
    if not folder:
        return
    deadline = time.monotonic() + APT_TIMEOUT_S
    pending = [p for p in packages if p in TOOL_PACKAGES.values()]
    while pending and time.monotonic() < deadline:
        pending = [p for p in pending if not Path(folder, f"{p}.done").exists()]
        time.sleep(0.5 if pending else 0)


def apt_tool(binaries: tuple[str, ...], packages: tuple[str, ...]) -> list[str]:
    """The paths of `binaries`, installed from Debian's `packages` first when one is missing
    (a fresh CI machine: the project's tests install the tools they need, in the background
    from the session's start: `pytest_configure`); a skip saying why where apt-get cannot run
    (not root, no apt) or the install fails."""
    import shutil

    found = [shutil.which(b) for b in binaries]
    if all(found):
        return [str(f) for f in found]
    _wait_for_background_install(packages)
    found = [shutil.which(b) for b in binaries]
    if all(found):
        return [str(f) for f in found]
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip(f"{'/'.join(binaries)} not installed and apt-get cannot run here (not root)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *packages]):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=APT_TIMEOUT_S)
        if done.returncode != 0:
            pytest.skip(f"installing {packages} failed: {' '.join(cmd)}: {done.stderr[-500:]}")
    found = [shutil.which(b) for b in binaries]
    if not all(found):
        pytest.skip(f"apt-get installed {packages} but {binaries} are not all on PATH")
    return [str(f) for f in found]


def promtool() -> str:
    """Prometheus's promtool (Debian's prometheus package), installed when missing."""
    return apt_tool(("promtool",), ("prometheus",))[0]


@contextlib.contextmanager
def running_server(*args: str, timeout_s: float = STARTUP_TIMEOUT_S) -> Iterator[str]:
    """Run `python -m croupier serve --port <free> *args`; yield its base URL; stop it after.
    (The server logs at its default level; see `running_server_logged`.)"""
    level = () if "--log-level" in args else ("--log-level", "warning")
    with running_server_logged(*args, *level, timeout_s=timeout_s) as server:
        yield server.url


@pytest.fixture(scope="module")
def leduc_server() -> Iterator[str]:
    """A real Leduc server (seat mix learned,rules), one per test module."""
    with running_server("--game", "leduc-holdem", "--seats", "learned,rules") as url:
        yield url


@pytest.fixture
def server_factory() -> Callable[..., contextlib.AbstractContextManager[str]]:
    """`with server_factory("--game", "uno") as url:` for tests that need a fresh server."""
    return running_server


def run_inprocess(test: Callable[[httpx.AsyncClient, Any], Awaitable[Any]], **config: Any) -> Any:
    """Build `create_app(ServerConfig(**config))`, run its lifespan (ASGITransport does not),
    and `asyncio.run` `test(client, service)` with an httpx client on the app."""
    from croupier.api.app import create_app
    from croupier.config import ServerConfig

    async def main() -> Any:
        app = create_app(ServerConfig(**config))
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://croupier") as c:
                return await test(c, app.state.service)

    return asyncio.run(main())


@pytest.fixture
def inprocess() -> Callable[..., Any]:
    """`inprocess(async_fn, **ServerConfig fields)`: see `run_inprocess`."""
    return run_inprocess


@pytest.fixture(scope="session")
def leduc_states() -> list[dict]:
    """Real Leduc states (RLCard's raw observation as JSON) from random-play hands."""
    from croupier.engine.rlcard_games import RLCardTable
    from croupier.games.simulator import mixed_play_states

    # Random play only: rules_share 0 never asks the (absent) rules for a move.
    states = mixed_play_states(
        RLCardTable("leduc-holdem"), None, hands=80, seed=11, rules_share=0.0
    )
    assert len(states) > 150
    return states


# --- trainer-link helpers: a server whose log can be read, background play -----------------


class LoggedServer:
    """A running `croupier serve` (see `running_server_logged`): its URL and its log so far."""

    def __init__(self, url: str, log_path: str, proc: subprocess.Popen):
        self.url = url
        self.log_path = log_path
        self.proc = proc

    def log(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def get(self, path: str) -> Any:
        resp = httpx.get(self.url + path, timeout=10.0)
        resp.raise_for_status()
        return resp.json()

    def latest(self) -> int:
        return int(self.get("/v1/policies")["policies"]["learned"]["latest"])


@contextlib.contextmanager
def running_server_logged(
    *args: str, timeout_s: float = STARTUP_TIMEOUT_S
) -> Iterator[LoggedServer]:
    """Run `python -m croupier serve --port <free> *args` and yield a `LoggedServer` (URL +
    readable log, at info level unless `--log-level` is given); stop it after. A port grabbed
    between our probe and the server's bind makes the server exit at once: that is retried (a
    few times, each bounded)."""
    extra: tuple[str, ...] = () if "--log-level" in args else ("--log-level", "info")
    with contextlib.ExitStack() as stack:
        if "--data-dir" not in args:  # each server its own spool, removed after
            data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="croupier-data-"))
            extra = (*extra, "--data-dir", data_dir)
        yield from _run_logged(args, extra, timeout_s)


def _run_logged(
    args: tuple[str, ...], extra: tuple[str, ...], timeout_s: float
) -> Iterator[LoggedServer]:
    for _attempt in range(3):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        with tempfile.NamedTemporaryFile(prefix="croupier-serve-", suffix=".log") as log:
            proc = start_serve([*args, *extra], port, stdout=log)
            try:
                try:
                    wait_until_up(url, proc, timeout_s, poll_s=0.1)
                except TimeoutError as e:
                    raise AssertionError(f"{e}\n--- server log ---\n{_log_tail(log)}") from None
                except ServerExited:
                    tail = _log_tail(log)
                    if "address already in use" in tail.lower():
                        continue
                    raise AssertionError(f"server exited with {proc.returncode}:\n{tail}") from None
                yield LoggedServer(url, log.name, proc)
                return
            finally:
                _stop(proc)
    raise AssertionError("could not bind a free loopback port for the server")


class BackgroundPlay:
    """Plays hands against a server from a thread (the reference engine, in short bounded
    runs) until stopped. `with BackgroundPlay(url):` ... ; `summaries` holds each run's."""

    def __init__(
        self,
        url: str,
        seats: list[str] | None = None,
        games: int = 8,
        chunk_s: float = 2.0,
        game: str = "leduc-holdem",
    ):
        import threading

        self.url, self.seats, self.games, self.chunk_s, self.game = url, seats, games, chunk_s, game
        self.summaries: list[Any] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="background-play")

    def _run(self) -> None:
        from croupier.engine.runner import run_engine

        try:
            while not self._stop.is_set():
                self.summaries.append(
                    asyncio.run(
                        run_engine(
                            self.url, self.game, self.games, self.seats, None, self.chunk_s,
                            seed=len(self.summaries) * 100_003,
                        )
                    )
                )  # fmt: skip
        except BaseException as e:  # surfaced by stop()
            self.error = e

    @property
    def hands(self) -> int:
        return sum(s.hands for s in self.summaries)

    @property
    def errors(self) -> int:
        return sum(s.errors for s in self.summaries)

    def start(self) -> BackgroundPlay:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 60.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), "background play did not stop"
        if self.error is not None:
            raise AssertionError(f"background play failed: {self.error!r}") from self.error

    def __enter__(self) -> BackgroundPlay:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def wait_for(
    predicate: Callable[[], Any], timeout_s: float, interval_s: float = 0.2, what: str = ""
) -> Any:
    """Poll `predicate` until it returns something truthy (returned); AssertionError after
    `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what or predicate}")
        time.sleep(interval_s)


@pytest.fixture(scope="module")
def ray_session() -> Iterator[None]:
    """One local Ray session per test module (2 CPUs, no dashboard), shut down after. RLlib's
    rllink runs `msgpack_numpy.patch()` in-process; undo it so the next module starts clean."""
    import importlib

    import msgpack
    import ray
    import torch
    from ray.rllib.env.external import rllink

    torch.set_num_threads(1)
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        yield
    finally:
        ray.shutdown()
        importlib.reload(msgpack)
        rllink.msgpack = None


UNPICKLED: list[str] = []


def _mark_unpickled(path: str) -> str:
    UNPICKLED.append(path)
    Path(path).touch()
    return "pwned"


class PickleBomb:
    """Unpickling one records the call in `UNPICKLED` and touches `path`: visible proof that
    some code unpickled a peer's bytes."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):  # noqa: ANN204
        return (_mark_unpickled, (self.path,))


async def play_hands_over_http(
    client: httpx.AsyncClient,
    game: str,
    hands: int,
    seats_for: Callable[[int], dict[str, str]],
    record: bool | str = True,
) -> None:
    """Play `hands` RLCard hands through the API on `client` (create, decide until over, end),
    hand h with seats `seats_for(h)` and deal seed h."""
    from croupier.engine.rlcard_games import RLCardTable

    table = RLCardTable(game)
    for h in range(hands):
        r = await client.post(
            "/v1/games", json={"game": game, "seats": seats_for(h), "record": record}
        )
        game_id = r.json()["game_id"]
        table.reset(h)
        while not table.is_over():
            p = table.current_player()
            d = await client.post(
                f"/v1/games/{game_id}/decide", json={"seat": str(p), "state": table.state_json(p)}
            )
            table.step(d.json()["action"])
        payoffs = dict(zip(("0", "1"), table.payoffs(), strict=True))
        await client.post(f"/v1/games/{game_id}/end", json={"payoffs": payoffs})


# --- tiers: unit (in-process), integration (a real server process or a Ray session), system
# (several processes end to end). `make test-fast` runs `-m unit`; `make test` runs all. ------

TIERS = ("unit", "integration", "system")
# Fixtures that start a process or Ray: a test using one is at least integration.
_PROCESS_FIXTURES = {"ray_session", "leduc_server", "server_factory"}
# Modules whose tests run trainer + servers (+ engine) together, or the runbook's units.
_SYSTEM_MODULES = {
    "test_engine_e2e",
    "test_faults",
    "test_rllib_compat",
    "test_runbook",
    "test_scale_out",
    "test_trainer_link",
    "test_trainer_lifecycle",
    "test_your_game",
    "test_pretrain",
    "test_fleet",
    "test_dashboard_browser",
    "test_doudizhu_external",
    "test_multinode",
}
# Tests that start `croupier serve` (or another process) themselves, not through a fixture.
_INTEGRATION_MODULES = {"test_arena", "test_startup", "test_docs_commands", "test_dispatch_caps"}
_INTEGRATION_TESTS = {
    "test_auth.py::test_serve_speaks_tls_with_the_certificate_given",
    "test_auth.py::test_serve_refuses_half_a_tls_setup",
    "test_adapters.py::test_huge_legal_lists_do_not_grow_a_real_server",
    "test_durability.py::test_a_server_with_bad_weights_on_disk_starts_and_serves_the_newest_good_version",
    "test_link_hardening.py::test_a_real_server_keeps_serving_through_an_outage_impostor_broken_trainers_and_a_backlog",
    "test_masking.py::test_a_trainer_pushing_nan_weights_leaves_the_server_serving_legal_actions",
    # In-process but slow (RLlib's import, ~10 s; every route fuzzed, ~30 s): `make test` runs them.
    "test_settings.py::test_train_defaults_are_the_trainers_own",
    "test_settings.py::test_train_flags_convert",
    "test_settings.py::test_train_placement_flags_reach_rllibs_config",
    "test_local_cluster.py::test_progress_line_says_where_the_remote_runners_are",
    "test_settings.py::test_train_starts_from_the_games_preset_and_flags_override_it",
    # In-process but long (every route fuzzed: ~30 s of the fast tier's 60): run by `make test`.
    "test_fuzz.py::test_no_route_answers_5xx",
    "test_strength_anchor.py::test_short_run_learns_the_landlord",  # trains in-process: ~40 s
    "test_uno_reference.py::test_the_heuristic_beats_random_play_on_the_same_deals",  # ~10 s
    # Real link sockets and the trainer's ingest thread, waited on: 3-4 s each of the fast
    # tier's 60 (it read 58-61 s on a 2-core box with them).
    "test_link_acks.py::test_acks_wait_for_training_and_dedup_survives_a_restart",
    "test_link_acks.py::test_token_handshake_closes_before_anything_is_processed",
}


# Minutes-long tests, kept out of `make test`'s ~10-minute budget on a 2-core machine and run
# by `make test-long` (CROUPIER_LONG_TESTS=1): marked `long` in their module, or listed here.
LONG_TESTS_ON = bool(os.environ.get("CROUPIER_LONG_TESTS"))
_LONG_TESTS = {
    "test_runbook.py::test_the_runbook_runs_as_written",  # every runbook step: ~2 min
    "test_strength_anchor.py::test_short_run_learns_the_landlord",  # in-process PPO: ~40 s
    # Fault runs of several minutes (issue 18 lets them leave `make test`, runnable with one
    # command). What they check is also checked in `make test`, smaller: versions never go back
    # (test_trainer_lifecycle's restart tests), a backlog is trained (test_link_acks), a
    # server's spool survives its death (test_durability), no failed decision on a SIGKILL
    # (test_failover_system).
    "test_trainer_lifecycle.py::test_restarts_never_regress_a_server_and_an_outage_backlog_is_trained",  # noqa: E501  ~165 s
    "test_faults.py::test_trainer_kill_server_kill_and_link_cut",  # ~75 s
}


def _tier(item: pytest.Item) -> str:
    for tier in TIERS:
        if item.get_closest_marker(tier) is not None:
            return tier
    module = item.path.stem
    if module in _SYSTEM_MODULES:
        return "system"
    if module in _INTEGRATION_MODULES or item.get_closest_marker("ray") is not None:
        return "integration"
    if _PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
        return "integration"
    if f"{item.path.name}::{getattr(item, 'originalname', item.name)}" in _INTEGRATION_TESTS:
        return "integration"
    return "unit"


# The slowest modules, collected first: `make test`'s workers take modules in collection order
# (`--dist loadfile --no-loadscope-reorder`), and a slow one taken last leaves the other worker
# idle at the end (in alphabetical order the trainer modules came last: the suite took 521 s on
# two workers; slowest first, 415 s). Seconds: each module's tests summed, in a `make test` of
# two workers on a 2-core box shared with other work (2026-12-07: ~1.8x a quiet box's, the
# most for the ones that compute, schemathesis and the schema properties).
_SLOW_MODULES_FIRST = (
    "test_contract",  # 315
    "test_state_schema",  # 298
    "test_trainer_link",  # 199
    "test_strength_any_game",  # 128
    "test_tune",  # 102
    "test_pretrain",  # 95
    "test_dispatch_caps",  # the three instruction-set reruns: ~60 on a quiet box
    "test_doudizhu_cards",  # 83
    "test_masking",  # 77
    "test_trajectories",  # 72
    "test_rllib_compat",  # 70
    "test_link_secrets",  # 67
    "test_fleet",  # 66
    "test_bench_exploit",  # 57
    "test_your_game",  # 50
    "test_scale_out",  # 49
    "test_failover_system",  # 49
    "test_link_hardening",  # 45
    "test_trainer_lifecycle",  # 44 without its long test
    "test_tiers",  # 44
    "test_candidates_rllib",  # 43
)


# The modules whose tests need a tool a fresh machine installs (`TOOL_PACKAGES`), collected
# last: by then the background install started with the session is done, and no worker waits
# on a download while others run out of modules. Among them the slowest first: the browser
# test (~57 s of one core, two Chromium runs) taken last kept one worker busy for it while
# the other had nothing left.
_TOOL_MODULES_LAST = ("test_dashboard_browser", "test_alerts", "test_metrics",
                      "test_typescript_client")  # fmt: skip


def _collection_rank(item: pytest.Item) -> int:
    stem, first = item.path.stem, len(_SLOW_MODULES_FIRST)
    if stem in _TOOL_MODULES_LAST:
        return first + 1 + _TOOL_MODULES_LAST.index(stem)
    return _SLOW_MODULES_FIRST.index(stem) if stem in _SLOW_MODULES_FIRST else first


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_collection_rank)  # stable: modules stay whole and in order otherwise
    skip_long = pytest.mark.skip(reason="long: make test-long (CROUPIER_LONG_TESTS=1) runs it")
    for item in items:
        tier = _tier(item)
        if item.get_closest_marker(tier) is None:
            item.add_marker(getattr(pytest.mark, tier))
        if f"{item.path.name}::{getattr(item, 'originalname', item.name)}" in _LONG_TESTS:
            item.add_marker(pytest.mark.long)
        if item.get_closest_marker("long") is not None and not LONG_TESTS_ON:
            item.add_marker(skip_long)


class _ProcessInUnitTest(AssertionError):
    pass


@pytest.fixture(autouse=True)
def _unit_tests_start_no_process(request: pytest.FixtureRequest, monkeypatch) -> None:  # noqa: ANN001
    """A unit test that starts a process (a server, Ray, a shell) fails here, so the fast tier
    really has none: mark it integration (or list it above) instead."""
    if request.node.get_closest_marker("unit") is None:
        return

    execute_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def refuse(self: subprocess.Popen, args: Any, *rest: Any, **kwargs: Any) -> Any:
        # RLCard runs `pip freeze` when its package is first imported: a library's import,
        # not a process under test.
        # matplotlib asks fontconfig (`fc-list`) for fonts when it first builds its font
        # cache (a fresh machine, or a fresh HOME): a library's set-up, not a process under test.
        if list(args)[1:] == ["-m", "pip", "freeze"] or list(args)[:1] == ["fc-list"]:
            return execute_child(self, args, *rest, **kwargs)
        raise _ProcessInUnitTest(f"{request.node.nodeid}: a unit test started {args!r}")

    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)
    monkeypatch.setattr("os.fork", refuse)
