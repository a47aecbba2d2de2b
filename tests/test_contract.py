"""The HTTP contract as third-party tools check it, against a real server on loopback (uvicorn
in a thread of this process: one app for the module):

- schemathesis `run --checks all` (every phase, the stateful one chaining create → decide /
  end / abort through the document's links) finds nothing, against a keyed leduc server and a
  keyed doudizhu server: each document types its game's state, so the generated decides carry
  states the game takes and reach its decision logic;
- a 413 is readable by clients that send the whole body first (a raw socket sending slowly;
  Node's `fetch` when node is installed);
- the document's own promises: typed batch items and discriminated results, security, error
  statuses, operation ids, servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from croupier.api.app import create_app
from croupier.api.contract import _this_game, game_type_name
from croupier.api.openapi_export import PUBLISHED, openapi_json, published_path
from croupier.api.schemas import PROBLEM_KINDS
from croupier.config import ServerConfig
from croupier.games.registry import load_adapter

ADMIN = "adm"
MAX_BODY = ServerConfig().max_body_bytes  # 4 MiB: a full 4096-item batch fits
ROOT = Path(__file__).resolve().parents[1]


class ThreadServer:
    """`create_app(config)` served by uvicorn on a loopback socket, from a thread."""

    def __init__(self, config: ServerConfig):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.game = config.game
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(
            uvicorn.Config(create_app(config), log_level="warning", lifespan="on")
        )
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> ThreadServer:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "server did not start"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()


@contextlib.contextmanager
def keyed_server(game: str) -> Iterator[ThreadServer]:
    with tempfile.TemporaryDirectory(prefix="croupier-contract-") as tmp:
        config = ServerConfig(
            game=game,
            admin_keys=[ADMIN],
            api_keys=["eng"],
            read_keys=["rd"],
            data_dir=Path(tmp) / "data",
            arena_results=Path(tmp) / "arena.jsonl",
            seed=1,
        )
        with ThreadServer(config) as s:
            yield s


@pytest.fixture(scope="module")
def server() -> Iterator[ThreadServer]:
    with keyed_server("leduc-holdem") as s:
        yield s


@pytest.fixture(scope="module", params=["leduc-holdem", "doudizhu"])
def game_server(request: pytest.FixtureRequest, server: ThreadServer) -> Iterator[ThreadServer]:
    if request.param == "leduc-holdem":
        yield server
        return
    with keyed_server(request.param) as s:
        yield s


# --- schemathesis ---------------------------------------------------------------------------


@pytest.mark.integration
def test_schemathesis_finds_nothing_with_every_check(game_server: ThreadServer, tmp_path: Path):
    """`schemathesis run <server>/openapi.json --checks all` with an admin key: 0 failures,
    every phase, the stateful one reaching decide and end on games it created (the links), and
    generated states reaching the game itself on such games: taken (200; in leduc, whose
    schema says all the adapter checks, required), or refused by a check no schema can state
    (doudizhu: its own 422, `unprocessable`)."""
    pytest.importorskip("schemathesis", reason="pip install -e '.[dev]' (schemathesis)")
    report = tmp_path / "report"
    cmd = [
        sys.executable, "-m", "schemathesis.cli",
        "--config-file", str(ROOT / "tests" / "schemathesis.toml"),
        "run", f"{game_server.url}/openapi.json",
        "--checks", "all",
        "-H", f"Authorization: Bearer {ADMIN}",
        "--max-examples", str(EXAMPLES),
        "--seed", "7",
        "--workers", "1",
        "--generation-database", "none",
        "--report", "har", "--report-dir", str(report),
        "--no-color",
    ]  # fmt: skip
    t0 = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    text = out.stdout + out.stderr
    print(f"\nschemathesis ({time.monotonic() - t0:.1f} s):\n{text[-1500:]}")
    (tmp_path / "out.txt").write_text(text)
    assert out.returncode == 0, text[-8000:]
    assert "passed" in text and "failure" not in text.lower(), text[-3000:]
    for phase in ("Coverage", "Fuzzing", "Stateful"):
        assert f"✅ {phase}" in text, (phase, text[-3000:])
    created, reached, decided = _created_and_reached(report)
    assert created, "the stateful phase created no game"
    for route in ("decide", "end"):
        assert reached[route] & created, f"no {route} on a game the run created"
    read = {gid for gid, status, kind in decided if status == 200 or kind == UNPROCESSABLE}
    assert read & created, "no generated state reached the game on a game the run created"
    if game_server.game == "leduc-holdem":
        taken = {gid for gid, status, _ in decided if status == 200}
        assert taken & created, "no generated state was taken (200) on a game the run created"


EXAMPLES = 10  # per operation and phase: ~15 s a game alone on the 2-core machine, ~30 s loaded


UNPROCESSABLE = "urn:croupier:problem:unprocessable"


def _created_and_reached(
    report: Path,
) -> tuple[set[str], dict[str, set[str]], set[tuple[str, int, str | None]]]:
    """Game ids schemathesis created (201s of `POST /v1/games`), the game ids of each decide
    and end it sent, and each decide's (game id, status, problem type) (from its HAR
    report)."""
    created: set[str] = set()
    reached: dict[str, set[str]] = {"decide": set(), "end": set()}
    decided: set[tuple[str, int, str | None]] = set()
    for har in report.rglob("*.json"):
        for entry in json.loads(har.read_text())["log"]["entries"]:
            url, status = entry["request"]["url"], entry["response"]["status"]
            path = url.split("://", 1)[1].partition("/")[2]
            parts = path.split("/")
            if path == "v1/games" and status == 201:
                created.add(json.loads(entry["response"]["content"]["text"])["game_id"])
            elif len(parts) == 4 and parts[:2] == ["v1", "games"] and parts[3] in reached:
                reached[parts[3]].add(parts[2])
                if parts[3] == "decide":
                    answer = json.loads(entry["response"]["content"].get("text") or "null")
                    kind = answer.get("type") if isinstance(answer, dict) else None
                    decided.add((parts[2], status, kind))
    return created, reached, decided


# --- 413 readable by every client -----------------------------------------------------------


@pytest.mark.integration
def test_a_large_body_sent_slowly_gets_a_whole_413(server: ThreadServer):
    """The client sends its whole (over-limit) body, slowly, then reads: the 413 is there,
    whole, not a reset connection (the server used to answer and close before reading)."""
    size, chunk = MAX_BODY + 2 * 1024 * 1024, 64 * 1024
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        head = (
            f"POST /v1/games HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {ADMIN}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {size}\r\n\r\n"
        )
        sock.sendall(head.encode())
        sent = 0
        while sent < size:
            sock.sendall(b" " * chunk)
            sent += chunk
            time.sleep(0.005)
        answer = b""
        while data := sock.recv(65536):
            answer += data
    status, _, rest = answer.partition(b"\r\n")
    assert status.startswith(b"HTTP/1.1 413"), answer[:300]
    headers, _, body = rest.partition(b"\r\n\r\n")
    problem = json.loads(body)
    assert problem["status"] == 413 and problem["title"] == "Content Too Large", problem


NODE_FETCH = r"""
const url = process.argv[2], key = process.argv[3];
(async () => {
  const out = [];
  for (let i = 0; i < 10; i++) {
    const size = (4 + (i % 4) * 4) * 1024 * 1024 + 1024;  // just over 4, 8, 12, 16 MiB
    try {
      const r = await fetch(url + "/v1/games", {
        method: "POST", body: "x".repeat(size),
        headers: {"content-type": "application/json", "authorization": "Bearer " + key},
      });
      const body = await r.json();
      out.push({status: r.status, problem: body.status});
    } catch (e) {
      out.push({error: String(e.cause || e)});
    }
  }
  console.log(JSON.stringify(out));
})();
"""


@pytest.mark.integration
def test_node_fetch_reads_every_413(server: ThreadServer, tmp_path: Path):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the raw-socket test above covers the 413")
    script = tmp_path / "fetch.js"
    script.write_text(NODE_FETCH)
    out = subprocess.run(
        [node, str(script), server.url, ADMIN], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    results = json.loads(out.stdout)
    assert results == [{"status": 413, "problem": 413}] * 10, results


# --- the document -----------------------------------------------------------------------------


def _doc() -> dict:
    return create_app(ServerConfig()).openapi()


def test_batch_items_and_results_are_typed_and_discriminated():
    doc = _doc()
    schemas = doc["components"]["schemas"]
    items = schemas["DecideBatchRequest"]["properties"]["items"]["items"]
    assert items == {"$ref": "#/components/schemas/BatchItem"}
    assert "turn" in schemas["BatchItem"]["properties"]
    assert schemas["CreateGamesRequest"]["properties"]["games"]["items"]["$ref"].endswith(
        "/CreateGame"
    )
    assert schemas["EndBatchRequest"]["properties"]["items"]["items"]["$ref"].endswith(
        "/EndBatchItem"
    )
    for response in ("DecideBatchAnswer", "CreateGamesAnswer", "EndBatchAnswer"):
        results = schemas[response]["properties"]["results"]["items"]
        assert results["discriminator"]["propertyName"] == "outcome", response
        assert set(results["discriminator"]["mapping"]) == {"ok", "error"}, response
    for answer in ("DecideAnswer", "Decided"):
        action = schemas[answer]["properties"]["action"]
        assert action["$ref"].endswith("/LeducHoldemAction"), answer
    assert schemas["LeducHoldemAction"]["enum"] == ["call", "raise", "fold", "check"]


@pytest.mark.integration  # in-process, but an app per game: ~5 s of CPU
@pytest.mark.parametrize("game", PUBLISHED)
def test_each_game_document_types_its_state_action_and_payoffs(game: str):
    """The game's own types, referenced wherever a request or an answer carries them: the
    state (decide and decide:batch), the action (decide and its batch items), the payoff (end
    and end:batch, and so a reward's bound)."""
    adapter = load_adapter(game)
    text = openapi_json(game)
    doc = json.loads(text)
    schemas = doc["components"]["schemas"]
    prefix = game_type_name(game)
    assert schemas[f"{prefix}State"] == {**adapter.state_schema(), "title": f"{prefix}State"}
    assert schemas[f"{prefix}Action"] == adapter.action_schema()
    low, high = adapter.payoff_range
    assert (
        schemas[f"{prefix}Payoff"]["minimum"] == low
        and schemas[f"{prefix}Payoff"]["maximum"] == high
    )
    for name in ("DecideRequest", "BatchItem"):
        fields = schemas[name]["properties"]
        assert fields["state"]["$ref"].endswith(f"/{prefix}State"), name
        assert fields["reward"]["anyOf"][0]["maximum"] == adapter.reward_bound, name
    for name in ("DecideAnswer", "Decided"):
        assert schemas[name]["properties"]["action"]["$ref"].endswith(f"/{prefix}Action")
    for name in ("EndRequest", "EndBatchItem"):
        payoffs = schemas[name]["properties"]["payoffs"]
        assert set(payoffs["required"]) == set(adapter.seats), name
        for seat in adapter.seats:
            assert payoffs["properties"][seat]["$ref"].endswith(f"/{prefix}Payoff"), name
    path = published_path(ROOT, game)
    assert path.read_text() == text, f"run: croupier openapi --published ({path})"


def test_an_adapter_without_a_schema_leaves_the_state_an_object():
    """A custom adapter that publishes no schema still serves: its state is any object."""
    from examples.kuhn.adapter import KuhnAdapter

    class Untyped(KuhnAdapter):
        def state_schema(self) -> None:
            return None

    schemas = json.loads(json.dumps(_doc()["components"]["schemas"]))  # a copy
    _this_game(schemas, Untyped())
    assert schemas["KuhnPokerState"]["type"] == "object"
    assert "properties" not in schemas["KuhnPokerState"]
    assert schemas["DecideRequest"]["properties"]["state"]["$ref"].endswith("/KuhnPokerState")


def test_no_generated_names_and_optional_request_fields_carry_no_default():
    """Client generators name an operation's types `<Operation>Response`, `...Data` (hey-api):
    no component may take such a name (it became `DecideResponse2`). And a request field that
    may be left out has no `default`, which openapi-typescript would read as required."""
    doc = _doc()
    schemas = doc["components"]["schemas"]
    for ops in doc["paths"].values():
        for op in ops.values():
            pascal = op["operationId"][:1].upper() + op["operationId"][1:]
            for suffix in ("Data", "Error", "Errors", "Response", "Responses"):
                assert pascal + suffix not in schemas, pascal + suffix
    for name in ("CreateGame", "DecideRequest", "BatchItem", "ResumeGame", "CanaryRequest"):
        for field, spec in schemas[name]["properties"].items():
            assert "default" not in spec, (name, field)
            assert field in schemas[name].get("required", ()) or "default" not in spec
    assert set(schemas["CreateGame"]["required"]) == {"game"}
    assert set(schemas["DecideRequest"]["required"]) == {"seat", "state"}


def test_problem_types_health_and_policies_are_typed():
    doc = _doc()
    schemas = doc["components"]["schemas"]
    types = schemas["Problem"]["properties"]["type"]["enum"]
    assert "about:blank" in types and "urn:croupier:problem:starting" in types
    assert {t.removeprefix("urn:croupier:problem:") for t in types[1:]} == set(PROBLEM_KINDS)
    for path, model in (("/healthz", "Health"), ("/v1/policies", "Policies")):
        answer = doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]
        assert answer["schema"]["$ref"].endswith(f"/{model}"), path


