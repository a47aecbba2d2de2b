"""`croupier promote --auto --evidence live` on real processes: two kuhn servers (a game
croupier does not ship), an engine of plain HTTP POSTs (no simulator on croupier's side), and
the promote command reading both servers' live tables. A better version is promoted on both;
a worse one is refused.

The versions are written by hand (no training): a one-layer network whose hidden layer passes
the one-hot card through, so the head's weights are a table of logits per card. `good` plays
the studio's rules (bet/call a king, check/call a queen, check/fold a jack); `worst` gives up
kings and queens and bets or calls jacks, `bad` is the rules' opposite. Against random play
(40,000 hands each, simulated): good +0.21, bad −0.26, worst −0.46 per hand, std ~1.4; so with
300 games an arm the first comparison sits ~6.2 standard errors above zero (the always-valid
boundary there is ~3.1), the second ~4 below.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import subprocess
import sys
import tempfile
from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from croupier.local_server import free_port, start_serve, stop, wait_until_up
from croupier.policies.learned import PolicyVersions
from croupier.policies.module import ModelSpec
from examples.kuhn.adapter import KuhnAdapter
from examples.kuhn.game import KuhnHand

pytestmark = pytest.mark.system

GAME = "examples.kuhn.adapter:KuhnAdapter"
ADMIN = "adm"
ENGINE = {"Authorization": "Bearer eng"}
ACTIONS = KuhnAdapter.action_names  # check, bet, call, fold
PREFER = {  # card -> the actions a version prefers (masking picks the legal one)
    "good": {"K": ("bet", "call"), "Q": ("check", "call"), "J": ("check", "fold")},
    "bad": {"K": ("check", "fold"), "Q": ("bet", "fold"), "J": ("bet", "call")},
    "worst": {"K": ("check", "fold"), "Q": ("check", "fold"), "J": ("bet", "call")},
}
GAMES_PER_ARM = 300
MIN_GAMES = 200


def _weights(versions: PolicyVersions, kind: str) -> dict[str, np.ndarray]:
    """Hidden layer = identity on the observation (one-hot, so ReLU passes it), head = a
    table of logits per card; every other array zero."""
    adapter = versions.adapter
    out = {}
    for name, w in versions.weights().items():
        w = np.zeros_like(w)
        if w.shape == (16, adapter.obs_size):  # the actor's hidden layer
            w[: adapter.obs_size, :] = np.eye(adapter.obs_size)
        elif w.shape == (adapter.num_actions, 16) and kind in PREFER:  # the policy head
            for card, preferred in PREFER[kind].items():
                for action in preferred:
                    w[ACTIONS.index(action), "JQK".index(card)] = 8.0
        out[name] = w
    return out


def _weights_dir(path) -> None:
    versions = PolicyVersions(KuhnAdapter(), ModelSpec("ppo", [16]), weights_dir=path)
    for version, kind in ((1, "worst"), (2, "good"), (3, "bad")):
        assert versions.install(version, _weights(versions, kind))


@contextlib.contextmanager
def _servers(n: int, weights_dir) -> Iterator[list[str]]:
    """`n` kuhn servers, each with its own copy of the weights dir, started together."""
    with contextlib.ExitStack() as stack:
        procs = []
        for _ in range(n):
            data = stack.enter_context(tempfile.TemporaryDirectory(prefix="croupier-live-"))
            args = [
                "--game", GAME, "--data-dir", data, "--weights-dir", f"{data}/weights",
                "--api-keys", "eng", "--admin-keys", ADMIN, "--log-level", "warning",
            ]  # fmt: skip
            subprocess.run(["cp", "-r", str(weights_dir), f"{data}/weights"], check=True)
            port = free_port()
            proc = start_serve(args, port)
            stack.callback(stop, proc)
            procs.append((f"http://127.0.0.1:{port}", proc))
        for url, proc in procs:
            wait_until_up(url, proc, timeout=90.0, poll_s=0.1)
        yield [url for url, _ in procs]


async def _engine(urls: list[str], arms: list[str], games_per_arm: int, seed: int) -> None:
    """The studio's engine: plain POSTs of kuhn states. Each game seats one arm's policy
    against `random`, in either seat; games alternate between the servers."""
    rng = random.Random(seed)
    jobs = [(arm, i) for arm in arms for i in range(games_per_arm)]
    rng.shuffle(jobs)
    queue: asyncio.Queue = asyncio.Queue()
    for job in jobs:
        queue.put_nowait(job)

    async def table(client: httpx.AsyncClient, worker: int) -> None:
        url = urls[worker % len(urls)]
        while not queue.empty():
            arm, i = queue.get_nowait()
            seat = str(i % 2)
            seats = {seat: arm, str(1 - i % 2): "random"}
            r = await client.post(
                f"{url}/v1/games", json={"game": "kuhn-poker", "seats": seats, "record": False}
            )
            assert r.status_code == 201, r.text
            game_id = r.json()["game_id"]
            hand = KuhnHand(rng)
            while not hand.is_over():
                player = hand.current_player()
                d = await client.post(
                    f"{url}/v1/games/{game_id}/decide",
                    json={"seat": str(player), "state": hand.state(player)},
                )
                assert d.status_code == 200, d.text
                hand.step(d.json()["action"])
            payoffs = dict(zip(("0", "1"), hand.payoffs(), strict=True))
            e = await client.post(f"{url}/v1/games/{game_id}/end", json={"payoffs": payoffs})
            assert e.status_code == 200, e.text

    async with httpx.AsyncClient(headers=ENGINE, timeout=10.0) as client:
        await asyncio.gather(*(table(client, w) for w in range(8)))


def _promote(urls: list[str], *extra: str) -> dict:
    cmd = [
        sys.executable, "-m", "croupier", "promote", "--auto", "--evidence", "live",
        "--url", ",".join(urls), "--admin-key", ADMIN, "--min-games", str(MIN_GAMES), *extra,
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _production(urls: list[str]) -> list[int | None]:
    auth = {"Authorization": f"Bearer {ADMIN}"}
    return [httpx.get(f"{u}/v1/policies/channels", headers=auth).json()["production"] for u in urls]


def test_live_evidence_promotes_a_better_version_and_refuses_a_worse_one(tmp_path) -> None:
    _weights_dir(tmp_path / "weights")
    with _servers(2, tmp_path / "weights") as urls:
        # production = the worst version, set by hand on the fleet
        done = subprocess.run(
            [sys.executable, "-m", "croupier", "promote", "--version", "1",
             "--url", ",".join(urls), "--admin-key", ADMIN],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr

        # too few canary games: no decision yet
        asyncio.run(_engine(urls, ["frozen@2", "production"], 20, seed=1))
        early = _promote(urls, "--candidate", "2")
        assert not early["promoted"] and "not enough live games" in early["reason"]

        # canary games of version 2 beside production's, against the same (random) opponents
        asyncio.run(_engine(urls, ["frozen@2", "production"], GAMES_PER_ARM, seed=2))
        tables = [
            httpx.get(f"{u}/v1/arena/live", headers={"Authorization": f"Bearer {ADMIN}"}).json()
            for u in urls
        ]
        assert all(t["games"] > GAMES_PER_ARM / 2 for t in tables)  # both servers played
        better = _promote(urls, "--candidate", "2")
        live = better["evidence"]["live"]
        assert better["promoted"], better["reason"]
        assert live["a"] == "frozen@2" and live["b"] == "frozen@1"
        assert min(live["games"]) >= MIN_GAMES and live["diff"] - live["cs95"] > 0
        assert _production(urls) == [2, 2]

        # version 3 (bad) against the new production (good): refused, nothing changes
        asyncio.run(_engine(urls, ["frozen@3"], GAMES_PER_ARM, seed=3))
        worse = _promote(urls)  # the newest loaded version, 3
        assert not worse["promoted"] and "is not ahead" in worse["reason"], worse["reason"]
        assert worse["evidence"]["live"]["diff"] < 0
        assert _production(urls) == [2, 2]
