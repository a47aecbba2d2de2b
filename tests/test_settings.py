"""Settings defined once (croupier/config.py): `croupier serve`'s flags parse into the same
`ServerConfig` the hand-written CLI built, every old flag name still works, and docs/settings.md
is the generated table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer

from croupier.cli import app, settings_markdown, train_options
from croupier.config import ServeProcess, ServerConfig, TrainSettings
from croupier.settings import build

ROOT = Path(__file__).resolve().parents[1]

# `croupier serve`'s flags before the settings model (docs, runbook and systemd units use them).
SERVE_FLAGS = [
    "--admin-keys",
    "--api-keys",
    "--arena-results",
    "--behaviour-lag",
    "--canary-share",
    "--data-dir",
    "--decide-deadline-ms",
    "--fallback",
    "--forward-inline-from",
    "--forward-thread",
    "--game",
    "--host",
    "--idle-game-timeout-s",
    "--keep-alive-s",
    "--keep-versions",
    "--link-token-file",
    "--log-level",
    "--max-batch",
    "--max-body-kb",
    "--max-games",
    "--max-games-per-key",
    "--max-queued-decisions",
    "--max-wait-ms",
    "--num-actions",
    "--num-players",
    "--obs-size",
    "--offline-dir",
    "--opentelemetry",
    "--pin",
    "--port",
    "--read-keys",
    "--rllib-compat",
    "--rllib-compat-allow-remote",
    "--rules",
    "--seats",
    "--seed",
    "--spool-max-episodes",
    "--spool-max-mb",
    "--ssl-ca-certs",
    "--ssl-certfile",
    "--ssl-keyfile",
    "--ssl-keyfile-password",
    "--trainer",
    "--weights-dir",
    "--no-forward-thread",
    "--no-rllib-compat",
    "--no-rllib-compat-allow-remote",
    "--no-opentelemetry",
]


def _serve() -> Any:
    return typer.main.get_command(app).commands["serve"]  # type: ignore[attr-defined]


def parse(*argv: str) -> tuple[ServeProcess, ServerConfig]:
    """What `croupier serve ARGV` builds, without serving."""
    ctx = _serve().make_context("serve", list(argv))
    return build(ServeProcess, ctx.params), build(ServerConfig, ctx.params)


def test_every_old_serve_flag_still_exists():
    flags = {d for p in _serve().params for d in (*p.opts, *p.secondary_opts)}
    assert set(SERVE_FLAGS) <= flags, set(SERVE_FLAGS) - flags


def test_the_flags_defaults_are_the_configs_defaults():
    """A flag whose default drifted from its field's would make `croupier serve` and a
    `ServerConfig()` differ: only the data dir does, on purpose (the CLI keeps a spool), and
    the hosts answered (the CLI knows it binds loopback; a config alone does not)."""
    from croupier.api.hosts import loopback_hosts

    process, config = parse()
    assert config == ServerConfig(
        data_dir=Path("croupier-data/8000"), allowed_hosts=loopback_hosts("127.0.0.1")
    )
    assert process == ServeProcess()


def test_flags_convert_to_the_configs_units_and_meanings():
    process, config = parse(
        "--port", "8123", "--data-dir", "/tmp/d-{port}", "--seats", "rules,random",
        "--spool-max-episodes", "7", "--spool-max-mb", "2", "--max-body-kb", "8",
        "--decide-deadline-ms", "0", "--max-games-per-key", "0", "--idle-game-timeout-s", "0",
        "--api-keys", "a, b,", "--admin-keys", "c", "--no-forward-thread", "--rllib-compat",
        "--keep-alive-s", "5", "--log-level", "info", "--event-loop", "asyncio",
    )  # fmt: skip
    assert process.port == 8123 and process.keep_alive_s == 5.0 and process.log_level == "info"
    assert process.event_loop == "asyncio" and parse()[0].event_loop == "uvloop"
    assert config.data_dir == Path("/tmp/d-8123")
    assert config.seat_mix == ["rules", "random"]
    assert config.outbox_max_episodes == 7
    assert config.spool_max_bytes == 2 * 1024 * 1024
    assert config.max_body_bytes == 8 * 1024
    assert config.decide_deadline_ms is None
    assert config.max_games_per_key is None
    assert config.idle_game_timeout_s is None
    assert config.api_keys == ["a", "b"] and config.admin_keys == ["c"] and config.read_keys == []
    assert config.forward_thread is False and config.rllib_compat is True
    _, config = parse("--data-dir", "none", "--max-games-per-key", "3")
    assert config.data_dir is None and config.max_games_per_key == 3


def test_keys_and_secrets_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("CROUPIER_API_KEYS", "e1,e2")
    monkeypatch.setenv("CROUPIER_READ_KEYS", "r")
    monkeypatch.setenv("CROUPIER_LINK_TOKEN_FILE", "/run/secrets/link")
    monkeypatch.setenv("CROUPIER_SSL_KEYFILE_PASSWORD", "pw")
    process, config = parse()
    assert config.api_keys == ["e1", "e2"] and config.read_keys == ["r"]
    # The link token's file is a setting; the token itself never is (link/secret.py).
    assert config.link_token_file == Path("/run/secrets/link")
    assert process.ssl_keyfile_password == "pw"


def test_a_bad_seat_mix_is_refused_by_the_parser():
    with pytest.raises(Exception, match="empty"):
        parse("--seats", ",")


def test_docs_settings_md_is_the_generated_table():
    """Regenerate with `croupier settings-doc --out docs/settings.md`."""
    assert (ROOT / "docs/settings.md").read_text() == settings_markdown()


TRAIN_FLAGS = [
    "--game",
    "--algo",
    "--listen",
    "--checkpoint-dir",
    "--minutes",
    "--iterations",
    "--ray-address",
    "--max-version-lag",
    "--link-token-file",
    "--insecure",
    "--no-insecure",
    "--lr",
    "--train-batch-size",
    "--minibatch-size",
    "--num-epochs",
    "--max-sample-batches",
    "--entropy-coeff",
    "--hiddens",
    "--checkpoint-every",
    "--num-env-runners",
    "--num-learners",
    "--num-gpus-per-learner",
    "--obs-size",
    "--num-actions",
    "--metrics-port",
    "--metrics-host",
    "--init-weights",
    "--max-idle",
    "--idle-after",
    "--max-sample-lag",
    "--stop-grace",
    "--log-level",
]


def _train() -> Any:
    return typer.main.get_command(app).commands["train"]  # type: ignore[attr-defined]


def train_parse(*argv: str) -> Any:
    """The `TrainOptions` `croupier train ARGV` would run, without training."""
    ctx = _train().make_context("train", list(argv))
    return train_options(build(TrainSettings, ctx.params))


def test_every_old_train_flag_still_exists():
    flags = {d for p in _train().params for d in (*p.opts, *p.secondary_opts)}
    assert set(TRAIN_FLAGS) <= flags, set(TRAIN_FLAGS) - flags


def test_train_defaults_are_the_trainers_own():
    """`croupier train` with no flags runs what `TrainOptions()` means (its hyperparameters
    `Hyper.defaults(algo)`): the settings model and the trainer's defaults cannot drift."""
    from croupier.games.presets import DEFAULT_ALGO
    from croupier.trainer.algo import Hyper
    from croupier.trainer.run import TrainOptions

    assert train_parse() == TrainOptions(hyper=Hyper.defaults(DEFAULT_ALGO))
    for algo in ("ppo", "appo"):
        assert train_parse("--algo", algo) == TrainOptions(algo=algo, hyper=Hyper.defaults(algo))


