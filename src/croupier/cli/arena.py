"""Commands that judge versions: `eval` (the arena, or exact robustness), `score`, `promote`
and `tiers calibrate`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from croupier.cli.common import app


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
            "in :greedy), search[:base=B][:vs=O][:rollouts=N][:ms=D][:top=K] (docs/search.md)",
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
            if greedy and a.strip() not in ("rules", "random", "search") and ":" not in a:
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
    search_rollouts: Annotated[
        str,
        typer.Option(
            help="Also a search over the best version's greedy play, at each of these "
            "rollouts a move (comma separated; the server needs --search-workers)"
        ),
    ] = "",
) -> None:
    """Measure candidate settings (versions of the history, temperatures, shares of the
    rules, searches where asked) against the rules in the arena, choose five strictly ordered
    tiers from about the rules' level to the best, measure them again and write them for the
    server (it re-reads the file). Run it after every promotion (or promote --auto --tiers-dir DIR).
    Exit 1 when the five are not strictly ordered with 95% CIs apart."""
    import uvloop

    from croupier.arena.arena import ArenaError
    from croupier.arena.tiers import calibrate, format_calibration
    from croupier.client import CroupierError

    try:
        rollouts = [int(n) for n in search_rollouts.split(",") if n.strip()]
    except ValueError:
        raise typer.BadParameter("--search-rollouts: whole numbers, comma separated") from None
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
                candidates={"search_rollouts": rollouts},
            )  # fmt: skip
        )
    except (ArenaError, CroupierError, ValueError, OSError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
    typer.echo(json.dumps(calibration, indent=2) if json_out else format_calibration(calibration))
    if not calibration["ordered"]:
        raise typer.Exit(1)
