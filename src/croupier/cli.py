"""The `croupier` command line: one function per command, each only parsing and wiring.

Over 400 lines because it lists every command (serve, engine, train, eval, promote, status,
score, pretrain, tiers, tune, openapi, settings-doc); `serve` and `train` take their options
from the settings models in config.py, the others' few options stay beside their code. The
`bench` commands are `croupier.bench.cli`."""

from __future__ import annotations

import json
import logging
import os
import ssl
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.rich_utils

from croupier.bench.cli import bench_app
from croupier.config import ServeProcess, ServerConfig, TrainSettings
from croupier.settings import build, command, layer_sizes, markdown_table

# Help sent to a pipe or a file (not a terminal) is laid out by rich at 80 columns, where the
# longest option names (`--rules-anchor-release --no-rules-anchor-release`) take half of it and
# each description wraps to a word or two a line; at 120 they read. COLUMNS or TERMINAL_WIDTH,
# when set, still decide.
if typer.rich_utils.MAX_WIDTH is None and "COLUMNS" not in os.environ and not sys.stdout.isatty():
    typer.rich_utils.MAX_WIDTH = 120

app = typer.Typer(
    help="Serve, record and train RLlib policies behind a card game's decision API.",
    no_args_is_help=True,
    add_completion=False,
)


def _echo_or_write(text: str, out: Path | None) -> None:
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.write_text(text)


def _setup_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(name)s %(message)s")


@app.command()
@command(ServeProcess, ServerConfig)
def serve(values: dict[str, Any]) -> None:
    """Run the policy server (FastAPI + uvicorn)."""
    process: ServeProcess = build(ServeProcess, values)
    # Before the imports below (torch, RLlib: seconds): a half TLS setup fails at once.
    if (process.ssl_certfile is None) != (process.ssl_keyfile is None):
        raise typer.BadParameter("--ssl-certfile and --ssl-keyfile go together")
    if process.ssl_ca_certs is not None and process.ssl_certfile is None:
        raise typer.BadParameter("--ssl-ca-certs needs --ssl-certfile and --ssl-keyfile")
    if process.event_loop not in ("uvloop", "asyncio"):
        raise typer.BadParameter("--event-loop is uvloop or asyncio")
    import uvicorn

    from croupier.api.early import EarlyHealth

    if process.profile_stages is not None:
        from croupier import stages

        stages.enable(process.profile_stages)

    _setup_logging(process.log_level)
    if values["fallback"] not in ("rules", "random"):
        raise typer.BadParameter("--fallback must be rules or random")
    if values["trainer"]:
        from croupier.link.secret import TokenSource

        try:  # an empty, short or unreadable link token: refused before the port is bound
            TokenSource.find(values["link_token_file"]).read()
        except ValueError as e:
            raise typer.BadParameter(str(e)) from None
    # Bound before torch and RLlib load (seconds): /healthz answers 503 "starting" meanwhile.
    # (A TLS server's early socket only accepts: a plain-HTTP 503 would confuse TLS clients.)
    early = EarlyHealth(process.host, process.port, answer=process.ssl_certfile is None)

    from croupier.api.app import create_app
    from croupier.api.exposure import exposure_warnings
    from croupier.policies.rollout import LeagueSampling

    try:  # a bad setting (--seats tier:9, a league sampling): one line and exit 2, no traceback
        config: ServerConfig = build(ServerConfig, values)
        LeagueSampling(
            config.league_sampling, config.league_rules_share, config.league_best_response_share
        )
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    if config.trainer:
        from croupier.link.client import check_link_config

        try:  # a link that would trust a peer it cannot check: refused before serving
            check_link_config(config)
        except ValueError as e:
            raise typer.BadParameter(str(e)) from None
    tls_on = process.ssl_certfile is not None
    for warning in exposure_warnings(process.host, config, tls=tls_on):
        logging.getLogger("croupier.serve").warning(warning)
    tls: dict[str, Any] = {}
    if tls_on:
        tls = {
            "ssl_certfile": str(process.ssl_certfile),
            "ssl_keyfile": str(process.ssl_keyfile),
            "ssl_keyfile_password": process.ssl_keyfile_password,
        }
        if (
            process.ssl_ca_certs is not None
        ):  # mutual TLS: a client without a certificate is refused
            tls |= {"ssl_ca_certs": str(process.ssl_ca_certs), "ssl_cert_reqs": ssl.CERT_REQUIRED}
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(config),
            host=process.host,
            port=process.port,
            loop=process.event_loop,
            http="httptools",
            log_level=process.log_level,
            access_log=False,
            timeout_keep_alive=int(process.keep_alive_s),
            **tls,
        )
    )
    server.run(sockets=[early.hand_over()])  # the app takes the bound socket over