def test_train_flags_convert(monkeypatch):
    from croupier.link.secret import TokenSource

    monkeypatch.setenv("CROUPIER_LINK_TOKEN", "yt4BYaJVsPxAGplRqn0vPJZ_UH0FzJmM")
    options = train_parse(
        "--algo", "ppo", "--lr", "0.25", "--max-sample-batches", "0", "--max-sample-lag", "-1",
        "--max-idle", "15m", "--hiddens", "8,4", "--stop-grace", "5", "--update-sleep", "1.5",
    )  # fmt: skip
    # Where the token is, never the token: what the trainer's config and checkpoints carry.
    assert options.link_token == TokenSource(env="CROUPIER_LINK_TOKEN")
    assert "yt4BYaJV" not in repr(options) and options.hiddens == [8, 4]
    assert options.max_idle_s == 900.0 and options.stop_grace_s == 5.0
    assert options.update_sleep_s == 1.5
    assert options.hyper.lr == 0.25
    assert options.hyper.max_sample_batches is None and options.hyper.max_sample_lag is None
    assert train_parse("--max-sample-lag", "3").hyper.max_sample_lag == 3


def test_train_placement_flags_reach_rllibs_config():
    """--env-runner-resources / --learner-resources: JSON objects of custom Ray resources,
    handed to RLlib per env runner and per learner (what places them on nodes)."""
    from croupier.games.registry import load_adapter
    from croupier.policies.module import ModelSpec
    from croupier.trainer.algo import build_config
    from croupier.trainer.env_runner import LinkOptions

    options = train_parse(
        "--env-runner-resources", '{"croupier_runner": 1}',
        "--learner-resources", '{"big": 0.5}', "--num-gpus-per-learner", "0.5",
    )  # fmt: skip
    assert options.env_runner_resources == {"croupier_runner": 1.0}
    assert options.learner_resources == {"big": 0.5}
    config = build_config(
        load_adapter("leduc-holdem"), LinkOptions(), ModelSpec(algo="appo"),
        num_env_runners=2, num_learners=2, num_gpus_per_learner=options.num_gpus_per_learner,
        env_runner_resources=options.env_runner_resources,
        learner_resources=options.learner_resources,
    )  # fmt: skip
    assert config.custom_resources_per_env_runner == {"croupier_runner": 1.0}
    assert config.custom_resources_per_learner == {"big": 0.5}
    assert config.num_gpus_per_learner == 0.5 and config.num_learners == 2
    assert train_parse().env_runner_resources == {}
    for bad in ("{nope", "[1]", '{"CPU": 1}', '{"x": -1}', '{"x": "1"}'):
        with pytest.raises(typer.BadParameter):
            train_parse("--env-runner-resources", bad)


