"""The learned policy never picks an illegal action: illegal actions have probability 0."""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
import pytest
import torch

from croupier.engine.runner import run_engine
from croupier.games.leduc import LeducAdapter
from croupier.games.uno import UnoAdapter
from croupier.policies.learned import PolicyVersions
from croupier.policies.module import ModelSpec, PolicyNetwork, apply_mask


def random_masks(rng: np.random.Generator, n: int, num_actions: int) -> np.ndarray:
    """Random nonempty masks, many with a single legal action, some with all legal."""
    p = rng.choice([0.05, 0.3, 0.7, 1.0], size=(n, 1))
    mask = (rng.random((n, num_actions)) < p).astype(np.float32)
    mask[np.arange(n), rng.integers(0, num_actions, n)] = 1.0
    return mask


@pytest.fixture(scope="module", params=[LeducAdapter, UnoAdapter], ids=["leduc", "uno"])
def versions(request) -> PolicyVersions:
    torch.set_num_threads(1)
    return PolicyVersions(request.param(), seed=3)


def test_thousands_of_learned_decisions_are_legal(versions):
    adapter = versions.adapter
    _, module = versions.resolve(None)
    rng = np.random.default_rng(0)
    total = 0
    torch.manual_seed(0)
    for _ in range(30):
        n = 100
        # Wide observations too: large logits must not leak probability to masked actions.
        obs = (rng.standard_normal((n, adapter.obs_size)) * rng.choice([1, 100])).astype(np.float32)
        mask = random_masks(rng, n, adapter.num_actions)
        for explore in (True, False):
            res = versions.act(module, obs, mask, explore=explore)
            assert res.actions.shape == (n,)
            assert res.valid is None  # every row fit to serve
            assert (mask[np.arange(n), res.actions] == 1.0).all()
            assert np.isfinite(res.logp).all() and (res.logp <= 0).all()
            probs = torch.softmax(torch.from_numpy(res.logits), -1).numpy()
            assert (probs[mask == 0] == 0.0).all()  # exactly zero, not just small
            np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)
            logp_all = torch.log_softmax(torch.from_numpy(res.logits), -1).numpy()
            np.testing.assert_allclose(
                res.logp, logp_all[np.arange(n), res.actions], rtol=1e-5, atol=1e-5
            )
            total += n
    assert total == 6000
    # A single legal action is taken with certainty.
    one = np.zeros((1, adapter.num_actions), np.float32)
    one[0, adapter.num_actions - 1] = 1.0
    res = versions.act(module, np.zeros((1, adapter.obs_size), np.float32), one)
    assert res.actions[0] == adapter.num_actions - 1 and res.logp[0] == pytest.approx(0.0)


