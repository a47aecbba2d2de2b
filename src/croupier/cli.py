"""The `croupier` command line: serve, engine, train."""

from __future__ import annotations

import json
import logging
import ssl
from pathlib import Path
from typing import Annotated, Any

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
    behaviour_lag: Annotated[
        int, typer.Option(help="Experiments: serve the version N places behind the newest")
    ] = 0,
    max_batch: int = 256,
    max_wait_ms: float = 0.0,
    forward_thread: Annotated[
        bool,
        typer.Option(
            help="Run batched forwards on a thread of their own (the default) or inline on the "
            "event loop (--no-forward-thread)"
        ),
    ] = True,
    forward_inline_from: Annotated[
        int,
        typer.Option(
            help="Batches at least this big run inline even with the forward thread: a queue "
            "that long means a saturated event loop, where the thread's round trip costs more"
        ),
    ] = 128,
    obs_size: Annotated[int | None, typer.Option(help="vector game: observation size")] = None,
    num_actions: Annotated[int | None, typer.Option(help="vector game: action count")] = None,
    num_players: int = 2,
    link_token: Annotated[str | None, typer.Option(envvar="CROUPIER_LINK_TOKEN")] = None,
    rllib_compat: Annotated[
        bool,
        typer.Option(
            help="Talk to RLlib's stock EnvRunnerServerForExternalInference (it sends a pickled "
            "config: trusted networks only, see docs/security.md)"
        ),
    ] = False,
    rllib_compat_allow_remote: Annotated[
        bool,
        typer.Option(
            help="Let --rllib-compat unpickle the config of a trainer that is not on loopback "
            "(whoever answers at --trainer can run code here)"
        ),
    ] = False,
    api_keys: Annotated[
        str | None,
        typer.Option(envvar="CROUPIER_API_KEYS", help="Comma-separated engine bearer keys"),
    ] = None,
    admin_keys: Annotated[
        str | None,
        typer.Option(envvar="CROUPIER_ADMIN_KEYS", help="Comma-separated admin bearer keys"),
    ] = None,
    read_keys: Annotated[
        str | None,
        typer.Option(
            envvar="CROUPIER_READ_KEYS",
            help="Comma-separated read-only keys: dashboard data and arena results only",
        ),
    ] = None,
    ssl_certfile: Annotated[
        Path | None, typer.Option(help="Serve HTTPS: the server's certificate chain (PEM)")
    ] = None,
    ssl_keyfile: Annotated[
        Path | None, typer.Option(help="Serve HTTPS: the certificate's private key (PEM)")
    ] = None,
    ssl_keyfile_password: Annotated[
        str | None,
        typer.Option(envvar="CROUPIER_SSL_KEYFILE_PASSWORD", help="The private key's password"),
    ] = None,
    ssl_ca_certs: Annotated[
        Path | None,
        typer.Option(help="With --ssl-certfile: CA bundle; clients must present a certificate"),
    ] = None,
    data_dir: Annotated[
        str,
        typer.Option(
            help="Episode spool (SQLite) and received weights; '{port}' is replaced by the "
            "port; 'none' keeps both in memory"
        ),
    ] = "croupier-data/{port}",
    spool_max_episodes: int = 50_000,
    spool_max_mb: float = 1024.0,
    decide_deadline_ms: Annotated[
        float, typer.Option(help="Learned decisions later than this get the fallback; 0: off")
    ] = 1000.0,
    fallback: Annotated[str, typer.Option(help="rules | random")] = "rules",
    max_body_kb: Annotated[float, typer.Option(help="Larger request bodies get 413")] = 4096.0,
    max_games: Annotated[int, typer.Option(help="Games in flight; more get 503")] = 100_000,
    max_games_per_key: Annotated[
        int, typer.Option(help="Games in flight per API key; more get 429 (0: no cap)")
    ] = 0,
    max_queued_decisions: Annotated[
        int, typer.Option(help="Decisions waiting for the model; more get 503")
    ] = 10_000,
    idle_game_timeout_s: Annotated[
        float, typer.Option(help="Abort games idle this long; 0: never")
    ] = 600.0,
    keep_alive_s: Annotated[
        float,
        typer.Option(
            help="Idle keep-alive connections are closed after this long (uvicorn's 5 s "
            "default races busy clients reusing a connection: resets)"
        ),
    ] = 75.0,
    arena_results: Annotated[
        Path | None, typer.Option(help="Arena results file (JSON lines) for the dashboard")
    ] = None,
    canary_share: Annotated[
        float, typer.Option(help="Share of new games whose `canary` seats get production")
    ] = 0.0,
    offline_dir: Annotated[
        Path | None, typer.Option(help="Where `record: rules` games' episodes are written")
    ] = None,
    opentelemetry: Annotated[
        bool, typer.Option(help="FastAPI's native OpenTelemetry (off: it costs ~7% per request)")
    ] = False,
    seed: int = 0,
    log_level: str = "warning",
) -> None:
    """Run the policy server (FastAPI + uvicorn)."""
    # Before the imports below (torch, RLlib: seconds): a half TLS setup fails at once.
    if (ssl_certfile is None) != (ssl_keyfile is None):
        raise typer.BadParameter("--ssl-certfile and --ssl-keyfile go together")
    if ssl_ca_certs is not None and ssl_certfile is None:
        raise typer.BadParameter("--ssl-ca-certs needs --ssl-certfile and --ssl-keyfile")
    import uvicorn

    from croupier.api.early import EarlyHealth

    _setup_logging(log_level)
    if fallback not in ("rules", "random"):
        raise typer.BadParameter("--fallback must be rules or random")
    # Bound before torch and RLlib load (seconds): /healthz answers 503 "starting" meanwhile.
    # (A TLS server's early socket only accepts: a plain-HTTP 503 would confuse TLS clients.)
    early = EarlyHealth(host, port, answer=ssl_certfile is None)

    from croupier.api.app import create_app
    from croupier.api.auth import parse_keys
    from croupier.api.exposure import exposure_warnings
    from croupier.config import ServerConfig
    from croupier.policies.seats import parse_seat_mix

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
        forward_thread=forward_thread,
        forward_inline_from=forward_inline_from,
        keep_versions=keep_versions,
        behaviour_lag=behaviour_lag,
        weights_dir=weights_dir,
        trainer=trainer,
        link_token=link_token,
        rllib_compat=rllib_compat,
        rllib_compat_allow_remote=rllib_compat_allow_remote,
        api_keys=parse_keys(api_keys),
        admin_keys=parse_keys(admin_keys),
        read_keys=parse_keys(read_keys),
        data_dir=None if data_dir.lower() == "none" else Path(data_dir.format(port=port)),
        outbox_max_episodes=spool_max_episodes,
        spool_max_bytes=int(spool_max_mb * 1024 * 1024),
        decide_deadline_ms=decide_deadline_ms or None,
        fallback=fallback,
        max_body_bytes=int(max_body_kb * 1024),
        max_games=max_games,
        max_games_per_key=max_games_per_key or None,
        max_queued_decisions=max_queued_decisions,
        idle_game_timeout_s=idle_game_timeout_s or None,
        arena_results=arena_results,
        canary_share=canary_share,
        offline_dir=offline_dir,
        opentelemetry=opentelemetry,
        seed=seed,
    )
    if config.trainer:
        from croupier.link.client import check_link_config

        try:  # a link that would trust a peer it cannot check: refused before serving
            check_link_config(config)
        except ValueError as e:
            raise typer.BadParameter(str(e)) from None
    for warning in exposure_warnings(host, config, tls=ssl_certfile is not None):
        logging.getLogger("croupier.serve").warning(warning)
    tls: dict[str, Any] = {}
    if ssl_certfile is not None:
        tls = {
            "ssl_certfile": str(ssl_certfile),
            "ssl_keyfile": str(ssl_keyfile),
            "ssl_keyfile_password": ssl_keyfile_password,
        }
        if ssl_ca_certs is not None:  # mutual TLS: a client without a certificate is refused
            tls |= {"ssl_ca_certs": str(ssl_ca_certs), "ssl_cert_reqs": ssl.CERT_REQUIRED}
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(config),
            host=host,
            port=port,
            loop="uvloop",
            http="httptools",
            log_level=log_level,
            access_log=False,
            timeout_keep_alive=int(keep_alive_s),
            **tls,
        )
    )
    server.run(sockets=[early.hand_over()])  # the app takes the bound socket over