def test_train_starts_from_the_games_preset_and_flags_override_it():
    from croupier.games.presets import preset_for

    preset = preset_for("doudizhu")
    assert preset is not None
    options = train_parse("--game", "doudizhu")
    assert options.algo == preset.algo and options.hiddens == preset.hiddens
    assert options.score_hidden == preset.score_hidden
    hyper = options.hyper
    assert (hyper.lr, hyper.train_batch_size, hyper.minibatch_size) == (
        preset.lr, preset.train_batch_size, preset.minibatch_size)  # fmt: skip
    assert hyper.entropy_coeff == preset.entropy_coeff
    assert hyper.extra.get("lambda_") == preset.lambda_
    options = train_parse("--game", "doudizhu", "--lr", "0.5", "--hiddens", "8", "--gamma", "0.9",
                          "--score-hidden", "16")  # fmt: skip
    assert options.hyper.lr == 0.5 and options.hiddens == [8] and options.score_hidden == 16
    assert options.hyper.gamma == 0.9
    assert options.hyper.train_batch_size == preset.train_batch_size  # the rest stays
    # Another algorithm than the preset's: its own defaults (the preset was measured for one).
    appo = train_parse("--game", "doudizhu", "--algo", "appo")
    assert appo.algo == "appo" and appo.hyper.train_batch_size == 128


def test_a_server_alone_builds_its_games_preset_network_as_a_placeholder():
    """Before any trainer, a server of a game with a preset serves the preset's network (what
    its trainer will send, what `bench serve` should measure); still not the trainer's."""
    import torch

    from croupier.games.presets import preset_for
    from croupier.games.registry import load_adapter
    from croupier.policies.learned import PolicyVersions
    from croupier.policies.module import ModelSpec

    preset = preset_for("doudizhu")
    versions = PolicyVersions(load_adapter("doudizhu"))
    assert versions.spec == ModelSpec.for_game("doudizhu") and not versions.spec_known
    assert (versions.spec.hiddens, versions.spec.score_hidden) == (
        preset.hiddens, preset.score_hidden)  # fmt: skip
    net = versions.resolve(None)[1].net
    assert [m.out_features for m in net.state if isinstance(m, torch.nn.Linear)] == preset.hiddens
    assert net.state_in.out_features == preset.score_hidden
    leduc = PolicyVersions(load_adapter("leduc-holdem"))  # no preset: the defaults
    assert leduc.spec == ModelSpec() and not leduc.spec_known


def test_serve_refuses_an_event_loop_it_does_not_know_before_starting():
    from typer.testing import CliRunner

    from croupier.cli import app

    result = CliRunner().invoke(app, ["serve", "--event-loop", "tokio", "--port", "1"])
    assert result.exit_code == 2 and "uvloop or asyncio" in result.output


