"""`croupier bench …`: one command per benchmark, each only parsing and wiring; the
benchmarks themselves are the modules beside this one.

Why ~610 lines in one module: it is the `bench` command group's one table of contents, a
command's flags each a line; split, `croupier bench --help` would be assembled from several
files for no reader's gain."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

bench_app = typer.Typer(help="Benchmarks (results under bench/results/).", no_args_is_help=True)


@bench_app.command("serve")
def bench_serve(
    games: Annotated[str, typer.Option(help="Concurrent games, comma separated")] = "100,1000",
    seconds: Annotated[float, typer.Option(help="Measured seconds per scenario")] = 10.0,
    rounds: Annotated[int, typer.Option(help="Interleaved rounds; medians are reported")] = 3,
    scenarios: Annotated[
        str | None,
        typer.Option(
            help="Scenarios to run, comma separated (a,r,b,c,c-torch,c-inline,d,c2,ray); "
            "all but r and c-torch"
        ),
    ] = None,
    game: Annotated[
        str, typer.Option(help="A game of the reference engine (leduc-holdem, doudizhu, uno…)")
    ] = "leduc-holdem",
    think_ms: Annotated[
        str,
        typer.Option(
            help="Load points: each game's mean think time between decisions, comma separated "
            "(0: none, the server saturated)"
        ),
    ] = "0",
    adapters: Annotated[
        str | None,
        typer.Option(
            help="Serve --game with each of these adapters side by side, comma separated "
            "(built-in names or package.module:Adapter reading the engine's JSON)"
        ),
    ] = None,
    name: Annotated[
        str | None, typer.Option(help="Results file name (default serve-<game>)")
    ] = None,
    out: Path = Path("bench/results"),
) -> None:
    """Decisions/s, latency and server CPU: no-model floor vs learned (un)batched vs batch API,
    two server processes vs one, and Ray Serve on the same module."""
    from croupier.bench.serve import Result, format_stage_table, format_table
    from croupier.bench.serve import bench_serve as run

    chosen = [s.strip() for s in scenarios.split(",") if s.strip()] if scenarios else None
    thinks = [float(t) for t in think_ms.split(",") if t.strip()]
    if not thinks or any(not 0 <= t <= 60_000 for t in thinks):
        raise typer.BadParameter("milliseconds in 0..60000", param_hint="--think-ms")
    served = [a.strip() for a in adapters.split(",") if a.strip()] if adapters else None
    report = run(
        [int(g) for g in games.split(",")], seconds, out, rounds, chosen, game, thinks, served, name
    )
    typer.echo(f"medians over {rounds} rounds:")
    results = [Result(**r) for r in report["results"]]
    typer.echo(format_table(results))
    typer.echo(format_stage_table(results))
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


@bench_app.command("cluster")
def bench_cluster(
    game: str = "leduc-holdem",
    algo: str = "ppo",
    minutes: Annotated[float, typer.Option(help="Training minutes per setup")] = 3.0,
    eval_hands: int = 10_000,
    tables: int = 128,
    out: Path = Path("bench/results"),
) -> None:
    """One Ray node vs a two-node cluster (ray start on this machine; 2 learners, a runner
    per node), two servers each: env steps/s trained and payoff vs rules."""
    from croupier.bench.cluster import bench_cluster as run
    from croupier.bench.cluster import format_report

    typer.echo(format_report(run(game, algo, minutes, out, eval_hands, tables)))


@bench_app.command("strength")
def bench_strength(
    game: Annotated[str, typer.Option(help="doudizhu, or any game with a simulator")] = "doudizhu",
    minutes: float = 5.0,
    learn: Annotated[
        str, typer.Option(help="doudizhu: landlord or peasants (vs the rules)")
    ] = "landlord",
    eval_every: Annotated[float, typer.Option(help="Seconds of play between evaluations")] = 60.0,
    eval_games: int = 300,
    final_games: int = 2000,
    anchor: Annotated[
        bool | None,
        typer.Option(
            "--anchor/--no-anchor",
            help="Simulator games: also train RLlib in-process, as long (default: on); doudizhu "
            "has none here (python -m experiments.strength_anchors)",
        ),
    ] = None,
    rules_anchor: Annotated[
        bool,
        typer.Option(
            help="Start both sides from the rules' clone, held near it by a decaying KL "
            "(`croupier train`'s default; --no-rules-anchor: from scratch)"
        ),
    ] = True,
    hiddens: Annotated[
        str | None, typer.Option(help="Over the preset, both sides: hidden sizes, e.g. 256,256")
    ] = None,
    score_hidden: Annotated[int | None, typer.Option(help="Over the preset: scorer width")] = None,
    lr: Annotated[float | None, typer.Option(help="Over the preset: learning rate")] = None,
    train_batch_size: Annotated[int | None, typer.Option(help="Over the preset")] = None,
    minibatch_size: Annotated[int | None, typer.Option(help="Over the preset")] = None,
    num_epochs: Annotated[int | None, typer.Option(help="Over the preset")] = None,
    entropy_coeff: Annotated[float | None, typer.Option(help="Over the preset")] = None,
    tables: Annotated[
        int, typer.Option(min=1, max=1024, help="External path: engine tables played at once")
    ] = 32,
    algo: Annotated[
        str | None,
        typer.Option(help="ppo or appo for the trainer (default: the game's preset, else ppo)"),
    ] = None,
    preset: Annotated[
        Path | None,
        typer.Option(help="A preset file (`croupier tune`'s) in place of the game's, both sides"),
    ] = None,
    adapter: Annotated[
        str | None,
        typer.Option(
            help="The adapter served and trained, both sides, in place of the game's own, "
            "on the game's engine (e.g. croupier.games.doudizhu_cards:DoudizhuCardsCandidates, "
            "croupier.games.uno_cards:UnoCardsCandidates)"
        ),
    ] = None,
    train_arg: Annotated[
        list[str] | None,
        typer.Option(
            help="A `croupier train` flag for the external trainer alone (repeat; e.g. "
            "--train-arg=--rules-entropy-boost --train-arg=0)"
        ),
    ] = None,
    league_sides: Annotated[
        list[str] | None,
        typer.Option(
            help="doudizhu, league training: more training tables' sides, taking turns with "
            "the learned side against the rules (repeat; e.g. landlord=learned,peasant=learned "
            "for self-play, landlord=learned,peasant=league for past versions); evaluations "
            "stay against the rules"
        ),
    ] = None,
    serve_arg: Annotated[
        list[str] | None,
        typer.Option(
            help="A `croupier serve` flag for the external server (repeat; e.g. "
            "--serve-arg=--search-labels --serve-arg=search:ms=100, expert iteration)"
        ),
    ] = None,
    search: Annotated[
        str | None,
        typer.Option(
            help="A search seat (search:...) scored on the final deals before training: the "
            "level at minute 0, drawn beside the network (simulator games)"
        ),
    ] = None,
    out: Path = Path("bench/results"),
) -> None:
    """Strength against the rules through the external path (simulator games: beside RLlib
    in-process, same wall-clock). Training settings given override the game's preset for the
    external trainer and the anchor alike."""
    from croupier.bench.strength import StrengthRun, format_report
    from croupier.bench.strength import bench_strength as run
    from croupier.cli.common import side_map
    from croupier.settings import layer_sizes

    # The bench waits for the trainer's first version where the trainer starts from the
    # clone: its own flag says which, so a trainer told otherwise behind its back would be
    # waited for in vain (10 minutes, then a timeout).
    if {"--rules-anchor", "--no-rules-anchor"} & set(train_arg or []):
        raise typer.BadParameter(
            "give --rules-anchor / --no-rules-anchor to bench strength itself",
            param_hint="--train-arg",
        )
    sizes = layer_sizes(hiddens) if hiddens else None
    given = {"hiddens": sizes, "score_hidden": score_hidden, "lr": lr,
             "train_batch_size": train_batch_size, "minibatch_size": minibatch_size,
             "num_epochs": num_epochs, "entropy_coeff": entropy_coeff}  # fmt: skip
    settings = StrengthRun(
        game=game,
        learn=learn,
        minutes=minutes,
        eval_every_s=eval_every,
        eval_games=eval_games,
        final_games=final_games,
        anchor=anchor,
        rules_anchor=rules_anchor,
        tables=tables,
        algo=algo,
        train={k: v for k, v in given.items() if v is not None},
        preset=None if preset is None else str(preset),
        adapter=adapter,
        train_args=list(train_arg or []),
        league_sides=[side_map(mix, "--league-sides") for mix in league_sides or []],
        serve_args=list(serve_arg or []),
        search=search,
    )
    try:
        report = run(settings, out)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    typer.echo(format_report(report))


@bench_app.command("search")
def bench_search(
    game: Annotated[
        str, typer.Option(help="A game whose simulator sets a table from a seat's view")
    ] = "leduc-holdem",
    seat: Annotated[
        str,
        typer.Option(help="The search seat; its ms is each budget in turn (rollouts: a ceiling)"),
    ] = "search:base=rules:rollouts=4096",
    budgets: Annotated[str, typer.Option(help="Milliseconds a decision, comma separated")] = (
        "25,100,200"
    ),
    opponent: Annotated[str, typer.Option(help="rules or random")] = "rules",
    hands: Annotated[int, typer.Option(min=2, help="Hands a point (duplicate sets)")] = 2000,
    split: Annotated[
        str, typer.Option(help="halving (the seat's), even, or both: how a budget is spread")
    ] = "halving",
    seed: int = 1,
    weights_dir: Annotated[
        Path | None, typer.Option(help="A version base's folder (a server's weights dir)")
    ] = None,
    side: Annotated[
        str | None,
        typer.Option(help="Search every seat of one side (doudizhu's landlord, peasant)"),
    ] = None,
    confidence: Annotated[
        str,
        typer.Option(help="Standard errors a move must beat the base's by, comma separated"),
    ] = "1",
    rollouts: Annotated[
        str,
        typer.Option(help="Worlds a move, comma separated: a point each at every budget"),
    ] = "",
    out: Path = Path("bench/results"),
) -> None:
    """The search seat's strength against milliseconds per decision (docs/search.md)."""
    from croupier.bench.search import SPLITS, SearchBench, run_search_bench

    splits = SPLITS if split == "both" else (split,)
    try:
        run = SearchBench(game, seat, [int(b) for b in budgets.split(",") if b.strip()],
                          opponent, hands, seed, splits, weights_dir, side,
                          tuple(float(c) for c in confidence.split(",") if c.strip()),
                          tuple(int(r) for r in rollouts.split(",") if r.strip()))  # fmt: skip
        report = run_search_bench(run, out)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    typer.echo(f"saved: {report['saved']}")


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