def test_every_route_documents_its_errors_security_and_a_readable_id():
    doc = _doc()
    assert doc["servers"] and doc["components"]["securitySchemes"]["bearerKey"]["scheme"] == (
        "bearer"
    )
    ids = set()
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            where = f"{method.upper()} {path}"
            ids.add(op["operationId"])
            assert "_" not in op["operationId"] and "V1" not in op["operationId"], where
            codes = set(op["responses"])
            if op["security"]:
                assert {"401", "403"} <= codes, where
            if "requestBody" in op:
                assert {"413", "415", "422"} <= codes, where
            assert "503" in codes, where  # the start-up answer, on every route
            for code, response in op["responses"].items():
                if int(code) >= 400:
                    ref = response["content"]["application/json"]["schema"]["$ref"]
                    assert ref.endswith("/Problem"), where
                if code in ("429", "503"):
                    assert "Retry-After" in response["headers"], where
    assert {"decide", "createGame", "createGames", "decideBatch", "endGame", "endGames"} <= ids
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    links = doc["paths"]["/v1/games"]["post"]["responses"]["201"]["links"]
    assert {"decide", "endGame", "abortGame"} <= set(links)


# --- what validation failures and item errors really answer ----------------------------------


def test_errors_answer_the_declared_problem_everywhere(inprocess):
    from croupier.api.schemas import Problem

    async def run(c, service) -> None:
        def problem(r: httpx.Response, status: int, kind: str | None = None) -> dict:
            assert r.status_code == status, r.text
            body = Problem.model_validate(r.json()).model_dump()
            assert set(r.json()) == set(body), r.json()
            if kind:
                assert body["type"] == f"urn:croupier:problem:{kind}", body
            return body

        bad = await c.post("/v1/games", json={"game": "leduc-holdem", "seats": 3})
        assert problem(bad, 422, "invalid-request")["detail"][0]["loc"] == ["body", "seats"]
        # What the document constrains of this game is refused by field, as the schema is.
        fields = {
            ("body", "game"): {"game": "uno"},
            ("body", "seats"): {"game": "leduc-holdem", "seats": {"5": "rules"}},
        }
        for loc, body in fields.items():
            errors = problem(await c.post("/v1/games", json=body), 422, "invalid-request")
            assert [e["loc"] for e in errors["errors"]] == [list(loc)], errors
        r = await c.post("/v1/games/bad id/resume", json={"game": "leduc-holdem", "seats": {}})
        assert problem(r, 422)["errors"][0]["loc"] == ["path", "game_id"]
        await c.post("/v1/games", json={"game": "leduc-holdem", "game_id": "g"})
        r = await c.post("/v1/games/g/decide", json={"seat": "7", "state": {}})
        assert problem(r, 422, "invalid-request")["errors"][0]["loc"] == ["body", "seat"]
        # What the game refuses: its own problem, the field named.
        r = await c.post("/v1/games/g/decide", json={"seat": "0", "state": {}})
        assert problem(r, 422, "unprocessable")["errors"][0]["loc"] == ["body", "state"]
        r = await c.post("/v1/games/g/end", json={"payoffs": {"0": 9, "1": -9}})
        assert problem(r, 422, "unprocessable")["errors"][0]["loc"] == ["body", "payoffs"]
        items = [{"game_id": "g", "seat": "0", "state": {}}]
        [item] = (await c.post("/v1/decide:batch", json={"items": items})).json()["results"]
        assert item["error"]["errors"][0]["loc"] == ["body", "items", "0", "state"], item
        for gid in (".", ".."):
            r = await c.post("/v1/games", json={"game": "leduc-holdem", "game_id": gid})
            problem(r, 422, "invalid-request")
        made = await c.post("/v1/games", json={"game": "leduc-holdem", "game_id": "..."})
        assert made.status_code == 201  # three dots reach the server in a URL
        problem(await c.post("/v1/games/nope/end", json={"payoffs": {}}), 404, "unknown-game")
        r = await c.post("/v1/games", content=b"{}", headers={"content-type": "text/plain"})
        problem(r, 415)
        r = await c.post(
            "/v1/policies/promote", content=b"\xff", headers={"content-type": "application/json"}
        )
        problem(r, 422, "invalid-request")
        r = await c.post("/v1/arena/results", json=[{"version": 1, "payoff": 0.5, "time": False}])
        problem(r, 422, "invalid-request")
        r = await c.post("/v1/arena/results", content=b"[]", headers={"content-type": "text/plain"})
        problem(r, 415)
        r = await c.request("OPTIONS", "/v1/arena/results")
        assert r.status_code == 405 and r.headers["allow"] == "GET, POST", r.headers
        problem(r, 405)
        # A batch item the schema refuses fails the request; one the game refuses, itself.
        r = await c.post("/v1/end:batch", json={"items": [{"game_id": ".", "payoffs": {}}]})
        problem(r, 422, "invalid-request")
        payoffs = {"0": 1, "1": -1}
        r = await c.post("/v1/end:batch", json={"items": [{"game_id": "gone", "payoffs": payoffs}]})
        [item] = r.json()["results"]
        assert item["outcome"] == "error"
        assert Problem.model_validate(item["error"]).type == "urn:croupier:problem:unknown-game"

    inprocess(run)