@app.command()
def engine(
    url: Annotated[
        str, typer.Option(help="Server URL, or several comma separated (games routed by id)")
    ] = "http://127.0.0.1:8000",
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
    api_key: Annotated[str | None, typer.Option(envvar="CROUPIER_API_KEY")] = None,
    record: Annotated[
        str | None,
        typer.Option(help="Games' record field: true, false, or rules (offline episodes)"),
    ] = None,
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
            url,
            game,
            games,
            seat_list,
            hands,
            seconds,
            seed=seed,
            progress=progress,
            batch=batch,
            api_key=api_key,
            record={"true": True, "false": False}.get(record, record) if record else None,
        )
    )
    if json_out:
        typer.echo(json.dumps(summary.to_dict(), indent=2))
    else:
        typer.echo(summary.format_table())
    if summary.errors:
        raise typer.Exit(1)


def _duration_s(text: str, flag: str) -> float | None:
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
        int | None,
        typer.Option(help="Drop episodes played more than this many versions behind the newest"),
    ] = None,
    link_token: Annotated[str | None, typer.Option(envvar="CROUPIER_LINK_TOKEN")] = None,
    insecure: Annotated[
        bool,
        typer.Option(
            help="Listen on a non-loopback --listen without --link-token (anyone reaching the "
            "port can send episodes and take the weights; see docs/security.md)"
        ),
    ] = False,
    lr: Annotated[float | None, typer.Option(help="Default: ppo 5e-4, appo 1e-3")] = None,
    train_batch_size: Annotated[
        int | None, typer.Option(help="Default: ppo 4000, appo 128")
    ] = None,
    minibatch_size: Annotated[int | None, typer.Option(help="PPO; default 500")] = None,
    num_epochs: Annotated[int | None, typer.Option(help="PPO; default 4")] = None,
    max_sample_batches: Annotated[
        float | None,
        typer.Option(
            help="Most train batches of the newest steps one update takes (older surplus "
            "dropped); default: ppo 2, appo no cap; 0: no cap"
        ),
    ] = None,
    entropy_coeff: Annotated[float | None, typer.Option(help="Default 0.01")] = None,
    hiddens: Annotated[str, typer.Option(help="Hidden layer sizes")] = "128,128",
    checkpoint_every: int = 10,
    num_env_runners: int = 0,
    num_learners: int = 0,
    num_gpus_per_learner: float = 0,
    obs_size: Annotated[int | None, typer.Option(help="vector game: observation size")] = None,
    num_actions: Annotated[int | None, typer.Option(help="vector game: action count")] = None,
    metrics_port: Annotated[
        int | None, typer.Option(help="Serve Prometheus /metrics on this port")
    ] = None,
    metrics_host: Annotated[str, typer.Option(help="Address for --metrics-port")] = "127.0.0.1",
    init_weights: Annotated[
        Path | None, typer.Option(help="Start from a `croupier pretrain` output dir")
    ] = None,
    max_idle: Annotated[
        str,
        typer.Option(
            help="Without episodes this long (900, 15m, 2h) checkpoint and stop; "
            "0 or none: wait for games forever"
        ),
    ] = "none",
    idle_after: Annotated[
        float, typer.Option(help="Seconds without episodes before reporting idle")
    ] = 30.0,
    max_sample_lag: Annotated[
        int | None,
        typer.Option(
            help="Drop waiting episodes more versions behind than this when sampled "
            "(a backlog's staleness bound); default: ppo 32, appo none; -1: none"
        ),
    ] = None,
    stop_grace: Annotated[
        float, typer.Option(help="Seconds after SIGTERM/SIGINT to checkpoint and exit")
    ] = 60.0,
    log_level: str = "warning",
) -> None:
    """Train with RLlib on the episodes policy servers send; push each new version back."""
    from croupier.trainer.algo import Hyper
    from croupier.trainer.run import TrainOptions
    from croupier.trainer.run import train as run_training

    _setup_logging(log_level)
    from croupier.link.client import parse_address
    from croupier.trainer.env_runner import LinkOptions, check_listen

    try:  # an open trainer port on the network: refused before Ray starts
        check_listen(
            LinkOptions(host=parse_address(listen)[0], token=link_token, insecure=insecure)
        )
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    hyper = Hyper.defaults(algo)
    overrides = {
        "lr": lr,
        "train_batch_size": train_batch_size,
        "minibatch_size": minibatch_size,
        "num_epochs": num_epochs,
        "entropy_coeff": entropy_coeff,
    }
    for name, value in overrides.items():
        if value is not None:
            setattr(hyper, name, value)
    if max_sample_batches is not None:
        hyper.max_sample_batches = max_sample_batches or None
    if max_sample_lag is not None:
        hyper.max_sample_lag = max_sample_lag if max_sample_lag >= 0 else None
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
        insecure=insecure,
        checkpoint_every=checkpoint_every,
        hiddens=[int(h) for h in hiddens.split(",")],
        hyper=hyper,
        num_env_runners=num_env_runners,
        num_learners=num_learners,
        num_gpus_per_learner=num_gpus_per_learner,
        obs_size=obs_size,
        num_actions=num_actions,
        metrics_port=metrics_port,
        metrics_host=metrics_host,
        init_weights=init_weights,
        max_idle_s=_duration_s(max_idle, "--max-idle"),
        idle_after_s=idle_after,
        stop_grace_s=stop_grace,
    )
    last = run_training(options)
    typer.echo(json.dumps({"final": last}, default=str))