@bench_app.command("outage")
def bench_outage(
    game: str = "leduc-holdem",
    minutes: float = 4.0,
    outage_at: Annotated[
        float, typer.Option(help="Seconds in when the trainer is killed (or the server frozen)")
    ] = 60.0,
    outage: Annotated[
        float, typer.Option(help="Seconds the trainer stays down (or the server frozen)")
    ] = 60.0,
    server_freeze: Annotated[
        bool,
        typer.Option(
            help="Instead: one of two policy servers SIGSTOPped under a routed leduc engine, "
            "the default deadlines against the 30 s bound before (server-freeze.json, .png)"
        ),
    ] = False,
    games: Annotated[int, typer.Option(help="--server-freeze: tables routed")] = 64,
    out: Path = Path("bench/results"),
) -> None:
    """A trainer outage mid-run: the backlog trained (default bound) vs dropped, side by side;
    or (--server-freeze) a frozen server's cost to the fleet's hands/s."""
    if server_freeze:
        from croupier.bench.freeze import bench_server_freeze

        bench_server_freeze(games, outage_at, outage, minutes * 60, out)
        return
    from croupier.bench.outage import bench_outage as run

    run(game, minutes, outage_at, outage, out)


@bench_app.command("pages")
def bench_pages(
    minutes: Annotated[float, typer.Option(help="Length of the healthy run")] = 30.0,
    games: Annotated[int, typer.Option(help="Tables per fleet")] = 16,
    out: Path = Path("bench/results"),
) -> None:
    """Two fleets (leduc with a trainer, UNO) in one real Prometheus with the shipped alerts,
    Prometheus and a server restarted midway: the alerts that fired (pages.json; 0 expected)."""
    from croupier.bench.pages import bench_pages as run

    run(minutes, out, games)


