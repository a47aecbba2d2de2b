"""Commands that train: `train` (its options from `TrainSettings`, the game's preset under
them), `tune` (Ray Tune over a preset) and `pretrain` (the rules' decisions recorded through a
server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from croupier.cli.common import app, setup_logging
from croupier.config import TrainSettings
from croupier.settings import build, command, layer_sizes


def duration_s(text: str, flag: str) -> float | None:
    """Seconds from "900", "15m", "2h" or "30s"; None for "0", "none" or "forever"."""
    value = text.strip().lower()
    if value in ("", "0", "none", "forever"):
        return None
    scale = {"s": 1, "m": 60, "h": 3600}.get(value[-1], 0)
    try:
        seconds = float(value[:-1] if scale else value) * (scale or 1)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a duration", param_hint=flag) from None
    if seconds < 0:
        raise typer.BadParameter("must not be negative", param_hint=flag)
    return seconds or None


def _resources(text: str | None, flag: str) -> dict[str, float]:
    """A JSON object of Ray custom resources: {"name": amount}."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not JSON", param_hint=flag) from None
    ok = isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, int | float) and v >= 0 for k, v in value.items()
    )
    if not ok or {"CPU", "GPU"} & set(value):
        raise typer.BadParameter(
            'a JSON object of custom resources, e.g. {"croupier_runner": 1} (CPU and GPU have '
            "flags of their own)",
            param_hint=flag,
        )
    return {k: float(v) for k, v in value.items()}


def preset_file(path: Path | None, game: str, flag: str = "--preset") -> Any:
    """The `TrainingPreset` in `path` (None: none given); a bad file is a usage error."""
    from croupier.games.presets import PresetError, load_preset

    if path is None:
        return None
    try:
        return load_preset(path, game)
    except PresetError as e:
        raise typer.BadParameter(str(e), param_hint=flag) from None


def train_options(s: TrainSettings) -> Any:
    """The trainer's `TrainOptions` (and `Hyper`) from `croupier train`'s settings."""
    from croupier.games.registry import load_adapter
    from croupier.link.secret import TokenSource
    from croupier.trainer.algo import training_defaults
    from croupier.trainer.rules_anchor import anchor_for
    from croupier.trainer.run import TrainOptions

    names = ("lr", "train_batch_size", "minibatch_size", "num_epochs", "entropy_coeff", "gamma",
             "kl_target", "distill_coeff")  # fmt: skip
    given = {name: getattr(s, name) for name in names if getattr(s, name) is not None}
    if s.hiddens:
        given["hiddens"] = layer_sizes(s.hiddens)
    if s.score_hidden:
        given["score_hidden"] = s.score_hidden
    # The preset file's, else the game's preset, if it has one; a flag given overrides it.
    spec, hyper = training_defaults(s.game, s.algo, given, preset_file(s.preset, s.game))
    if s.max_sample_batches is not None:
        hyper.max_sample_batches = s.max_sample_batches or None
    if s.max_sample_lag is not None:
        hyper.max_sample_lag = s.max_sample_lag if s.max_sample_lag >= 0 else None
    if s.fresh_lag is not None:
        hyper.fresh_lag = s.fresh_lag if s.fresh_lag >= 0 else None
    return TrainOptions(
        game=s.game,
        algo=spec.algo,
        listen=s.listen,
        checkpoint_dir=s.checkpoint_dir,
        minutes=s.minutes,
        iterations=s.iterations,
        ray_address=s.ray_address,
        max_version_lag=s.max_version_lag,
        link_token=TokenSource.find(s.link_token_file),
        insecure=s.insecure,
        checkpoint_every=s.checkpoint_every,
        hiddens=spec.hiddens,
        score_hidden=spec.score_hidden,
        hyper=hyper,
        num_env_runners=s.num_env_runners,
        num_learners=s.num_learners,
        num_gpus_per_learner=s.num_gpus_per_learner,
        env_runner_resources=_resources(s.env_runner_resources, "--env-runner-resources"),
        learner_resources=_resources(s.learner_resources, "--learner-resources"),
        obs_size=s.obs_size,
        num_actions=s.num_actions,
        metrics_port=s.metrics_port,
        metrics_host=s.metrics_host,
        init_weights=s.init_weights,
        rules_anchor=anchor_for(
            load_adapter(s.game),
            enabled=s.rules_anchor,
            clone_decisions=s.clone_decisions,
            clone_max_decisions=max(s.clone_max_decisions, s.clone_decisions),
            smoothing=s.clone_smoothing,
            clone_value=s.clone_value,
            kl_coeff=s.rules_kl,
            entropy_boost=s.rules_entropy_boost,
            half_life=s.rules_anchor_half_life,
            release=s.rules_anchor_release,
            pull_back=s.rules_anchor_pull_back,
            max_pull=s.rules_anchor_max_pull,
        ),
        max_idle_s=duration_s(s.max_idle, "--max-idle"),
        idle_after_s=s.idle_after,
        stop_grace_s=s.stop_grace,
        update_sleep_s=s.update_sleep,
    )