@app.command()
def score(
    url: str = "http://127.0.0.1:8000",
    game: str = "leduc-holdem",
    hands: Annotated[int, typer.Option(help="Hands per scored version")] = 2000,
    opponent: Annotated[str, typer.Option(help="The yardstick seat policy")] = "rules",
    every: Annotated[
        float | None, typer.Option(help="Seconds between checks for a new version; once if unset")
    ] = None,
    rounds: Annotated[int | None, typer.Option(help="Stop after this many results")] = None,
    api_key: Annotated[str | None, typer.Option(envvar="CROUPIER_API_KEY")] = None,
    admin_key: Annotated[str | None, typer.Option(envvar="CROUPIER_ADMIN_KEY")] = None,
) -> None:
    """Score the server's newest version against the rules; post it to the dashboard's curve."""
    import uvloop

    from croupier.dashboard.score import score_loop

    def report(result) -> None:  # noqa: ANN001
        typer.echo(result.model_dump_json())

    uvloop.run(score_loop(url, game, hands, every, rounds, opponent, api_key, admin_key, report))


@app.command()
def openapi(
    out: Annotated[Path | None, typer.Option(help="Write here instead of stdout")] = None,
) -> None:
    """Print (or write) the HTTP API's OpenAPI document."""
    from croupier.api.openapi_export import openapi_json

    text = openapi_json()
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.write_text(text)