@bench_app.command("overload")
def bench_overload(
    game: str = "leduc-holdem",
    minutes: Annotated[float, typer.Option(help="Minutes per run (slowed, then full speed)")] = 3.0,
    tables: Annotated[int, typer.Option(min=1, max=1024, help="Engine tables at once")] = 64,
    update_sleep: Annotated[
        float,
        typer.Option(min=0.0, help="Seconds the slowed learner pauses after each update"),
    ] = 1.5,
    eval_hands: int = 5000,
    baseline: Annotated[
        bool, typer.Option(help="Also run the same learner at full speed, for comparison")
    ] = True,
    rules: Annotated[Path, typer.Option(help="The alerting rules Prometheus evaluates")] = Path(
        "examples/prometheus/alerts.yml"
    ),
    out: Path = Path("bench/results"),
) -> None:
    """Games outpacing the learner (a learner slowed on purpose): what is trained, what is
    dropped and why, the alerts that fire, and the strength that results."""
    from croupier.bench.overload import bench_overload as run

    report = run(game, minutes, tables, update_sleep, out, eval_hands, baseline, rules)
    if not report["runs"]:
        raise typer.Exit(1)


@bench_app.command("soak")
def bench_soak(
    game: Annotated[str, typer.Option(help="Any game with a simulator")] = "leduc-holdem",
    games: Annotated[int, typer.Option(help="Concurrent games")] = 1000,
    minutes: float = 10.0,
    url: Annotated[str | None, typer.Option(help="An existing server (default: start one)")] = None,
    trainer: Annotated[bool, typer.Option(help="Connect a `croupier train` to the server")] = False,
    out: Path = Path("bench/results"),
) -> None:
    """Many concurrent games for minutes: decisions, errors, p99 per minute, server RSS."""
    from croupier.bench.soak import bench_soak as run
    from croupier.bench.soak import format_report

    report = run(games, minutes, out, url, game, trainer)
    typer.echo(format_report(report))
    if report["errors"]:
        raise typer.Exit(1)