def settings_markdown() -> str:
    """docs/settings.md: every setting of the commands defined by a settings model."""
    return (
        "# Settings\n\n"
        "<!-- Generated by `croupier settings-doc --out docs/settings.md` from\n"
        "     croupier/config.py;\n"
        "     tests/test_settings.py fails when this file and the models differ. -->\n\n"
        "## `croupier serve`\n\n"
        "The process: where it listens, TLS, logging (`ServeProcess`).\n\n"
        + markdown_table(ServeProcess)
        + "\nThe server (`ServerConfig`, which tests and `create_app` take directly).\n\n"
        + markdown_table(ServerConfig)
        + "\n## `croupier train`\n\n"
        + markdown_table(TrainSettings)
    )


@app.command("settings-doc")
def settings_doc(
    out: Annotated[Path | None, typer.Option(help="Write here instead of stdout")] = None,
) -> None:
    """Print (or write) the settings tables of docs/settings.md, generated from the models."""
    _echo_or_write(settings_markdown(), out)


@app.command()
def engine(
    url: Annotated[
        str, typer.Option(help="Server URL, or several comma separated (games routed by id)")
    ] = "http://127.0.0.1:8000",
    game: str = "leduc-holdem",
    games: Annotated[int, typer.Option(help="Tables played concurrently")] = 128,
    seats: Annotated[
        str | None,
        typer.Option(
            help="Policies per seat, rotated each hand, e.g. learned,rules (doudizhu: three, "
            "each deal replayed once per rotation)"
        ),
    ] = None,
    sides: Annotated[
        str | None,
        typer.Option(
            help="doudizhu, instead of --seats: a policy per side, seated after the deal, "
            "e.g. landlord=learned,peasant=rules"
        ),
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
    """Play a game's simulator (the RLCard games, or --game package.module:Simulator) through
    a croupier server's HTTP API, as a studio engine would."""
    import uvloop

    from croupier.engine.rlcard_games import UnknownGame
    from croupier.engine.runner import run_engine

    if hands is None and seconds is None:
        raise typer.BadParameter("give --hands or --seconds")
    seat_list = [s.strip() for s in seats.split(",")] if seats else None
    side_map = None
    if sides:
        try:
            side_map = dict(p.split("=", 1) for p in (x.strip() for x in sides.split(",")))
        except ValueError:
            raise typer.BadParameter("expected side=policy,...", param_hint="--sides") from None

    def progress(summary) -> None:  # noqa: ANN001
        if not json_out:
            typer.echo(
                f"  {summary.hands} hands, {summary.decisions_per_s:,.0f} decisions/s, "
                f"{summary.errors} errors",
                err=True,
            )

    try:
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
                sides=side_map,
            )
        )
    except UnknownGame as e:  # one line, as a usage error: no traceback
        typer.echo(f"Error: --game: {e}", err=True)
        raise typer.Exit(2) from None
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
    from croupier.link.secret import TokenSource
    from croupier.trainer.algo import training_defaults
    from croupier.trainer.rules_anchor import RulesAnchor
    from croupier.trainer.run import TrainOptions

    names = ("lr", "train_batch_size", "minibatch_size", "num_epochs", "entropy_coeff", "gamma",
             "kl_target")  # fmt: skip
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
        rules_anchor=RulesAnchor(
            enabled=s.rules_anchor,
            clone_decisions=s.clone_decisions,
            smoothing=s.clone_smoothing,
            clone_value=s.clone_value,
            kl_coeff=s.rules_kl,
            entropy_boost=s.rules_entropy_boost,
            half_life=s.rules_anchor_half_life,
            release=s.rules_anchor_release,
            pull_back=s.rules_anchor_pull_back,
            max_pull=s.rules_anchor_max_pull,
        ),
        max_idle_s=_duration_s(s.max_idle, "--max-idle"),
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
    _setup_logging(s.log_level)
    # An empty, short or unreadable token, or an open trainer port on the network: refused
    # before Ray (or RLlib's import) starts. Only where the token is goes on (link/secret.py).
    source = TokenSource.find(s.link_token_file)
    try:
        source.read()
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    from croupier.link.client import parse_address
    from croupier.link.server import check_listen
    from croupier.trainer.run import train as run_training

    try:
        check_listen(parse_address(s.listen)[0], source.given, s.insecure)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    try:
        options = train_options(s)
    except ValueError as e:  # a setting out of its range (--kl-target ...)
        raise typer.BadParameter(str(e)) from None
    last = run_training(options)
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
def score(
    url: str = "http://127.0.0.1:8000",
    game: Annotated[str, typer.Option(help="Any game with a simulator (see eval)")] = (
        "leduc-holdem"
    ),
    hands: Annotated[int, typer.Option(help="Hands per scored version")] = 2000,
    opponent: Annotated[str, typer.Option(help="The yardstick seat policy")] = "rules",
    every: Annotated[
        float | None, typer.Option(help="Seconds between checks for a new version; once if unset")
    ] = None,
    rounds: Annotated[int | None, typer.Option(help="Stop after this many results")] = None,
    api_key: Annotated[str | None, typer.Option(envvar="CROUPIER_API_KEY")] = None,
    admin_key: Annotated[str | None, typer.Option(envvar="CROUPIER_ADMIN_KEY")] = None,
) -> None:
    """Score the server's newest version against the rules; post it to the dashboard's curve
    (a keyed server: --admin-key alone does both, it opens the engine routes too)."""
    import uvloop

    from croupier.arena.arena import ArenaError
    from croupier.client import CroupierError
    from croupier.dashboard.score import score_loop

    def report(result) -> None:  # noqa: ANN001
        typer.echo(result.model_dump_json())

    try:
        uvloop.run(
            score_loop(url, game, hands, every, rounds, opponent, api_key, admin_key, report)
        )
    except (ArenaError, CroupierError, ValueError, OSError) as e:  # a message, not a traceback
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None