@app.command("eval")
def eval_cmd(
    game: str = "leduc-holdem",
    a: Annotated[
        str, typer.Option("--a", help="rules, random, learned@latest, learned@N, production")
    ] = "learned@latest",
    b: Annotated[str, typer.Option("--b", help="The opponent (same names)")] = "rules",
    hands: Annotated[int, typer.Option(help="Hands per match (whole duplicate pairs)")] = 2000,
    url: Annotated[
        str | None, typer.Option(help="A live server; without it one is started here")
    ] = None,
    weights_dir: Annotated[
        Path | None, typer.Option(help="Versions for the server started here")
    ] = None,
    league: Annotated[
        bool, typer.Option("--league", help="Round robin: last versions, rules, random")
    ] = False,
    versions: Annotated[int, typer.Option(help="League: how many of the last versions")] = 4,
    out: Annotated[Path, typer.Option(help="League: where runs are saved")] = Path("runs"),
    tables: Annotated[int, typer.Option(help="Hands played concurrently")] = 16,
    batch: Annotated[
        bool, typer.Option(help="Send the tables' decisions together (/v1/decide:batch)")
    ] = False,
    seed: int = 0,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON")] = False,
    api_key: Annotated[str | None, typer.Option(envvar="CROUPIER_API_KEY")] = None,
) -> None:
    """Arena: A against B through a server's HTTP API (seats alternated, duplicate deals):
    payoff per hand for A with a 95% CI, win/draw/loss, hands/s. --league: rating table."""
    import contextlib
    import time

    import uvloop

    from croupier.arena.arena import ArenaError, local_server, play_arena
    from croupier.arena.league import format_table, league_players, play_league, save_league

    with contextlib.ExitStack() as stack:
        if url is None:
            url = stack.enter_context(local_server(game, weights_dir))

        async def run() -> dict:
            if league:
                players = await league_players(url, versions, api_key)
                result = await play_league(
                    url, game, players, hands, tables=tables, seed=seed, api_key=api_key,
                    batch=batch,
                )  # fmt: skip
                run_dir = out / f"league-{time.strftime('%Y%m%d-%H%M%S')}"
                result["saved"] = str(save_league(result, run_dir, weights_dir))
                return result
            arena = await play_arena(
                url, game, a, b, hands, tables=tables, seed=seed, api_key=api_key, batch=batch
            )
            return {"arena": arena}

        try:
            result = uvloop.run(run())
        except ArenaError as e:
            raise typer.BadParameter(str(e)) from None
    if league:
        if json_out:
            typer.echo(json.dumps(result, indent=2, default=float))
        else:
            typer.echo(format_table(result))
            typer.echo(f"saved: {result['saved']}")
        return
    arena = result["arena"]
    typer.echo(json.dumps(arena.to_dict(), indent=2) if json_out else arena.format())
    if arena.errors:
        raise typer.Exit(1)