@bench_app.command("exploit")
def bench_exploit(
    game: Annotated[
        str, typer.Option(help="Any game with a simulator: the one the target is served as")
    ] = "leduc-holdem",
    target: Annotated[
        str,
        typer.Option(
            help="frozen@N or learned@latest (from --weights-dir, may end in :greedy), rules, "
            "random, equilibrium, table:PATH, package.module:function"
        ),
    ] = "learned@latest",
    weights_dir: Annotated[Path | None, typer.Option(help="The target version's files")] = None,
    minutes: Annotated[float, typer.Option(help="Training minutes per exploiter")] = 5.0,
    baseline: Annotated[
        str, typer.Option(help="Also trained against, as long (the yardstick)")
    ] = "rules",
    exploiter_game: Annotated[
        str | None,
        typer.Option(help="The exploiter's adapter of the same game (default: --game's)"),
    ] = None,
    side: Annotated[
        str | None,
        typer.Option(
            help="The side the exploiter plays, every seat of it (a game with named sides: "
            "doudizhu's peasant); default: a team drawn at random each hand"
        ),
    ] = None,
    hands: Annotated[int, typer.Option(min=2, help="Duplicate hands per evaluation")] = 4000,
    seed: int = 0,
    max_steps: Annotated[
        int | None, typer.Option(help="Stop each exploiter's training at this many env steps")
    ] = None,
    out: Path = Path("bench/results"),
) -> None:
    """Train a fresh exploiter against a target (a frozen version) and, as long, against the
    rules: each one's win per hand with a 95% CI over duplicate hands (exact beside, for
    kuhn and leduc). JSON + PNG under --out."""
    from croupier.bench.exploit import ExploitRun, check_side, format_report
    from croupier.bench.exploit import bench_exploit as run
    from croupier.games.registry import load_adapter
    from croupier.policies.distribution import load_policy

    try:  # both opponents and the exploiter's game resolve before minutes of training
        for name in (target, baseline):
            load_policy(name, game, weights_dir)
        load_adapter(exploiter_game or game)
        if side is not None:
            check_side(game, side)
    except (ValueError, TypeError, ImportError, AttributeError) as e:
        raise typer.BadParameter(str(e)) from None
    settings = ExploitRun(
        game=game, target=target, weights_dir=weights_dir, minutes=minutes, baseline=baseline,
        exploiter_game=exploiter_game, side=side, hands=hands, seed=seed,
        max_steps=max_steps,
    )  # fmt: skip
    typer.echo(format_report(run(settings, out)))


