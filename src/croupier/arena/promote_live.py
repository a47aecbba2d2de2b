"""`croupier promote --auto --evidence live`: promote on the games the engines really played.

No simulator and no arena: the evidence is every server's live match table
(`GET /v1/arena/live`, `policies/rollout/live.py`), merged over the fleet. The candidate (the
newest loaded version unless `--candidate N`) is compared with production (the rules, or
random, while nothing is in production) against the same opponents: the canary games are
whatever games seated the candidate (`frozen@N`, or `learned` pinned to it) beside games that
seated production against the same kinds of opponents.

The test is sequential and may be run as often as one likes (a cron job, after every batch
of games): no decision before each side has `min_games` games in the strata compared (the
normal approximation's footing); then the candidate is promoted only when the lower end of an
always-valid 95% confidence sequence of its payoff advantage is above zero: the advantage
minus `stats.mixture_boundary` standard errors (~3.0 at `min_games`, growing slowly with the
games, where a single look's CI uses 1.96). Robbins' normal-mixture boundary holds at every
look at once, so rerunning the command on a growing table does not spend the error again: the
chance that any run ever promotes a candidate that is not better stays under 5% (asymptotic,
as the CLT is). Simulated with standard normal games, looks at every game from 100 to 10,000:
the boundary was crossed upward on 1.5% of 2,000 paths; the fixed 1.96 on 25%.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from croupier.arena.promote import log_decision, promote_fleet
from croupier.client import CroupierClient
from croupier.stats import Z95, Mean, mixture_boundary, stratified_difference

MIN_GAMES = 200

Key = tuple[str, tuple[str, ...]]  # (player, opponents): a row of the live table


def merge_rows(tables: Iterable[Iterable[Mapping[str, Any]]]) -> dict[Key, Mean]:
    """Published rows (`GET /v1/arena/live`) of several servers, summed per row."""
    merged: dict[Key, Mean] = {}
    for rows in tables:
        for row in rows:
            key = (str(row["player"]), tuple(row["opponents"]))
            published = Mean.of(int(row["games"]), float(row["mean"]), float(row["std"]))
            merged.setdefault(key, Mean()).merge(published)
    return merged


def compare(rows: Mapping[Key, Mean], a: str, b: str, min_games: int = MIN_GAMES) -> dict[str, Any]:
    """A's mean payoff minus B's against the same opponents, pooled over every opponent set
    both met (`stats.stratified_difference`). Head-to-head games (A against B) are not used:
    their two payoffs come from one game (no honest variance without the pairing), and in a
    game that is not zero-sum A's payoff against B says little about who is better.
    `cs95`: the always-valid half-width (see the module doc), tuned for `min_games` a side."""
    strata = []
    for (player, opponents), mean_a in rows.items():
        mean_b = rows.get((b, opponents))
        if player == a and mean_a.n >= 2 and mean_b is not None and mean_b.n >= 2:
            strata.append((opponents, mean_a, mean_b))
    pooled = stratified_difference([(ma, mb) for _, ma, mb in strata])
    result: dict[str, Any] = {
        "a": a,
        "b": b,
        "games": [sum(ma.n for _, ma, _ in strata), sum(mb.n for _, _, mb in strata)],
        "diff": None,
        "se": None,
        "ci95": None,  # one look's 95% CI half-width (for reading)
        "cs95": None,  # the confidence sequence's half-width (the decision)
        "strata": [
            {"opponents": list(o), "games": [ma.n, mb.n], "diff": ma.mean - mb.mean}
            for o, ma, mb in strata
        ],
    }
    if pooled is not None:
        diff, se, n_effective = pooled
        result["diff"], result["se"] = diff, se
        result["ci95"] = Z95 * se
        result["cs95"] = mixture_boundary(n_effective, min_games / 2) * se  # n a side: n/2
    return result


async def live_promote(
    urls: list[str],
    *,
    candidate: int | None = None,
    min_games: int = MIN_GAMES,
    admin_key: str | None = None,
    log_path: Path | None = None,
    play: str = "sampled",
) -> dict[str, Any]:
    """Read every server's live table, compare, and promote on all of `urls` or refuse.
    `play="greedy"`: the candidate's greedy seats' games (`frozen@N:greedy` rows) against
    production's greedy ones (arena/promote.py)."""
    from croupier.arena.promote import PLAYS

    if play not in PLAYS:
        raise ValueError(f"play must be one of {PLAYS}, got {play!r}")
    suffix = ":greedy" if play == "greedy" else ""
    async with CroupierClient(urls[0], api_key=admin_key) as client:
        channels = await client.channels()
        policies = (await client.policies())["policies"]
    production = channels["production"]
    version = candidate if candidate is not None else channels["latest"]
    if production is not None:
        baseline = f"frozen@{production}{suffix}"
    else:
        baseline = "rules" if policies["rules"]["available"] else "random"
    decision: dict[str, Any] = {
        "time": time.time(),
        "evidence_kind": "live",
        "play": play,
        "candidate": version,
        "production": production,
        "promoted": False,
    }
    if version == production:
        decision["reason"] = f"version {version} is already production"
        return log_decision(decision, log_path)
    tables = []
    for url in urls:
        async with CroupierClient(url, api_key=admin_key) as client:
            tables.append((await client.live_arena())["rows"])
    result = compare(merge_rows(tables), f"frozen@{version}{suffix}", baseline, min_games)
    evidence = {
        "live": result,
        "baseline": baseline,
        "servers": urls,
        "rule": (
            f"promote when both sides have >= {min_games} games against common opponents and "
            "diff - cs95 > 0 (payoff per game, live games; cs95: an always-valid 95% "
            "confidence sequence, Robbins' normal mixture)"
        ),
    }
    decision["evidence"] = evidence
    games_a, games_b = result["games"]
    if min(games_a, games_b) < min_games:
        decision["reason"] = (
            f"not enough live games: v{version} {games_a}, {baseline} {games_b} against common "
            f"opponents (each needs {min_games})"
        )
    elif result["diff"] - result["cs95"] > 0:
        decision["reason"] = (
            f"v{version} ahead of {baseline} on live games: {result['diff']:+.4f} ± "
            f"{result['cs95']:.4f} per game (always-valid 95%)"
        )
        await promote_fleet(decision, urls, version, admin_key, evidence)
    else:
        decision["reason"] = (
            f"v{version} is not ahead of {baseline} on live games: {result['diff']:+.4f} ± "
            f"{result['cs95']:.4f} per game (always-valid 95%: it must lie above zero)"
        )
    return log_decision(decision, log_path)
