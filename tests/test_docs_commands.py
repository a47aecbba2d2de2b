"""Commands and claims of the docs, run as written: rollout.md's curl lines against a real
server, the README's key rules."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np

from tests.conftest import running_server_logged
from tests.helpers.docs import bash_blocks, commands

ROOT = Path(__file__).resolve().parents[1]


def _weights_dir(path: Path, versions: range) -> Path:
    from croupier.games.registry import load_adapter
    from croupier.policies.learned import PolicyVersions

    pv = PolicyVersions(load_adapter("leduc-holdem"), weights_dir=path)
    base = pv.weights()
    for v in versions:
        pv.install(v, {k: w + np.float32(0.01 * v) for k, w in base.items()})
    return path


def _curl(command: str, host: str) -> tuple[int, object]:
    """Run a doc's curl line against `host` (for localhost:8000); (status, JSON body)."""
    line = command.replace("localhost:8000", host) + " -sS -w '\\n%{http_code}'"
    out = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    body, _, status = out.stdout.rpartition("\n")
    return int(status), json.loads(body) if body else None


def test_rollout_md_channel_curls_work_as_written(tmp_path):
    doc = (ROOT / "docs/rollout.md").read_text()
    block = bash_blocks(doc, "## Channels: latest and production")[0]
    promote, rollback, canary, channels = commands(block)
    weights = _weights_dir(tmp_path / "w", range(5, 13))
    keys = ("--admin-keys", "ADMINKEY", "--api-keys", "KEY")
    with running_server_logged("--weights-dir", str(weights), *keys) as server:
        host = server.url.removeprefix("http://")
        # The doc's promote without its Content-Type header: curl sends a form body → 415.
        formless = promote.replace("-H 'Content-Type: application/json' ", "")
        assert formless != promote
        assert _curl(formless, host)[0] == 415
        seven = promote.replace('"version": 12', '"version": 7')  # so there is a rollback
        assert _curl(seven, host)[0] == 200
        status, event = _curl(promote, host)
        assert status == 200 and event["production"] == 12 and event["previous"] == 7
        assert event["evidence"] == {"ticket": "OPS-42"}
        status, event = _curl(rollback, host)
        assert status == 200 and event["production"] == 7
        status, event = _curl(canary, host)
        assert status == 200 and event["canary_share"] == 0.05
        status, state = _curl(channels, host)
        assert status == 200
        assert (state["latest"], state["production"], state["history"]) == (12, 7, [])
        assert state["canary_share"] == 0.05
        actions = [e["action"] for e in state["events"]]
        assert actions == ["promote", "promote", "rollback", "canary"]


def test_readme_keys_only_admin_keys_close_the_engine_routes(inprocess):
    """README "Keys": with only --admin-keys, engines need a key (the admin key works)."""

    async def body(client, service):
        game = {"game": "leduc-holdem"}
        return (
            (await client.post("/v1/games", json=game)).status_code,
            (await client.post("/v1/games", json=game, headers={"Authorization": "Bearer x"}))
            .status_code,
            (await client.post("/v1/games", json=game, headers={"Authorization": "Bearer adm"}))
            .status_code,
            (await client.get("/healthz")).status_code,
        )  # fmt: skip

    assert inprocess(body, admin_keys=["adm"]) == (401, 403, 201, 200)