@bench_app.command("league")
def bench_league(
    game: Annotated[
        str,
        typer.Option(help="leduc (the betting-history observation) or a Leduc adapter"),
    ] = "leduc",
    minutes: Annotated[float, typer.Option(help="Training minutes per mode")] = 5.0,
    modes: Annotated[
        str,
        typer.Option(
            help="Comma separated: rules, fsp, fsp-rules, self, br, br-rules (docs/robustness.md)"
        ),
    ] = "rules,fsp",
    every: Annotated[float, typer.Option(help="Seconds between measured snapshots")] = 30.0,
    league_every: Annotated[
        int, typer.Option(help="League history: one version kept per N version numbers")
    ] = 4,
    rules_share: Annotated[
        float, typer.Option(help="fsp-rules, br-rules: league seats the rules play")
    ] = (0.25),
    best_response_share: Annotated[
        float, typer.Option(help="br: league seats the exact best response plays")
    ] = 0.5,
    tables: int = 64,
    eval_hands: Annotated[int, typer.Option(help="The final version vs the rules over HTTP")] = (
        2000
    ),
    train_arg: Annotated[
        list[str] | None,
        typer.Option(help="A `croupier train` flag for every mode (repeat; e.g. --train-arg=--x)"),
    ] = None,
    no_rules_anchor: Annotated[
        bool, typer.Option(help="Every mode starts untrained (default: the rules' clone)")
    ] = False,
    out: Path = Path("bench/results"),
) -> None:
    """League training (a population of past versions, optionally the rules) against
    rules-only training, through the external path, for the same minutes: each mode's
    exploitability and payoff vs the rules over time, exact on the game tree. JSON + PNG."""
    from croupier.bench.league import LeagueBench, format_report
    from croupier.bench.league import bench_league as run

    chosen = tuple(m.strip() for m in modes.split(",") if m.strip())
    try:
        bench = LeagueBench(
            game=game, minutes=minutes, modes=chosen,
            every_s=every, league_every=league_every, rules_share=rules_share,
            best_response_share=best_response_share, tables=tables, eval_hands=eval_hands,
            train_args=(["--no-rules-anchor"] if no_rules_anchor else []) + (train_arg or []),
        )  # fmt: skip
        report = run(bench, out)
    except (ValueError, TypeError, ImportError, AttributeError) as e:  # a game it cannot walk
        raise typer.BadParameter(str(e)) from None
    typer.echo(format_report(report))


@bench_app.command("tiers")
def bench_tiers(
    weights_dir: Annotated[
        Path, typer.Option(help="A version history (a server's or the demo's weights dir)")
    ],
    game: Annotated[str, typer.Option(help="Any game with a simulator and rules")] = (
        "leduc-holdem"
    ),
    production: Annotated[
        int | None, typer.Option(help="The best version, promoted (default: the newest)")
    ] = None,
    hands: Annotated[int, typer.Option(min=2, help="Arena hands per candidate")] = 2000,
    verify_hands: Annotated[
        int, typer.Option(min=2, help="Arena hands per chosen tier (calibration)")
    ] = 6000,
    check_hands: Annotated[
        int, typer.Option(min=2, help="Arena hands per tier served as tier:N")
    ] = 6000,
    tables: int = 16,
    seed: int = 0,
    name: Annotated[str | None, typer.Option(help="File name's tail (default: the time)")] = (None),
    side: Annotated[
        str | None,
        typer.Option(
            help="Measure every tier on this side alone (a game of named sides whose versions "
            "learned one: doudizhu's landlord)"
        ),
    ] = None,
    out: Path = Path("bench/results"),
) -> None:
    """Five difficulty tiers calibrated in the arena on a version history, then each served
    as tier:N and measured against the rules again: strictly ordered with 95% CIs apart?
    JSON + PNG under --out (the weights dir is copied, never changed)."""
    from croupier.bench.tiers import bench_tiers as run
    from croupier.bench.tiers import format_report

    if not (weights_dir / "latest.json").exists():
        raise typer.BadParameter(f"{weights_dir} holds no versions (no latest.json)")
    report = run(
        game, weights_dir, out, production=production, hands=hands, verify_hands=verify_hands,
        check_hands=check_hands, tables=tables, seed=seed, name=name, side=side,
    )  # fmt: skip
    typer.echo(format_report(report))
    if not report["ordered"]:
        raise typer.Exit(1)