@app.command()
@command(TrainSettings)
def train(values: dict[str, Any]) -> None:
    """Train with RLlib on the episodes policy servers send; push each new version back."""
    from croupier.link.secret import TokenSource

    s: TrainSettings = build(TrainSettings, values)
    setup_logging(s.log_level)
    # An empty, short or unreadable token, or an open trainer port on the network: refused
    # before Ray (or RLlib's import) starts. Only where the token is goes on (link/secret.py).
    source = TokenSource.find(s.link_token_file)
    try:
        source.read()
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    from croupier.link.client import parse_address
    from croupier.link.server import check_listen
    from croupier.trainer.checkpoints import StartRefused
    from croupier.trainer.run import train as run_training
    from croupier.trainer.runners import EnvRunnerLost

    try:
        check_listen(parse_address(s.listen)[0], source.given, s.insecure)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    try:
        options = train_options(s)
    except ValueError as e:  # a setting out of its range (--kl-target ...)
        raise typer.BadParameter(str(e)) from None
    try:
        last = run_training(options)
    except (EnvRunnerLost, StartRefused) as e:  # said in one line, not a traceback
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
    typer.echo(json.dumps({"final": last}, default=str))


@app.command("tune")
def tune_cmd(
    game: Annotated[str, typer.Option(help="Any game with a simulator (see eval)")] = (
        "leduc-holdem"
    ),
    minutes: Annotated[
        float, typer.Option(min=0.01, help="The whole search's wall-clock budget")
    ] = 10.0,
    scheduler: Annotated[str, typer.Option(help="asha or pbt (population-based training)")] = (
        "asha"
    ),
    trials: Annotated[
        int, typer.Option(min=1, help="Configurations tried (asha) or the population (pbt)")
    ] = 8,
    trial_minutes: Annotated[
        float,
        typer.Option(
            min=0.01, help="Training minutes a trial runs at most (the horizon tuned for)"
        ),
    ] = 2.0,
    eval_every: Annotated[
        float, typer.Option(min=1.0, help="Training seconds between a trial's evaluations")
    ] = 20.0,
    eval_hands: Annotated[int, typer.Option(min=2, help="Duplicate hands per evaluation")] = 2000,
    final_hands: Annotated[
        int, typer.Option(min=2, help="A trial's last evaluation, and the comparison's")
    ] = 4000,
    address: Annotated[
        str | None, typer.Option(help="A Ray cluster (ray start): one trial per CPU it has")
    ] = None,
    cpus: Annotated[int, typer.Option(min=1, help="CPUs of the local Ray (no --address)")] = 2,
    rules_anchor: Annotated[
        bool, typer.Option(help="Trials start from the rules' clone, as `croupier train` does")
    ] = True,
    clone_decisions: Annotated[
        int | None, typer.Option(min=1, help="Rules decisions the clone is fitted to")
    ] = None,
    space: Annotated[
        str | None,
        typer.Option(
            help='JSON: choices for some searched fields, e.g. {"hiddens": ["64,64"], '
            '"train_batch_size": [500, 1000]} (fields: lr, train_batch_size, minibatches, '
            "num_epochs, entropy_coeff, hiddens, score_hidden)"
        ),
    ] = None,
    compare: Annotated[
        bool,
        typer.Option(
            help="Then train the current and the tuned preset side by side and score both"
        ),
    ] = False,
    compare_minutes: Annotated[
        float | None, typer.Option(min=0.01, help="The comparison's training minutes")
    ] = None,
    start: Annotated[
        Path | None,
        typer.Option(help="Start from this preset file instead of the game's current preset"),
    ] = None,
    compare_only: Annotated[
        Path | None,
        typer.Option(help="No search: compare this preset file with the current preset"),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="The preset file written (default runs/tune/GAME.json)")
    ] = None,
    results: Annotated[Path, typer.Option(help="Where the report goes")] = Path("bench/results"),
    seed: int = 1,
) -> None:
    """Find a game's training preset with Ray Tune (ASHA or PBT) over its simulator; write it
    as JSON for `croupier train --preset` and `bench strength --preset`."""
    from croupier.bench.tune import (
        SCHEDULERS,
        TuneRun,
        current_preset,
        format_report,
        search_space,
        tune_game,
    )
    from croupier.games.registry import load_simulator

    if scheduler not in SCHEDULERS:
        raise typer.BadParameter(f"one of {list(SCHEDULERS)}", param_hint="--scheduler")
    try:
        load_simulator(game)
    except (ValueError, TypeError, ImportError, AttributeError) as e:
        raise typer.BadParameter(str(e), param_hint="--game") from None
    tuned = preset_file(compare_only, game, "--compare-only")
    base = preset_file(start, game, "--start")
    try:
        choices = json.loads(space) if space else {}
        search_space(base or current_preset(game), scheduler, choices)  # before Ray starts
    except (ValueError, TypeError, AttributeError) as e:
        raise typer.BadParameter(str(e), param_hint="--space") from None
    anchor: dict[str, Any] = {"enabled": rules_anchor}
    if clone_decisions is not None:
        anchor["clone_decisions"] = clone_decisions
    run = TuneRun(game=game, minutes=minutes, scheduler=scheduler, trials=trials,
                  trial_minutes=trial_minutes, eval_every_s=eval_every, eval_hands=eval_hands,
                  final_hands=final_hands, address=address, cpus=cpus, seed=seed,
                  rules_anchor=anchor, space=choices, start=base,
                  compare=compare or tuned is not None,
                  compare_minutes=compare_minutes)  # fmt: skip
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in game)
    preset_out = out or Path("runs/tune") / f"{safe}.json"
    typer.echo(format_report(tune_game(run, preset_out, results, tuned=tuned)))


@app.command()
def pretrain(
    from_dir: Annotated[
        Path, typer.Option("--from", help="Offline episodes written by `record: rules` games")
    ],
    out: Annotated[Path, typer.Option(help="Weights dir for the server / --init-weights")] = Path(
        "runs/pretrain"
    ),
    game: str = "leduc-holdem",
    algo: Annotated[str, typer.Option(help="The module the trainer will continue: ppo|appo")] = (
        "ppo"
    ),
    hiddens: str = "128,128",
    iterations: Annotated[int, typer.Option(help="BC training steps")] = 10,
    lr: float = 1e-3,
    batch_size: int = 512,
    log_level: str = "warning",
) -> None:
    """Behaviour-clone the rules (RLlib BC, offline API) into version 1 of a weights dir."""
    from croupier.policies.module import ModelSpec
    from croupier.trainer.pretrain import pretrain as run

    setup_logging(log_level)
    spec = ModelSpec(algo=algo, hiddens=layer_sizes(hiddens))
    report = run(game, from_dir, out, spec, iterations=iterations, lr=lr, batch_size=batch_size)
    typer.echo(json.dumps(report, indent=2, default=float))