@app.command()
def promote(
    url: Annotated[
        str,
        typer.Option(help="A server URL, or the whole fleet comma separated: every one is changed"),
    ] = "http://127.0.0.1:8000",
    game: str = "leduc-holdem",
    version: Annotated[int | None, typer.Option(help="Promote this version as is")] = None,
    auto: Annotated[
        bool, typer.Option("--auto", help="Newest vs production in the arena; promote if better")
    ] = False,
    rollback: Annotated[bool, typer.Option("--rollback", help="Back to the previous one")] = False,
    canary_share: Annotated[
        float | None,
        typer.Option(help="Set the share of new games whose canary seats get production"),
    ] = None,
    hands: Annotated[int, typer.Option(help="--auto: arena hands")] = 4000,
    tables: int = 16,
    seed: int = 0,
    log: Annotated[Path | None, typer.Option(help="Append each decision (JSON line) here")] = (
        None
    ),
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON")] = False,
    admin_key: Annotated[str | None, typer.Option(envvar="CROUPIER_ADMIN_KEY")] = None,
) -> None:
    """Move the production channel of one server or a fleet: --auto (with evidence), --version
    N, --rollback, or --canary-share S. Every server is checked before any is changed, each is
    reported; exit 1 unless all hold the target."""
    import uvloop

    from croupier.arena.fleet import change_fleet, format_report
    from croupier.routing import parse_urls

    actions = [auto, rollback, version is not None, canary_share is not None]
    if sum(actions) != 1:
        raise typer.BadParameter(
            "give exactly one of --auto, --version N, --rollback, --canary-share S"
        )
    if canary_share is not None and not 0.0 <= canary_share <= 1.0:
        raise typer.BadParameter("--canary-share must be between 0 and 1")
    try:
        urls = parse_urls(url)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    evidence = {"by": "croupier promote (manual)", "servers": urls}

    async def run() -> dict:
        if auto:
            from croupier.arena.promote import auto_promote  # the arena: RLCard tables

            return await auto_promote(
                urls[0], game, hands, admin_key=admin_key, tables=tables, seed=seed,
                log_path=log, fleet=urls,
            )  # fmt: skip
        if rollback:
            return await change_fleet(urls, "rollback", admin_key=admin_key, evidence=evidence)
        if canary_share is not None:
            return await change_fleet(
                urls, "canary", share=canary_share, admin_key=admin_key, evidence=evidence
            )
        return await change_fleet(
            urls, "promote", version=version, admin_key=admin_key, evidence=evidence
        )

    result = uvloop.run(run())
    if auto:
        typer.echo(json.dumps(result, indent=2, default=float))
        fleet = result.get("fleet")
        if fleet is not None and not fleet["ok"]:
            typer.echo(format_report(fleet), err=True)
            raise typer.Exit(1)
        return
    typer.echo(json.dumps(result, indent=2) if json_out else format_report(result))
    if not result["ok"]:
        raise typer.Exit(1)


