"""The `croupier` command line: serve, engine, train."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    help="Serve, record and train RLlib policies behind a card game's decision API.",
    no_args_is_help=True,
    add_completion=False,
)


def _setup_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(name)s %(message)s")


@app.command()
def serve(
    game: Annotated[str, typer.Option(help="leduc-holdem, uno, vector or pkg.module:Adapter")] = (
        "leduc-holdem"
    ),
    host: str = "127.0.0.1",
    port: int = 8000,
    seats: Annotated[
        str, typer.Option(help="Seat mix for seats a game does not name, e.g. learned,rules")
    ] = "learned,rules",
    pin: Annotated[str, typer.Option(help="created | latest")] = "created",
    rules: Annotated[
        str | None, typer.Option(help="Your rules policy: pkg.module:function(state) -> action")
    ] = None,
    trainer: Annotated[str | None, typer.Option(help="Trainer link host:port")] = None,
    weights_dir: Annotated[Path | None, typer.Option(help="Where received versions go")] = None,
    keep_versions: int = 8,
    max_batch: int = 256,
    max_wait_ms: float = 0.0,
    obs_size: Annotated[int | None, typer.Option(help="vector game: observation size")] = None,
    num_actions: Annotated[int | None, typer.Option(help="vector game: action count")] = None,
    num_players: int = 2,
    link_token: Annotated[str | None, typer.Option(envvar="CROUPIER_LINK_TOKEN")] = None,
    rllib_compat: Annotated[
        bool, typer.Option(help="Talk to RLlib's stock EnvRunnerServerForExternalInference")
    ] = False,
    seed: int = 0,
    log_level: str = "warning",
) -> None:
    """Run the policy server (FastAPI + uvicorn)."""
    import uvicorn

    from croupier.api.app import create_app
    from croupier.config import ServerConfig
    from croupier.policies.seats import parse_seat_mix

    _setup_logging(log_level)
    config = ServerConfig(
        game=game,
        obs_size=obs_size,
        num_actions=num_actions,
        num_players=num_players,
        seat_mix=parse_seat_mix(seats),
        pin=pin,
        rules=rules,
        max_batch=max_batch,
        max_wait_ms=max_wait_ms,
        keep_versions=keep_versions,
        weights_dir=weights_dir,
        trainer=trainer,
        link_token=link_token,
        rllib_compat=rllib_compat,
        seed=seed,
    )
    uvicorn.run(
        create_app(config),
        host=host,
        port=port,
        loop="uvloop",
        http="httptools",
        log_level=log_level,
        access_log=False,
    )


@app.command()
def engine(
    url: str = "http://127.0.0.1:8000",
    game: str = "leduc-holdem",
    games: Annotated[int, typer.Option(help="Tables played concurrently")] = 128,
    seats: Annotated[
        str | None, typer.Option(help="Policies per seat, alternated each hand, e.g. learned,rules")
    ] = None,
    hands: Annotated[int | None, typer.Option(help="Stop after this many hands")] = None,
    seconds: Annotated[float | None, typer.Option(help="Stop after this many seconds")] = None,
    seed: int = 0,
    batch: Annotated[
        bool, typer.Option(help="Send decisions of many tables per request (/v1/decide:batch)")
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the summary as JSON")] = False,
) -> None:
    """Play RLCard games through a croupier server's HTTP API, as a studio engine would."""
    import uvloop

    from croupier.engine.runner import run_engine

    if hands is None and seconds is None:
        raise typer.BadParameter("give --hands or --seconds")
    seat_list = [s.strip() for s in seats.split(",")] if seats else None

    def progress(summary) -> None:  # noqa: ANN001
        if not json_out:
            typer.echo(
                f"  {summary.hands} hands, {summary.decisions_per_s:,.0f} decisions/s, "
                f"{summary.errors} errors",
                err=True,
            )

    summary = uvloop.run(
        run_engine(
            url, game, games, seat_list, hands, seconds, seed=seed, progress=progress, batch=batch
        )
    )
    if json_out:
        typer.echo(json.dumps(summary.to_dict(), indent=2))
    else:
        typer.echo(summary.format_table())
    if summary.errors:
        raise typer.Exit(1)


@app.command()
def train(
    game: str = "leduc-holdem",
    algo: Annotated[str, typer.Option(help="appo (V-trace, default) or ppo")] = "appo",
    listen: Annotated[str, typer.Option(help="host:port policy servers connect to")] = (
        "127.0.0.1:5555"
    ),
    checkpoint_dir: Annotated[Path, typer.Option(help="Checkpoints; resumes if present")] = Path(
        "runs/trainer"
    ),
    minutes: Annotated[float | None, typer.Option(help="Stop after this long")] = None,
    iterations: Annotated[int | None, typer.Option(help="Stop after this many")] = None,
    ray_address: Annotated[str | None, typer.Option(help="An existing Ray cluster")] = None,
    max_version_lag: Annotated[
        int | None, typer.Option(help="Drop episodes played this many versions back or more")
    ] = None,
    link_token: Annotated[str | None, typer.Option(envvar="CROUPIER_LINK_TOKEN")] = None,
    lr: float = 1e-3,
    train_batch_size: int = 1000,
    minibatch_size: int = 250,
    num_epochs: int = 4,
    entropy_coeff: float = 0.01,
    hiddens: Annotated[str, typer.Option(help="Hidden layer sizes")] = "128,128",
    checkpoint_every: int = 10,
    num_env_runners: int = 0,
    num_learners: int = 0,
    num_gpus_per_learner: float = 0,
    obs_size: Annotated[int | None, typer.Option(help="vector game: observation size")] = None,
    num_actions: Annotated[int | None, typer.Option(help="vector game: action count")] = None,
    log_level: str = "warning",
) -> None:
    """Train with RLlib on the episodes policy servers send; push each new version back."""
    from croupier.trainer.algo import Hyper
    from croupier.trainer.run import TrainOptions
    from croupier.trainer.run import train as run_training

    _setup_logging(log_level)
    options = TrainOptions(
        game=game,
        algo=algo,
        listen=listen,
        checkpoint_dir=checkpoint_dir,
        minutes=minutes,
        iterations=iterations,
        ray_address=ray_address,
        max_version_lag=max_version_lag,
        token=link_token,
        checkpoint_every=checkpoint_every,
        hiddens=[int(h) for h in hiddens.split(",")],
        hyper=Hyper(
            lr=lr,
            train_batch_size=train_batch_size,
            minibatch_size=minibatch_size,
            num_epochs=num_epochs,
            entropy_coeff=entropy_coeff,
        ),
        num_env_runners=num_env_runners,
        num_learners=num_learners,
        num_gpus_per_learner=num_gpus_per_learner,
        obs_size=obs_size,
        num_actions=num_actions,
    )
    last = run_training(options)
    typer.echo(json.dumps({"final": last}, default=str))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
