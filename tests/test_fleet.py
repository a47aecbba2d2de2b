"""A fleet of two real servers: one promote reaches both, a failure changes none, the canary
share moves at run time, and the channel (events included) survives a restart."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np

from croupier.arena.fleet import change_fleet
from croupier.games.registry import load_adapter
from croupier.policies.learned import PolicyVersions
from tests.conftest import free_port, running_server_logged

ADMIN = "adm"
ENGINE_KEY = "eng"
KEYS = ("--api-keys", ENGINE_KEY, "--admin-keys", ADMIN)


def _weights_dir(path: Path, versions: range) -> Path:
    """A weights dir holding `versions` (as a server writes them), so servers start with
    several loaded versions and no trainer is needed."""
    pv = PolicyVersions(load_adapter("leduc-holdem"), weights_dir=path)
    base = pv.weights()
    for v in versions:
        pv.install(v, {k: w + np.float32(0.01 * v) for k, w in base.items()})
    return path


def _channels(url: str) -> dict:
    r = httpx.get(
        url + "/v1/policies/channels", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10
    )
    r.raise_for_status()
    return r.json()


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "croupier", "promote", *args, "--admin-key", ADMIN],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _fleet(urls: list[str], action: str, **kw) -> dict:
    return asyncio.run(change_fleet(urls, action, admin_key=ADMIN, **kw))


def test_one_promote_reaches_every_server_of_a_fleet(tmp_path):
    wd_a = _weights_dir(tmp_path / "a", range(1, 4))
    wd_b = _weights_dir(tmp_path / "b", range(1, 4))
    with contextlib.ExitStack() as stack:
        a = stack.enter_context(
            running_server_logged("--weights-dir", str(wd_a), "--seats", "canary,rules", *KEYS)
        )
        b = stack.enter_context(
            running_server_logged("--weights-dir", str(wd_b), "--seats", "canary,rules", *KEYS)
        )
        fleet = f"{a.url},{b.url}"

        # The CLI, as an operator runs it: both servers move, each is reported.
        done = _cli("--url", fleet, "--version", "2")
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.count(": changed") == 2 and "ok: all 2 servers" in done.stdout
        assert _channels(a.url)["production"] == _channels(b.url)["production"] == 2

        # A version one server lacks: refused before anything changes, exit 1.
        bad = _cli("--url", fleet, "--version", "99")
        assert bad.returncode == 1 and "refused, nothing changed" in bad.stdout
        assert [_channels(u)["production"] for u in (a.url, b.url)] == [2, 2]

        # One server unreachable: nothing changes on the other either.
        dead = f"http://127.0.0.1:{free_port()}"
        report = _fleet([a.url, dead], "promote", version=3)
        assert not report["ok"] and report["servers"][dead]["result"] == "unreachable"
        assert report["servers"][a.url]["result"] == "not changed"
        assert _channels(a.url)["production"] == 2

        # A split fleet (one server promoted on its own) is converged by promoting again:
        # the server already there is left alone, the other one moves.
        r = httpx.post(
            a.url + "/v1/policies/promote",
            json={"version": 3},
            headers={"Authorization": f"Bearer {ADMIN}"},
        )
        assert r.status_code == 200, r.text
        split = _fleet([a.url, b.url], "rollback")  # they disagree on what a rollback means
        assert not split["ok"] and "disagree" in split["refused"][0]
        report = _fleet([a.url, b.url], "promote", version=3)
        assert report["ok"] and report["consistent"]
        assert [report["servers"][u]["result"] for u in (a.url, b.url)] == ["unchanged", "changed"]

        # A fleet rollback takes both back to 2.
        report = _fleet([a.url, b.url], "rollback")
        assert report["ok"] and report["target"] == 2
        assert [_channels(u)["production"] for u in (a.url, b.url)] == [2, 2]

        # The canary share moves at run time on both (CLI), no restart; new games follow it.
        done = _cli("--url", fleet, "--canary-share", "1")
        assert done.returncode == 0, done.stdout + done.stderr
        for url in (a.url, b.url):
            stats = httpx.get(url + "/v1/rollout", headers={"Authorization": "Bearer eng"})
            assert stats.json()["canary"]["share"] == 1.0
            game = httpx.post(
                url + "/v1/games",
                json={"game": "leduc-holdem", "seats": {"0": "canary", "1": "rules"}},
                headers={"Authorization": "Bearer eng"},
            ).json()
            assert game["seats"]["0"] == {"policy": "canary:production", "version": 2}
        events_before = _channels(a.url)["events"]
        assert [e["action"] for e in events_before] == [
            "promote", "promote", "rollback", "canary",
        ]  # fmt: skip

    # A restarted server (same weights dir) keeps production, the share and the events,
    # though its flag says --canary-share 0.
    with running_server_logged("--weights-dir", str(wd_a), "--canary-share", "0", *KEYS) as a2:
        after = _channels(a2.url)
        assert after["production"] == 2 and after["canary_share"] == 1.0
        assert after["events"] == events_before
        assert "is kept over --canary-share 0.0" in a2.log()


def test_canary_route_needs_admin_and_refuses_bad_shares(inprocess, tmp_path):
    async def body(client, service):
        admin = {"Authorization": f"Bearer {ADMIN}"}
        out = {
            "no_key": (await client.post("/v1/policies/canary", json={"share": 0.5})).status_code,
            "engine": (
                await client.post(
                    "/v1/policies/canary", json={"share": 0.5},
                    headers={"Authorization": f"Bearer {ENGINE_KEY}"},
                )
            ).status_code,
        }  # fmt: skip
        bad = [1.5, -0.1, "0.5", None, "NaN"]
        out["bad"] = [
            (await client.post("/v1/policies/canary", json={"share": s}, headers=admin)).status_code
            for s in bad
        ]
        out["nan_raw"] = (
            await client.post(
                "/v1/policies/canary",
                content=b'{"share": NaN}',
                headers={**admin, "Content-Type": "application/json"},
            )
        ).status_code
        out["share_after_bad"] = service.rollout.canary_share
        ok = await client.post(
            "/v1/policies/canary", json={"share": 0.25, "evidence": {"ticket": "OPS-1"}},
            headers=admin,
        )  # fmt: skip
        out["ok"] = ok.status_code, ok.json()["canary_share"], ok.json()["previous_canary_share"]
        out["share"] = service.rollout.canary_share
        return out

    out = inprocess(
        body, api_keys=[ENGINE_KEY], admin_keys=[ADMIN], canary_share=0.1,
        weights_dir=tmp_path / "w",
    )  # fmt: skip
    assert out["no_key"] == 401 and out["engine"] == 403
    assert out["bad"] == [422] * 5 and out["nan_raw"] == 422
    assert out["share_after_bad"] == 0.1
    assert out["ok"] == (200, 0.25, 0.1) and out["share"] == 0.25


def test_channel_events_are_read_back_from_the_log_tail(tmp_path):
    """The last 100 events come back from promotions.jsonl; a damaged line is skipped."""
    from croupier.policies.rollout.channels import LOG_FILE, RECENT_EVENTS, Channels

    versions = PolicyVersions(load_adapter("leduc-holdem"))
    lines = [json.dumps({"action": "promote", "production": v}) for v in range(150)]
    lines[140] = '{"action": "promo'  # a write cut by a crash
    lines.append("[1, 2]")  # valid JSON, not an event
    (tmp_path / LOG_FILE).write_text("\n".join(lines) + "\n")
    events = Channels(versions, tmp_path).state()["events"]
    assert [e["production"] for e in events] == [v for v in range(51, 150) if v != 140]
    assert len(events) == RECENT_EVENTS - 2


def test_a_server_failing_after_the_check_is_reported_and_the_fleet_called_split():
    """Both servers pass the check (the key reads channels on both) but one refuses the
    change (there the key is no admin key): the other is changed, the report says which and
    that the fleet is split, and `ok` is false (the CLI exits 1)."""
    from croupier.arena.fleet import format_report
    from tests.helpers.servers import ThreadServer

    with (
        ThreadServer(admin_keys=[ADMIN]) as a,
        ThreadServer(api_keys=[ADMIN], admin_keys=["another"]) as b,
    ):
        report = _fleet([a.url, b.url], "promote", version=0)
        assert not report["ok"] and not report["consistent"]
        assert report["servers"][a.url]["result"] == "changed"
        assert report["servers"][b.url]["result"] == "failed"
        assert "403" in report["servers"][b.url]["error"]
        assert a.service.rollout.channels.production == 0
        assert b.service.rollout.channels.production is None
        assert "NOT ok: the fleet is split" in format_report(report)


def _status(urls: str, key: str | None, *args: str) -> subprocess.CompletedProcess:
    """`croupier status` as the fleet check runs it: the key from CROUPIER_READ_KEY."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CROUPIER_")}
    if key is not None:
        env["CROUPIER_READ_KEY"] = key
    return subprocess.run(
        [sys.executable, "-m", "croupier", "status", "--url", urls, *args],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip


def test_status_with_a_read_key_exits_1_on_any_split_and_says_forbidden():
    """`croupier status` needs only a read key; a fleet split on production, on the canary
    share or far apart on the newest version exits 1 and says how; a refused key is
    "forbidden" (or "unauthorized" without one), not "unreachable"."""
    from tests.helpers.servers import ThreadServer

    keys = {"api_keys": [ENGINE_KEY], "admin_keys": [ADMIN], "read_keys": ["rd"]}
    with ThreadServer(**keys) as a, ThreadServer(**keys) as b:
        fleet = f"{a.url},{b.url}"
        healthy = _status(fleet, "rd")
        assert healthy.returncode == 0, healthy.stdout + healthy.stderr
        assert healthy.stdout.splitlines()[-1].startswith("ok")

        a.service.rollout.channels.promote(0, {"by": "test"})  # one server promoted by hand
        split = _status(fleet, "rd")
        assert split.returncode == 1 and "production differs" in split.stdout, split.stdout
        b.service.rollout.channels.promote(0, {"by": "test"})
        assert _status(fleet, "rd").returncode == 0

        a.service.rollout.channels.set_canary_share(0.05, {"by": "test"})
        split = _status(fleet, "rd")
        assert split.returncode == 1 and "canary_share differs" in split.stdout, split.stdout
        b.service.rollout.channels.set_canary_share(0.05, {"by": "test"})

        weights = a.service.versions.weights()
        a.service.versions.install(51, weights)  # b holds 0: 51 apart
        report = json.loads(_status(fleet, "rd", "--json").stdout)
        assert not report["ok"] and "latest versions 51 apart" in report["splits"][0], report
        assert _status(fleet, "rd", "--max-version-spread", "51").returncode == 0

        wrong = _status(fleet, "not-a-key", "--max-version-spread", "51")
        assert wrong.returncode == 1 and wrong.stdout.count("forbidden (HTTP 403") == 2
        assert "unreachable" not in wrong.stdout
        none = _status(fleet, None, "--max-version-spread", "51")
        assert none.returncode == 1 and none.stdout.count("unauthorized (HTTP 401") == 2