@bench_app.command("equilibrium")
def bench_equilibrium(
    game: Annotated[str, typer.Option(help="A game small enough to walk: kuhn, leduc")] = (
        "leduc-holdem"
    ),
    iterations: Annotated[int, typer.Option(min=1, help="CFR+ on the full game")] = 5000,
    check_every: Annotated[int, typer.Option(min=1)] = 250,
    observations: Annotated[
        str,
        typer.Option(
            help="Adapters of the game, comma separated: CFR+ restricted to each one's "
            "observation (empty: none)"
        ),
    ] = "leduc-holdem,croupier.games.leduc:LeducHistoryAdapter",
    ceiling_iterations: Annotated[int, typer.Option(min=1)] = 2000,
    ceiling_check_every: Annotated[int, typer.Option(min=1)] = 10,
    table: Annotated[
        Path | None, typer.Option(help="Write the equilibrium here (eval's --a table:PATH)")
    ] = None,
    out: Path = Path("bench/results"),
) -> None:
    """CFR+ on a small game's whole tree: the full game's equilibrium (exploitability by
    iteration), and the least exploitable policy each observation allows (its ceiling)."""
    from croupier.bench.equilibrium import bench_equilibrium as run
    from croupier.bench.equilibrium import format_report

    names = [o.strip() for o in observations.split(",") if o.strip()]
    try:
        report = run(game, iterations, check_every, names, ceiling_iterations,
                     ceiling_check_every, out, table)  # fmt: skip
    except (ValueError, TypeError, ImportError, AttributeError) as e:  # a game it cannot walk
        raise typer.BadParameter(str(e)) from None
    typer.echo(format_report(report))


@bench_app.command("worlds")
def bench_worlds(
    hands: Annotated[int, typer.Option(help="Hands of mixed play a game, its states")] = 6,
    states: Annotated[int, typer.Option(help="States per game, evenly spaced")] = 40,
    repeats: Annotated[int, typer.Option(help="Worlds per state (a search's resamples)")] = 20,
    games: Annotated[str | None, typer.Option(help="Games, comma separated; all")] = None,
    out: Path = Path("bench/results"),
) -> None:
    """What a world costs a search, per game: a table set from a seat's view (`resample`),
    then played out by random moves and by the rules (docs/your-game.md, "Worlds for
    search")."""
    from croupier.bench.worlds import bench_worlds as run

    chosen = [g.strip() for g in games.split(",") if g.strip()] if games else None
    typer.echo(json.dumps(run(hands, states, repeats, out, chosen), indent=2))


@bench_app.command("label-flood")
def bench_label_flood(
    games: Annotated[int, typer.Option(min=1, help="Games, each a distinct temperature")] = 20_000,
    idle_minutes: Annotated[float, typer.Option(min=0.0, help="Idle after, memory sampled")] = 15.0,
    out: Path = Path("bench/results"),
) -> None:
    """Games with distinct seat tunings, then idle: the views' bytes and the server's memory
    (the security review's label probe; docs/security.md)."""
    from croupier.bench.label_flood import bench_label_flood as run

    report = run(games, idle_minutes, out)
    print(f"labels {report['labels']}, bytes after idle {report['bytes_after_idle']}, "
          f"RSS growth while idle {report['rss_idle_growth_mib']} MiB")  # fmt: skip