@app.command()
def openapi(
    game: Annotated[
        str, typer.Option(help="The game whose document (a server serves one game)")
    ] = "leduc-holdem",
    obs_size: Annotated[int | None, typer.Option(help="vector game: observation size")] = None,
    num_actions: Annotated[int | None, typer.Option(help="vector game: action count")] = None,
    out: Annotated[Path | None, typer.Option(help="Write here instead of stdout")] = None,
    published: Annotated[
        bool, typer.Option(help="Write every built-in game's document to docs/openapi/")
    ] = False,
) -> None:
    """Print (or write) the HTTP API's OpenAPI document for a game (its state, action and
    payoff types are the game's); `--published` rewrites docs/openapi/<game>.json."""
    from croupier.api.openapi_export import PUBLISHED, openapi_json, published_path

    if published:
        for name in PUBLISHED:
            published_path(Path.cwd(), name).write_text(openapi_json(name))
        return
    sizes = {"obs_size": obs_size, "num_actions": num_actions}
    _echo_or_write(openapi_json(game, **{k: v for k, v in sizes.items() if v is not None}), out)


@app.command("eval")
def eval_cmd(
    game: Annotated[
        str,
        typer.Option(
            help="A built-in game, package.module:Simulator, or package.module:Adapter whose "
            "adapter names its simulator"
        ),
    ] = "leduc-holdem",
    a: Annotated[
        str,
        typer.Option(
            "--a",
            help="rules, random, learned@latest, frozen@N, production (a model's name may end "
            "in :greedy)",
        ),
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
    greedy: Annotated[
        bool,
        typer.Option(
            help="When A is a model, play it greedy too (its most likely action; same deals) "
            "and report both"
        ),
    ] = True,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON")] = False,
    api_key: Annotated[str | None, typer.Option(envvar="CROUPIER_API_KEY")] = None,
    side: Annotated[
        str | None,
        typer.Option(
            help="A on this side alone, B there on the same deals and everywhere else (a "
            "version that learned one side: doudizhu's landlord)"
        ),
    ] = None,
    exploitability: Annotated[
        bool,
        typer.Option(
            "--exploitability",
            help="Instead of playing: A measured exactly on the game's whole tree (kuhn, "
            "leduc): exploitability, payoff vs an equilibrium and the rules, folds when "
            "checking is free. A: also equilibrium, table:PATH, package.module:function; a "
            "version is read from --weights-dir",
        ),
    ] = False,
) -> None:
    """Arena: A against B through a server's HTTP API (seats alternated, duplicate deals):
    the strength score of A (its payoff per hand less the deal's par: half of A - B in the
    same seats; docs/rollout.md) with a 95% CI, win/draw/loss, hands/s; for a model A, sampled
    and greedy. Any game with a simulator. --league: rating table. --exploitability: exact
    robustness of A instead (docs/robustness.md)."""
    if exploitability:
        _eval_exploitability(game, a, weights_dir, greedy, json_out)
        return
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
                url, game, a, b, hands, tables=tables, seed=seed, api_key=api_key, batch=batch,
                side=side,
            )  # fmt: skip
            matches = {"arena": arena}
            if greedy and a.strip() not in ("rules", "random") and ":" not in a:
                matches["greedy"] = await play_arena(
                    url, game, f"{a.strip()}:greedy", b, hands, tables=tables, seed=seed,
                    api_key=api_key, batch=batch, side=side,
                )  # fmt: skip
            return matches

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
    arena, greedy_arena = result["arena"], result.get("greedy")
    if json_out:
        report = arena.to_dict()
        if greedy_arena is not None:
            report["greedy"] = greedy_arena.to_dict()
        typer.echo(json.dumps(report, indent=2))
    else:
        typer.echo(arena.format())
        if greedy_arena is not None:
            typer.echo("greedy (the version's most likely action, the same deals):")
            typer.echo(greedy_arena.format())
    if arena.errors or (greedy_arena is not None and greedy_arena.errors):
        raise typer.Exit(1)