def test_bad_hidden_sizes_are_a_usage_error_not_a_traceback(capsys):
    from typer.testing import CliRunner

    from croupier.cli import app

    for args in (["train", "--game", "doudizhu", "--minutes", "0.01"],
                 ["bench", "strength", "--game", "doudizhu", "--minutes", "0.01"]):  # fmt: skip
        for bad in ("256,x", "256,0", ",", "-1"):
            result = CliRunner().invoke(app, [*args, "--hiddens", bad])
            assert result.exit_code == 2, (args, bad, result.output)
            assert "positive sizes separated by commas" in result.output
    assert train_parse("--hiddens", "64,32").hiddens == [64, 32]
    from experiments import inprocess  # the in-process trainer's own (argparse) flags

    for bad in ("256,x", "0"):
        with pytest.raises(SystemExit) as exit_:
            inprocess.main(["--hiddens", bad, "--out", "unused.json"])
        assert exit_.value.code == 2
    assert "positive sizes separated by commas" in capsys.readouterr().err


def test_the_anchors_entropy_bonus_starts_by_how_many_moves_a_decision_has():
    """Unset, the rules anchor's entropy bonus is 0.1 for a fixed head of a few named moves
    (leduc's four) and 0 for many moves, whatever the head: scored candidates (doudizhu: with it
    the landlord drifted below its clone and was held there) or a slot per card (Hearts:
    docs/training.md); a flag sets it for either."""
    assert train_parse("--game", "leduc-holdem").rules_anchor.entropy_boost == 0.1
    assert train_parse("--game", "doudizhu").rules_anchor.entropy_boost == 0.0
    slot_per_card = "examples.president.adapter:President"  # 53 slots, a fixed head
    assert train_parse("--game", slot_per_card).rules_anchor.entropy_boost == 0.0
    assert (
        train_parse("--game", "doudizhu", "--rules-entropy-boost", "0.1").rules_anchor.entropy_boost
        == 0.1
    )
    assert (
        train_parse(
            "--game", "leduc-holdem", "--rules-entropy-boost", "0"
        ).rules_anchor.entropy_boost
        == 0.0
    )


def test_the_clones_smoothing_starts_by_head():
    """Unset, the clone's label smoothing is 0.01 for a fixed head of a slot per card (spread
    over every legal card, 5% kept Hearts' sampled clone below its bot: docs/training.md) and
    0.05 for a few named moves or scored candidates; a flag sets it for either, and the
    in-process trainers resolve it as `croupier train` does."""
    from croupier.games.registry import load_adapter
    from croupier.trainer.rules_anchor import anchor_for

    slot_per_card = "examples.president.adapter:President"  # 53 slots, a fixed head
    assert train_parse("--game", slot_per_card).rules_anchor.smoothing == 0.01
    assert train_parse("--game", "leduc-holdem").rules_anchor.smoothing == 0.05
    assert train_parse("--game", "doudizhu").rules_anchor.smoothing == 0.05
    assert (
        train_parse(
            "--game", "examples.president.adapter:PresidentCandidates"
        ).rules_anchor.smoothing
        == 0.05
    )
    given = train_parse("--game", slot_per_card, "--clone-smoothing", "0.05")
    assert given.rules_anchor.smoothing == 0.05
    assert (
        train_parse("--game", "leduc-holdem", "--clone-smoothing", "0").rules_anchor.smoothing
        == 0.0
    )
    assert (
        anchor_for(load_adapter(slot_per_card)) == train_parse("--game", slot_per_card).rules_anchor
    )
    assert anchor_for(load_adapter(slot_per_card), smoothing=None).smoothing == 0.01


def test_ppo_passes_a_batch_start_by_head(tmp_path):
    """Without a preset, a scored-candidate game trains 2 epochs a batch (its update is most
    of the trainer's CPU), a fixed head 4; a preset's own count and a flag win over both."""
    from croupier.games.presets import TrainingPreset, save_preset
    from croupier.trainer.algo import CANDIDATE_EPOCHS, Hyper

    candidates = "examples.president.adapter:PresidentCandidates"  # no preset of its own
    assert Hyper.defaults("ppo").num_epochs > CANDIDATE_EPOCHS
    assert train_parse("--game", candidates).hyper.num_epochs == CANDIDATE_EPOCHS
    assert train_parse("--game", "examples.president.adapter:President").hyper.num_epochs == 4
    assert train_parse("--game", "leduc-holdem").hyper.num_epochs == 4
    assert train_parse("--game", "uno").hyper.num_epochs == 2  # its preset's
    assert train_parse("--game", candidates, "--num-epochs", "3").hyper.num_epochs == 3
    path = tmp_path / "preset.json"
    save_preset(TrainingPreset(algo="ppo", policy="candidates", num_epochs=5), path)
    assert train_parse("--game", candidates, "--preset", str(path)).hyper.num_epochs == 5