def test_expired_ended_and_full(inprocess):
    """An expired game is told apart from an unknown one (410); an ended game cannot be
    deleted (409); at the games limit a batch item answers 503 with its retry hint, a single
    create 503 with Retry-After."""

    async def run(c, service) -> None:
        game = {"game": "leduc-holdem"}
        first = (await c.post("/v1/games", json={**game, "game_id": "idle"})).json()
        assert first["game_id"] == "idle"
        for _ in range(200):  # expiry runs every 0.1 s here
            if service.keeper.expired_games:
                break
            await asyncio.sleep(0.05)
        r = await c.post("/v1/games/idle/end", json={"payoffs": {"0": 1, "1": -1}})
        assert r.status_code == 410 and r.json()["type"].endswith(":game-expired"), r.text
        assert (await c.delete("/v1/games/idle")).status_code == 410
        assert (await c.delete("/v1/games/never")).status_code == 404
        await c.post("/v1/games", json={**game, "game_id": "done"})
        await c.post("/v1/games/done/end", json={"payoffs": {"0": 1, "1": -1}})
        r = await c.delete("/v1/games/done")
        assert r.status_code == 409 and r.json()["type"].endswith(":game-ended"), r.text
        made = await c.post("/v1/games:batch", json={"games": [game, game, game]})
        outcomes = [x["outcome"] for x in made.json()["results"]]
        assert outcomes == ["ok", "ok", "error"], made.text
        error = made.json()["results"][2]["error"]
        assert error["status"] == 503 and error["retry_after"] == 1, error
        r = await c.post("/v1/games", json=game)
        assert r.status_code == 503 and r.headers["retry-after"] == "1", r.headers

    inprocess(run, max_games=2, idle_game_timeout_s=1.0)