def _eval_exploitability(
    game: str, a: str, weights_dir: Path | None, greedy: bool, json_out: bool
) -> None:
    from croupier.arena.exploitability import format_report, measure
    from croupier.policies.distribution import UnknownPolicy, load_policy

    a = a.strip()
    names = [a]
    if greedy and a.partition("@")[0] in ("frozen", "learned") and not a.endswith(":greedy"):
        names.append(f"{a}:greedy")
    reports = []
    try:
        try:
            rules = load_policy("rules", game)[0]
        except UnknownPolicy:  # a game without rules
            rules = None
        for name in names:
            policy, resolved = load_policy(name, game, weights_dir)
            reports.append(measure(game, policy, resolved, rules))
    # (a --game that does not load: ValueError, TypeError, ImportError, AttributeError)
    except (ValueError, TypeError, ImportError, AttributeError) as e:
        raise typer.BadParameter(str(e)) from None
    if json_out:
        out = reports[0].to_dict()
        if len(reports) > 1:
            out["greedy"] = reports[1].to_dict()
        typer.echo(json.dumps(out, indent=2))
    else:
        typer.echo("\n".join(format_report(r) for r in reports))


@app.command()
def promote(
    url: Annotated[
        str,
        typer.Option(help="A server URL, or the whole fleet comma separated: every one is changed"),
    ] = "http://127.0.0.1:8000",
    game: Annotated[str, typer.Option(help="--auto: any game with a simulator (see eval)")] = (
        "leduc-holdem"
    ),
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
    evidence_kind: Annotated[
        str, typer.Option("--evidence", help="--auto: arena (play it) or live (engines' games)")
    ] = "arena",
    candidate: Annotated[int | None, typer.Option(help="--evidence live: not the newest")] = None,
    min_games: Annotated[int, typer.Option(help="--evidence live: games per side")] = 200,
    play: Annotated[
        str,
        typer.Option(
            help="--auto: judge sampled play, or greedy (the candidate's most likely action "
            "against production:greedy; for seats that play production:greedy)"
        ),
    ] = "sampled",
    tables: int = 16,
    seed: int = 0,
    log: Annotated[Path | None, typer.Option(help="Append each decision (JSON line) here")] = (
        None
    ),
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON")] = False,
    admin_key: Annotated[str | None, typer.Option(envvar="CROUPIER_ADMIN_KEY")] = None,
    tiers_dir: Annotated[
        Path | None,
        typer.Option(
            help="--auto: after a promotion, calibrate the difficulty tiers for it into this "
            "server's --weights-dir (croupier tiers calibrate)"
        ),
    ] = None,
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

    if evidence_kind not in ("arena", "live") or (evidence_kind == "live" and not auto):
        raise typer.BadParameter("--evidence is arena or live, with --auto")
    if play not in ("sampled", "greedy") or (play == "greedy" and not auto):
        raise typer.BadParameter("--play is sampled or greedy, with --auto")

    async def run() -> dict:
        if auto and evidence_kind == "live":
            from croupier.arena.promote_live import live_promote

            return await live_promote(
                urls, candidate=candidate, min_games=min_games, admin_key=admin_key, log_path=log,
                play=play,
            )  # fmt: skip
        if auto:
            from croupier.arena.promote import auto_promote  # the arena: the game's simulator

            return await auto_promote(
                urls[0], game, hands, admin_key=admin_key, tables=tables, seed=seed,
                log_path=log, fleet=urls, play=play,
                tiers=None if tiers_dir is None else {"weights_dir": tiers_dir},
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


@app.command("export")
def export_cmd(
    version: Annotated[int, typer.Option(help="The version to export")],
    weights_dir: Annotated[Path, typer.Option(help="The server's or trainer's weights dir")],
    out: Annotated[Path, typer.Option(help="Folder for policy.onnx and policy.json")],
    game: Annotated[str, typer.Option(help="A built-in game or pkg.mod:Adapter")] = (
        "leduc-holdem"
    ),
    fmt: Annotated[str, typer.Option("--format", help="onnx (the only one)")] = "onnx",
) -> None:
    """Write a version's policy for a game's own runtime: observation and mask in, masked
    logits out, with the adapter's sizes and action names beside it (docs/your-game.md)."""
    if fmt != "onnx":
        raise typer.BadParameter("--format must be onnx")
    from croupier.games.registry import load_adapter
    from croupier.policies.onnx_export import export_onnx

    try:
        info = export_onnx(weights_dir, version, load_adapter(game), out)
    except ImportError as e:  # torch.onnx needs the onnx package
        typer.echo(f"error: {e} (pip install onnx onnxruntime)", err=True)
        raise typer.Exit(1) from None
    except (ValueError, TypeError, KeyError, RuntimeError, OSError) as e:
        # what the exporter or torch.onnx refuses: one line, never a traceback
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"wrote {out / info['file']} and {out / 'policy.json'} (version {version})")


@app.command()
def status(
    url: Annotated[
        str, typer.Option(help="A server URL, or the whole fleet comma separated")
    ] = "http://127.0.0.1:8000",
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON")] = False,
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar=["CROUPIER_READ_KEY", "CROUPIER_API_KEY"],
            help="A read key is enough (CROUPIER_READ_KEY, else CROUPIER_API_KEY)",
        ),
    ] = None,
    max_version_spread: Annotated[
        int | None,
        typer.Option(min=0, help="Servers' newest versions further apart: split (default 50)"),
    ] = None,
) -> None:
    """Each server's health, versions, production channel, trainer link and spool; exit 1
    unless every server answers ok and the fleet is not split (production, canary share or
    newest version differing): a fleet check for runbooks and timers."""
    import uvloop

    from croupier.arena.fleet import fleet_status, format_status
    from croupier.routing import parse_urls

    try:
        urls = parse_urls(url)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    spread = {} if max_version_spread is None else {"max_version_spread": max_version_spread}
    report = uvloop.run(fleet_status(urls, api_key, **spread))
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

    _setup_logging(log_level)
    spec = ModelSpec(algo=algo, hiddens=layer_sizes(hiddens))
    report = run(game, from_dir, out, spec, iterations=iterations, lr=lr, batch_size=batch_size)
    typer.echo(json.dumps(report, indent=2, default=float))


