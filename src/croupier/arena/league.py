"""A league: round robin over the last learned versions, the rules and random, rated with
openskill (Plackett-Luce), each rating with its uncertainty.

Every pairing plays a duplicate arena (`arena.py`); each duplicate pair is one rated match
(won by whoever's two-hand total is positive, drawn at zero). Matches are rated in a shuffled
order so no pairing's results all come first. The ordinal (mu - 3 sigma) is what the table is
ranked by, and what the `league` seat spec reads (from `<weights-dir>/ratings.json`) to seat the
strongest versions as training opponents.
"""

from __future__ import annotations

import itertools
import json
import random
import time
from pathlib import Path
from typing import Any

from openskill.models import PlackettLuce

from croupier.arena.arena import MatchResult, play_arena
from croupier.client import CroupierClient
from croupier.files import write_atomic


async def league_players(url: str, versions: int, api_key: str | None = None) -> list[str]:
    """The last `versions` loaded learned versions (by number), the rules and random."""
    async with CroupierClient(url, api_key=api_key) as client:
        info = (await client.policies())["policies"]
    players = [f"frozen@{v}" for v in sorted(info["learned"]["versions"])[-versions:]]
    if info["rules"]["available"]:
        players.append("rules")
    return [*players, "random"]


def rate(matches: list[MatchResult], seed: int = 0) -> dict[str, dict[str, float]]:
    """openskill ratings from every duplicate pair of every match."""
    model = PlackettLuce()
    players = {p for m in matches for p in (m.a, m.b)}
    ratings = {p: model.rating(name=p) for p in sorted(players)}
    games = [(m.a, m.b, v) for m in matches for v in m.pair_values]
    random.Random(seed).shuffle(games)
    for a, b, value in games:
        ranks = [1, 1] if value == 0 else ([1, 2] if value > 0 else [2, 1])
        [[ra], [rb]] = model.rate([[ratings[a]], [ratings[b]]], ranks=ranks)
        ratings[a], ratings[b] = ra, rb
    return {p: {"mu": r.mu, "sigma": r.sigma, "ordinal": r.ordinal()} for p, r in ratings.items()}


async def play_league(
    url: str,
    game: str,
    players: list[str],
    hands: int,
    *,
    tables: int = 16,
    seed: int = 0,
    api_key: str | None = None,
    batch: bool = False,
) -> dict[str, Any]:
    """Every pairing plays `hands` hands; returns ratings, the payoff matrix and the matches."""
    if len(players) < 2:
        raise ValueError("a league needs at least two players")
    matches = []
    for i, (a, b) in enumerate(itertools.combinations(players, 2)):
        matches.append(
            await play_arena(
                url,
                game,
                a,
                b,
                hands,
                tables=tables,
                seed=seed + 7 * i,
                api_key=api_key,
                batch=batch,
            )  # fmt: skip
        )
    ratings = rate(matches, seed)
    payoff: dict[str, dict[str, float]] = {p: {} for p in players}
    for m in matches:
        payoff[m.a][m.b] = m.mean
        payoff[m.b][m.a] = -m.mean  # zero-sum games
    return {
        "game": game,
        "time": time.time(),
        "players": players,
        "hands_per_pairing": hands,
        "ratings": dict(sorted(ratings.items(), key=lambda kv: -kv[1]["ordinal"])),
        "payoff": payoff,
        "matches": [m.to_dict() for m in matches],
    }


def format_table(league: dict[str, Any]) -> str:
    players = list(league["ratings"])
    short = [p.replace("frozen@", "v") for p in players]
    head = f"{'#':>2} {'player':<16} {'mu':>7} {'sigma':>6} {'ordinal':>8}  " + " ".join(
        f"{s:>8}" for s in short
    )
    lines = [head]
    for rank, p in enumerate(players, 1):
        r = league["ratings"][p]
        cells = " ".join(
            f"{league['payoff'][p].get(q, float('nan')):>+8.3f}" if q != p else f"{'':>8}"
            for q in players
        )
        lines.append(
            f"{rank:>2} {p:<16} {r['mu']:>7.2f} {r['sigma']:>6.2f} {r['ordinal']:>8.2f}  {cells}"
        )
    lines.append("(cells: row's mean payoff per hand against the column)")
    return "\n".join(lines)


def save_league(league: dict[str, Any], run_dir: Path, weights_dir: Path | None = None) -> Path:
    """`<run_dir>/league.json` + `table.txt`; the ratings also go to `<weights_dir>/ratings.json`
    (what the `league` seat spec reads)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "league.json").write_text(json.dumps(league, indent=2, default=float))
    (run_dir / "table.txt").write_text(format_table(league) + "\n")
    if weights_dir is not None:
        ratings = {"time": league["time"], "ratings": league["ratings"]}
        write_atomic(weights_dir / "ratings.json", json.dumps(ratings))
    return run_dir / "league.json"