def test_apply_mask_gives_zero_probability():
    logits = torch.tensor([[50.0, -50.0, 3.0, 1e6], [0.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    masked = apply_mask(logits, mask)
    probs = torch.softmax(masked, -1)
    assert (probs[mask == 0] == 0).all()
    assert torch.isfinite(torch.log_softmax(masked, -1)[mask == 1]).all()
    assert probs[1, 0] == 1.0
    # Legal logits are unchanged.
    assert torch.equal(masked[mask == 1], logits[mask == 1])


def _module_logits(module, obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
    batch = {"obs": {"observations": torch.from_numpy(obs), "action_mask": torch.from_numpy(mask)}}
    with torch.inference_mode():
        return module._forward(batch)["action_dist_inputs"].numpy()


@pytest.mark.parametrize(
    "spec",
    [
        ModelSpec(),
        ModelSpec(algo="ppo", hiddens=[64], vf_share_layers=True),
        ModelSpec(hiddens=[32, 16, 8], activation="tanh"),
    ],
    ids=["appo", "ppo-shared", "tanh-3"],
)
def test_the_plain_policy_network_gives_the_modules_logits(spec):
    """Serving skips RLlib's wrapper (`PolicyNetwork`); the logits, and so the samples and
    the log-probs the trainer gets, are the module's own, bit for bit, before and after new
    weights land (the network shares the module's parameters)."""
    adapter = LeducAdapter()
    versions = PolicyVersions(adapter, spec=spec, seed=1)
    _, module = versions.resolve(None)
    network = PolicyNetwork.of(module)
    assert network is not None
    rng = np.random.default_rng(5)
    for _ in range(2):
        obs = (rng.standard_normal((50, adapter.obs_size)) * 10).astype(np.float32)
        mask = random_masks(rng, 50, adapter.num_actions)
        want = _module_logits(module, obs, mask)
        assert np.array_equal(network(obs, mask), want)
        assert np.array_equal(versions.act(module, obs, mask).logits, want)
        # New weights, loaded in place as `install` and checkpoints do.
        with torch.no_grad():
            for p in module.parameters():
                p.add_(torch.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32)))


def test_a_module_of_another_layout_is_served_by_its_own_forward():
    adapter = LeducAdapter()
    versions = PolicyVersions(adapter, seed=1)
    _, module = versions.resolve(None)
    # Layers that are not the module's policy: caught by the check, never served.
    stranger = torch.nn.Sequential(torch.nn.Linear(adapter.obs_size, adapter.num_actions))
    assert not PolicyNetwork(stranger).matches(module)
    # No actor layers where the default modules keep them: the module's `_forward` serves.
    assert PolicyNetwork.of(torch.nn.Linear(2, 2)) is None
    versions._networks[module] = None
    obs = np.random.default_rng(0).standard_normal((8, adapter.obs_size)).astype(np.float32)
    mask = random_masks(np.random.default_rng(1), 8, adapter.num_actions)
    assert np.array_equal(versions.act(module, obs, mask).logits, _module_logits(module, obs, mask))


def test_learned_decisions_over_http_are_legal(leduc_server):
    """~1000 learned decisions through the real engine (it fails a hand on an illegal action)."""
    before = httpx.get(leduc_server + "/healthz").json()["decisions"].get("learned", 0)
    summary = asyncio.run(
        run_engine(leduc_server, "leduc-holdem", 16, ["learned", "learned"], 420, None, seed=9)
    )
    assert summary.errors == 0, summary.error_samples
    assert summary.hands == 420
    after = httpx.get(leduc_server + "/healthz").json()["decisions"]["learned"]
    assert after - before == summary.decisions
    assert summary.decisions >= 900


# --- weights gone bad (issue 14, finding 1) ---------------------------------------------------


def _nan(weights: dict[str, np.ndarray], value: float = np.nan) -> dict[str, np.ndarray]:
    """The same weights with one layer's values replaced by NaN (or inf): a diverged run."""
    bad = {k: v.copy() for k, v in weights.items()}
    first = next(iter(bad))
    bad[first][...] = value
    return bad


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_weights_are_refused_at_install(value):
    versions = PolicyVersions(LeducAdapter(), seed=1)
    good = versions.weights()
    assert versions.install(1, good)
    assert not versions.install(2, _nan(good, value))
    assert not versions.install(3, _nan(good, value), force=True)  # a reconnect's state too
    assert versions.latest == 1 and versions.versions() == [0, 1]
    assert versions.refused_nonfinite == 2 and "non-finite" in versions.last_refused
    with pytest.raises(ValueError, match="non-finite"):
        versions.retain(7, _nan(good, value))  # a channel's version, loaded back


def _poison(versions: PolicyVersions) -> None:
    """NaN straight into the served module's parameters: whatever the way in (install is
    guarded), the forward must not turn NaN into an action."""
    _, module = versions.resolve(None)
    with torch.no_grad():
        for p in module.parameters():
            p.fill_(float("nan"))


def test_non_finite_logits_are_flagged_never_served():
    versions = PolicyVersions(LeducAdapter(), seed=1)
    _poison(versions)
    _, module = versions.resolve(None)
    obs = np.zeros((4, versions.adapter.obs_size), np.float32)
    mask = np.array([[0, 1, 1, 0]] * 4, np.float32)  # "call" (index 0) illegal
    for explore in (True, False):
        res = versions.act(module, obs, mask, explore=explore)
        assert not res.valid.any()  # argmax over NaN picks 0: illegal, and flagged so


def test_one_bad_row_is_flagged_alone():
    versions = PolicyVersions(LeducAdapter(), seed=1)
    _, module = versions.resolve(None)
    obs = np.zeros((4, versions.adapter.obs_size), np.float32)
    obs[2, 0] = np.nan  # one request's observation gone bad: only its logits are NaN
    mask = np.array([[0, 1, 1, 0]] * 4, np.float32)
    res = versions.act(module, obs, mask)
    assert res.valid is not None and res.valid.tolist() == [True, True, False, True]


def test_nan_weights_serve_only_legal_actions_via_the_fallback(inprocess, leduc_states):
    """20 decides with only raise and fold legal on a model gone NaN: each answered legal by
    the fallback, marked and counted, none recorded as learned (it answered "call" before)."""
    state = {**leduc_states[0], "legal_actions": ["raise", "fold"]}

    async def body(client, service):
        _poison(service.versions)
        seats = {"0": "learned", "1": "rules"}
        gid = (
            await client.post("/v1/games", json={"game": "leduc-holdem", "seats": seats})
        ).json()["game_id"]
        single = [
            (
                await client.post(f"/v1/games/{gid}/decide", json={"seat": "0", "state": state})
            ).json()
            for _ in range(10)
        ]
        items = [{"game_id": gid, "seat": "0", "state": state}] * 10
        batch = (await client.post("/v1/decide:batch", json={"items": items})).json()["results"]
        ended = await client.post(f"/v1/games/{gid}/end", json={"payoffs": {"0": 1, "1": -1}})
        metrics = (await client.get("/metrics")).text
        return single + batch, ended.json(), service.health(), metrics

    answers, ended, health, metrics = inprocess(body)
    assert len(answers) == 20
    for a in answers:
        assert a["action"] in ("raise", "fold"), a
        assert a["fallback"] is True and a["policy"] == "rules" and a["version"] is None
    assert health["fallbacks"] == 20 and health["batcher"]["invalid"] == 20
    assert ended["episodes"] == 0  # nothing recorded as the learned policy's
    assert "croupier_batcher_invalid_total 20.0" in metrics
    assert "croupier_fallbacks_total 20.0" in metrics


class NaNPushingTrainer:
    """A fake trainer on croupier's own wire: answers the handshake with good weights
    (version 1), then pushes NaN weights as version 2, then keeps reading (a diverged run)."""

    def __init__(self, good: dict[str, np.ndarray]):
        import socket
        import threading

        self.good, self.bad = good, _nan(good)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.pushed = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _state(self, version: int, weights: dict[str, np.ndarray]) -> dict:
        return {"type": "SET_STATE", "state": {"rl_module": weights, "weights_seq_no": version}}

    def _serve(self) -> None:
        from croupier.link import wire

        try:
            conn, _ = self.sock.accept()
            with conn:
                adapter = LeducAdapter()
                for kind, answer in (
                    ("PING", {"type": "PONG"}),
                    ("GET_CONFIG", {"type": "SET_CONFIG", "config": {
                        "format": "croupier/1", "obs_size": adapter.obs_size,
                        "num_actions": adapter.num_actions, "model": ModelSpec().to_dict(),
                        "acks": False}}),
                    ("GET_STATE", self._state(1, self.good)),
                ):  # fmt: skip
                    got, _ = wire.recv(conn)
                    assert got.name == kind, got
                    wire.send(conn, answer)
                wire.send(conn, self._state(2, self.bad))
                self.pushed.set()
                conn.settimeout(60)
                while True:  # take whatever the server ships until it goes
                    wire.recv(conn)
        except (OSError, ConnectionError):
            pass

    def close(self) -> None:
        self.sock.close()


def test_a_trainer_pushing_nan_weights_leaves_the_server_serving_legal_actions():
    """A real server linked to a trainer that pushes NaN weights: the NaN version is refused
    and counted (`weights_refused` and the link's `versions_refused`), version 1 keeps
    serving, and every answer is legal."""
    from tests.conftest import running_server, wait_for

    good = {k: v + 0.01 for k, v in PolicyVersions(LeducAdapter(), seed=5).weights().items()}
    trainer = NaNPushingTrainer(good)
    state = {"hand": "SJ", "public_card": None, "all_chips": [2, 1], "my_chips": 1,
             "legal_actions": ["raise", "fold"], "current_player": 0}  # fmt: skip
    try:
        args = ("--game", "leduc-holdem", "--trainer", trainer.address, "--data-dir", "none")
        with running_server(*args) as url, httpx.Client(base_url=url, timeout=30) as c:
            assert trainer.pushed.wait(60)
            health = wait_for(
                lambda: (h := c.get("/healthz").json())["weights_refused"] == 1
                and h["trainer_link"]["versions_refused"] >= 1 and h,
                timeout_s=30, what="the NaN version refused",
            )  # fmt: skip
            seats = {"0": "learned", "1": "rules"}
            gid = c.post("/v1/games", json={"game": "leduc-holdem", "seats": seats}).json()
            answers = [
                c.post(f"/v1/games/{gid['game_id']}/decide", json={"seat": "0", "state": state})
                for _ in range(20)
            ]
            metrics = c.get("/metrics").text
    finally:
        trainer.close()
    assert health["version"] == 1
    assert all(a.status_code == 200 and a.json()["action"] in ("raise", "fold") for a in answers)
    assert all(a.json()["version"] == 1 for a in answers)
    assert "croupier_weights_refused_total 1.0" in metrics
    # The link counts it as a refused version too (it did not, while install said "no" only).
    assert health["trainer_link"]["versions_refused"] == 1
    assert "croupier_trainer_link_versions_refused_total 1.0" in metrics


def test_the_plain_network_is_used_where_it_agrees_to_rounding_and_never_beyond(monkeypatch):
    """On a CPU whose kernels round the plain network's logits differently from the module's
    (last bits), it still serves; where they differ by more than float32 rounding, the
    module's own `_forward` serves (slower, never other logits)."""
    from croupier.policies.module import LOGITS_RTOL

    adapter = LeducAdapter()
    versions = PolicyVersions(adapter, seed=1)
    _, module = versions.resolve(None)
    plain = PolicyNetwork.__call__

    def off_by(relative: float):  # noqa: ANN202
        def call(self, obs, mask):  # noqa: ANN001, ANN202
            logits = plain(self, obs, mask)
            return logits + relative * np.abs(logits) + relative

        return call

    monkeypatch.setattr(PolicyNetwork, "__call__", off_by(LOGITS_RTOL / 10))
    assert PolicyNetwork.of(module) is not None
    monkeypatch.setattr(PolicyNetwork, "__call__", off_by(LOGITS_RTOL * 100))
    assert PolicyNetwork.of(module) is None