def test_policies_do_not_name_an_algorithm_before_a_trainer_does(inprocess):
    async def run(c, service) -> dict:
        return (await c.get("/v1/policies")).json()

    assert inprocess(run)["policies"]["learned"]["model"]["algo"] is None


@pytest.mark.parametrize("game", ["leduc-holdem", "doudizhu"])
def test_health_and_policies_answer_their_documented_models(inprocess, game: str):
    from croupier.api.health import Health, Policies

    async def run(c, service) -> None:
        health = Health.model_validate((await c.get("/healthz")).json())
        assert health.game == game
        policies = Policies.model_validate((await c.get("/v1/policies")).json())
        assert policies.game.name == game
        assert (policies.game.policy == "candidates") == (game == "doudizhu")

    inprocess(run, game=game)


def test_a_batch_is_not_refused_by_the_decision_queue_limit(inprocess, leduc_states):
    """docs/operations.md's limits: a `decide:batch`'s items are forwarded at once, never
    queued, so a batch larger than `--max-queued-decisions` is answered whole."""

    async def run(c, service) -> list[str]:
        games = [{"game": "leduc-holdem", "game_id": f"q{i}", "seats": {"0": "learned"}}
                 for i in range(5)]  # fmt: skip
        made = await c.post("/v1/games:batch", json={"games": games})
        assert [r["outcome"] for r in made.json()["results"]] == ["ok"] * 5, made.text
        items = [{"game_id": f"q{i}", "seat": "0", "state": leduc_states[i]} for i in range(5)]
        r = await c.post("/v1/decide:batch", json={"items": items})
        assert r.status_code == 200, r.text
        return [item["outcome"] for item in r.json()["results"]]

    assert inprocess(run, max_queued_decisions=2) == ["ok"] * 5
