"""`croupier export --format onnx`: the exported policy gives the server's masked logits."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from croupier.cli import app
from croupier.games.registry import load_adapter
from croupier.policies.learned import PolicyVersions
from croupier.policies.module import ModelSpec
from croupier.policies.onnx_export import ExportError, export_onnx

ort = pytest.importorskip("onnxruntime")


def _weights_dir(tmp_path, game: str, spec: ModelSpec, version: int = 3) -> PolicyVersions:
    """A server's weights dir holding `version` (weights moved off their initial values)."""
    versions = PolicyVersions(load_adapter(game), spec, weights_dir=tmp_path, seed=4)
    rng = np.random.default_rng(version)
    weights = {
        k: w + rng.normal(0, 0.3, w.shape).astype(w.dtype) for k, w in versions.weights().items()
    }
    assert versions.install(version, weights)
    return versions


@pytest.mark.parametrize(
    ("game", "spec"),
    [
        ("leduc-holdem", ModelSpec("ppo", [32, 32])),
        ("examples.kuhn.adapter:KuhnAdapter", ModelSpec("appo", [16], "tanh", True)),
    ],
)
def test_onnxruntime_gives_the_servers_logits(tmp_path, game, spec) -> None:
    versions = _weights_dir(tmp_path / "weights", game, spec)
    adapter = versions.adapter
    info = export_onnx(tmp_path / "weights", 3, adapter, tmp_path / "out")
    meta = json.loads((tmp_path / "out" / "policy.json").read_text())
    assert meta == info
    assert meta["obs_size"] == adapter.obs_size and meta["num_actions"] == adapter.num_actions
    assert meta["action_names"] == list(adapter.action_names)

    rng = np.random.default_rng(0)
    for rows in (1, 7, 64):
        obs = rng.standard_normal((rows, adapter.obs_size)).astype(np.float32)
        mask = (rng.random((rows, adapter.num_actions)) < 0.6).astype(np.float32)
        mask[np.arange(rows), rng.integers(0, adapter.num_actions, rows)] = 1.0
        session = ort.InferenceSession(str(tmp_path / "out" / "policy.onnx"))
        (got,) = session.run(["logits"], {"observations": obs, "action_mask": mask})
        _, module = versions.resolve(3)
        want = versions.act(module, obs, mask, explore=False)  # the server's forward
        legal = mask > 0
        np.testing.assert_allclose(got[legal], want.logits[legal], atol=1e-5, rtol=0)
        assert (got[~legal] < -1e38).all() and (want.logits[~legal] < -1e38).all()
        assert (got.argmax(axis=1) == want.actions).all()  # the greedy action agrees


def test_export_refuses_what_it_cannot_export(tmp_path) -> None:
    _weights_dir(tmp_path, "leduc-holdem", ModelSpec("ppo", [8]))
    adapter = load_adapter("leduc-holdem")
    with pytest.raises(ExportError, match="version 99 is not in"):
        export_onnx(tmp_path, 99, adapter, tmp_path / "out")
    meta = json.loads((tmp_path / "latest.json").read_text())
    meta["spec"]["algo"] = "dqn"
    (tmp_path / "latest.json").write_text(json.dumps(meta))
    with pytest.raises(ExportError, match="not one croupier trains"):
        export_onnx(tmp_path, 3, adapter, tmp_path / "out")
    # the command line says it in one line, exit 1
    result = CliRunner().invoke(
        app,
        ["export", "--version", "99", "--weights-dir", str(tmp_path), "--out", str(tmp_path)],
    )
    assert result.exit_code == 1
    assert "error:" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("game", ["doudizhu", "uno"])
def test_a_candidate_version_exports_and_gives_the_servers_logits(tmp_path, game) -> None:
    """A game of scored candidates (the path that wins doudizhu and UNO) exports: one state's
    features and its legal moves' in, one logit per move out, the server's."""
    from croupier.engine.rlcard_games import RLCardTable

    spec = ModelSpec.for_game(game, "ppo")
    versions = _weights_dir(tmp_path / "weights", game, spec)
    adapter = versions.adapter
    info = export_onnx(tmp_path / "weights", 3, adapter, tmp_path / "out")
    assert info["policy"] == "candidates"
    assert info["inputs"]["candidates"] == ["candidates", adapter.candidate_size]
    session = ort.InferenceSession(str(tmp_path / "out" / "policy.onnx"))
    _, module = versions.resolve(3)
    table = RLCardTable(game)
    table.reset(7)
    checked = 0
    while not table.is_over() and checked < 25:
        seat = table.current_player()
        state = table.state(seat)
        obs, cands = adapter.encode(state)
        (got,) = session.run(["logits"], {"observations": obs[None], "candidates": cands})
        want = versions.act_rows(module, [obs], [cands], explore=False)
        np.testing.assert_allclose(got, want.logits[0], atol=1e-5, rtol=1e-5)
        assert int(got.argmax()) == int(want.actions[0])  # the greedy move agrees
        table.step(adapter.action_value(int(want.actions[0]), state))
        checked += 1
    assert checked >= 5


@pytest.mark.parametrize(
    "game", ["examples.hearts.adapter:Hearts", "examples.president.adapter:President"]
)
def test_a_declared_fixed_head_exports_its_slots_names(tmp_path, game) -> None:
    """A declared card game's fixed head: `policy.json` names every slot, so an engine that
    runs the file (the C# and JavaScript of docs/your-game.md) can say the move it plays. A
    slot of one card names that move exactly (Hearts); a slot per rank and count (president)
    names the kind, the rank and how many cards, and holds only such moves."""
    from croupier.games.registry import load_simulator

    versions = _weights_dir(tmp_path / "weights", game, ModelSpec("ppo", [32]))
    adapter = versions.adapter
    info = export_onnx(tmp_path / "weights", 3, adapter, tmp_path / "out")
    names = json.loads((tmp_path / "out" / "policy.json").read_text())["action_names"]
    assert names == info["action_names"]
    assert len(names) == adapter.num_actions == len(set(names))
    session = ort.InferenceSession(str(tmp_path / "out" / "policy.onnx"))
    table = load_simulator(game)
    table.reset(3)
    checked = 0
    while not table.is_over() and checked < 40:
        state = table.state(table.current_player())
        obs, mask = adapter.encode(state)
        for slot in np.flatnonzero(mask):
            move, name = adapter.action_value(int(slot), state), names[slot]
            if "*" in name:  # "play 7*2": the kind, the main rank, the number of cards
                kind, _, rank_count = name.partition(" ")
                rank, _, count = rank_count.partition("*")
                head, *cards = move.split(" ")
                assert head == kind and {c[:-1] for c in cards} == {rank}, (name, move)
                assert not count or len(cards) == int(count), (name, move)
            else:
                assert move == name
        (logits,) = session.run(["logits"], {"observations": obs[None], "action_mask": mask[None]})
        table.step(adapter.action_value(int(logits[0].argmax()), state))  # the greedy move
        checked += 1
    assert checked >= 10