@app.command()
def status(
    url: Annotated[
        str, typer.Option(help="A server URL, or the whole fleet comma separated")
    ] = "http://127.0.0.1:8000",
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON")] = False,
    api_key: Annotated[str | None, typer.Option(envvar="CROUPIER_API_KEY")] = None,
) -> None:
    """Each server's health, versions, production channel, trainer link and spool; exit 1
    unless every server answers ok (a fleet check for runbooks and cron)."""
    import uvloop

    from croupier.arena.fleet import fleet_status, format_status
    from croupier.routing import parse_urls

    try:
        urls = parse_urls(url)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    report = uvloop.run(fleet_status(urls, api_key))
    typer.echo(json.dumps(report, indent=2) if json_out else format_status(report))
    if not report["ok"]:
        raise typer.Exit(1)


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
        "appo"
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

    _setup_logging(log_level)
    spec = ModelSpec(algo=algo, hiddens=[int(h) for h in hiddens.split(",")])
    report = run(game, from_dir, out, spec, iterations=iterations, lr=lr, batch_size=batch_size)
    typer.echo(json.dumps(report, indent=2, default=float))


bench_app = typer.Typer(help="Benchmarks (results under bench/results/).", no_args_is_help=True)
app.add_typer(bench_app, name="bench")


@bench_app.command("serve")
def bench_serve(
    games: Annotated[str, typer.Option(help="Concurrent games, comma separated")] = "100,1000",
    seconds: Annotated[float, typer.Option(help="Measured seconds per scenario")] = 10.0,
    rounds: Annotated[int, typer.Option(help="Interleaved rounds; medians are reported")] = 3,
    out: Path = Path("bench/results"),
) -> None:
    """Decisions/s, latency and server CPU: no-model floor vs learned (un)batched vs batch API."""
    from croupier.bench.serve import Result, format_table
    from croupier.bench.serve import bench_serve as run

    report = run([int(g) for g in games.split(",")], seconds, out, rounds)
    typer.echo(f"medians over {rounds} rounds:")
    typer.echo(format_table([Result(**r) for r in report["results"]]))
    typer.echo(json.dumps(report["ratios"], indent=2))


@bench_app.command("train")
def bench_train(
    game: str = "leduc-holdem",
    algo: str = "ppo",
    minutes: float = 3.0,
    eval_hands: int = 10_000,
    out: Path = Path("bench/results"),
) -> None:
    """External path vs RLlib in-process (the anchor): env steps/s and payoff vs rules."""
    from croupier.bench.train import bench_train as run
    from croupier.bench.train import format_report

    typer.echo(format_report(run(game, algo, minutes, out, eval_hands)))


@bench_app.command("lag")
def bench_lag(
    game: str = "leduc-holdem",
    algos: str = "appo,ppo",
    lags: str = "0,2,8,32",
    minutes: float = 2.0,
    out: Path = Path("bench/results"),
) -> None:
    """Learning curves when the behaviour policy lags the learner by N versions."""
    from croupier.bench.lag import bench_lag as run

    run(game, algos.split(","), [int(x) for x in lags.split(",")], minutes, out)


@bench_app.command("soak")
def bench_soak(
    games: Annotated[int, typer.Option(help="Concurrent games")] = 1000,
    minutes: float = 10.0,
    url: Annotated[str | None, typer.Option(help="An existing server (default: start one)")] = None,
    out: Path = Path("bench/results"),
) -> None:
    """Many concurrent games for minutes: decisions, errors, p99 per minute, server RSS."""
    from croupier.bench.soak import bench_soak as run
    from croupier.bench.soak import format_report

    report = run(games, minutes, out, url)
    typer.echo(format_report(report))
    if report["errors"]:
        raise typer.Exit(1)


@bench_app.command("warmstart")
def bench_warmstart(
    game: str = "leduc-holdem",
    minutes: Annotated[float, typer.Option(help="Training minutes per run (cold, warm)")] = 2.0,
    from_dir: Annotated[
        Path | None, typer.Option("--from", help="Recorded rules episodes (else recorded now)")
    ] = None,
    record_hands: int = 4000,
    algo: str = "ppo",
    pretrain_iterations: int = 5,
    eval_hands: int = 4000,
    out: Path = Path("bench/results"),
) -> None:
    """Payoff vs rules over the first minutes of training, from scratch and from a BC warm
    start (record the rules, pretrain, train twice)."""
    from croupier.bench.warmstart import bench_warmstart as run
    from croupier.bench.warmstart import format_report

    typer.echo(
        format_report(
            run(game, minutes, out, from_dir, record_hands, algo, pretrain_iterations, eval_hands)
        )
    )


def main() -> None:
    app()


if __name__ == "__main__":
    main()