tiers_app = typer.Typer(help="Difficulty tiers: tier:1 (easiest) to tier:5, by the arena.")


@tiers_app.command("calibrate")
def tiers_calibrate(
    url: Annotated[str, typer.Option(help="The server whose versions the tiers play")] = (
        "http://127.0.0.1:8000"
    ),
    game: Annotated[str, typer.Option(help="Any game with a simulator (see eval)")] = (
        "leduc-holdem"
    ),
    weights_dir: Annotated[
        Path | None,
        typer.Option(help="The server's --weights-dir: the calibration is written there"),
    ] = None,
    hands: Annotated[int, typer.Option(min=2, help="Arena hands per candidate")] = 2000,
    verify_hands: Annotated[
        int, typer.Option(min=2, help="Arena hands per chosen tier, on fresh deals")
    ] = 6000,
    tables: int = 16,
    seed: int = 0,
    json_out: Annotated[bool, typer.Option("--json", help="Print the calibration as JSON")] = (
        False
    ),
    api_key: Annotated[str | None, typer.Option(envvar="CROUPIER_API_KEY")] = None,
    side: Annotated[
        str | None,
        typer.Option(
            help="Measure every candidate on this side alone (versions that learned one side: "
            "doudizhu's landlord); promote --auto --tiers-dir keeps it"
        ),
    ] = None,
) -> None:
    """Measure candidate settings (versions of the history, temperatures, shares of the
    rules) against the rules in the arena, choose five strictly ordered tiers from about the
    rules' level to the best version, measure them again and write them for the server (it
    re-reads the file). Run it after every promotion (or promote --auto --tiers-dir DIR).
    Exit 1 when the five are not strictly ordered with 95% CIs apart."""
    import uvloop

    from croupier.arena.arena import ArenaError
    from croupier.arena.tiers import calibrate, format_calibration
    from croupier.client import CroupierError

    try:
        calibration = uvloop.run(
            calibrate(
                url,
                game,
                weights_dir=weights_dir,
                hands=hands,
                verify_hands=verify_hands,
                api_key=api_key,
                tables=tables,
                seed=seed,
                progress=lambda line: typer.echo(line, err=True),
                side=side,
            )  # fmt: skip
        )
    except (ArenaError, CroupierError, ValueError, OSError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
    typer.echo(json.dumps(calibration, indent=2) if json_out else format_calibration(calibration))
    if not calibration["ordered"]:
        raise typer.Exit(1)


app.add_typer(tiers_app, name="tiers")
app.add_typer(bench_app, name="bench")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
