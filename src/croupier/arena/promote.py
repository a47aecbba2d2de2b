"""`croupier promote --auto`: the newest version earns production only by beating it.

The newest loaded version plays the current production version (the rules when nothing is in
production yet) in the arena; it is promoted only when its strength score against it
(`arena/duplicate.py`) is positive with the whole 95% confidence interval above zero. Every
decision, refusals included, is appended to a JSON-lines log with its evidence; the server
logs each promotion itself as well.

`play="greedy"` judges the candidate's greedy play (`frozen@N:greedy`, its most likely legal
action) against production's greedy play (`production:greedy`): for a studio whose seats play
`production:greedy`, the version that wins greedy is the one to promote, though its sampled
play may not win. A production version is a version: its seats choose to sample or not.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from croupier.arena.arena import ArenaError, play_arena
from croupier.arena.fleet import change_fleet
from croupier.client import CroupierClient

PLAYS = ("sampled", "greedy")


async def auto_promote(
    url: str,
    game: str,
    hands: int,
    *,
    admin_key: str | None = None,
    tables: int = 16,
    seed: int = 0,
    log_path: Path | None = None,
    fleet: list[str] | None = None,
    play: str = "sampled",
    tiers: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The arena runs against `url`; a win promotes there, or on every server of `fleet`
    (`croupier.arena.fleet`: all or none checked first, each reported). `play`: sampled or
    greedy (both sides, see the module docstring). `tiers`: after a promotion, calibrate the
    difficulty tiers for the new production version (`arena/tiers.py` `calibrate`'s keyword
    arguments: `weights_dir`, the server's, where it re-reads them; `hands`, ...)."""
    if play not in PLAYS:
        raise ValueError(f"play must be one of {PLAYS}, got {play!r}")
    async with CroupierClient(url, api_key=admin_key) as client:
        channels = await client.channels()
        has_rules = (await client.policies())["policies"]["rules"]["available"]
    latest, production = channels["latest"], channels["production"]
    decision: dict[str, Any] = {
        "time": time.time(),
        "candidate": latest,
        "production": production,
        "promoted": False,
        "play": play,
    }
    if production is not None and latest == production:
        decision["reason"] = f"version {latest} is already production"
        return log_decision(decision, log_path)
    baseline = "production" if production is not None else ("rules" if has_rules else "random")
    suffix = ":greedy" if play == "greedy" else ""
    candidate = f"frozen@{latest}{suffix}"
    if baseline == "production":
        baseline += suffix  # greedy against greedy; the rules are the rules either way
    result = await play_arena(
        url, game, candidate, baseline, hands, tables=tables, seed=seed, api_key=admin_key,
    )  # fmt: skip
    evidence = {
        "arena": result.to_dict(),
        "baseline": baseline,
        "play": play,
        "rule": "promote when score - ci95 > 0 (the strength score, duplicate sets)",
    }
    decision["evidence"] = evidence
    if result.errors:
        decision["reason"] = f"{result.errors} arena hands failed: no decision on partial data"
    elif result.ci_low > 0:
        decision["reason"] = (
            f"{candidate} beat {baseline}: strength score {result.mean:+.4f} ± {result.ci95:.4f}"
        )
        if fleet:
            await promote_fleet(decision, fleet, latest, admin_key, evidence)
        else:
            async with CroupierClient(url, api_key=admin_key) as client:
                decision["server"] = await client.promote(latest, evidence)
            decision["promoted"] = True
        if decision["promoted"] and tiers is not None:
            decision["tiers"] = await recalibrate(url, game, admin_key, tables, seed, tiers)
    else:
        decision["reason"] = (
            f"{candidate} did not beat {baseline}: strength score {result.mean:+.4f} ± "
            f"{result.ci95:.4f} (the CI must lie above zero)"
        )
    return log_decision(decision, log_path)


async def promote_fleet(
    decision: dict[str, Any],
    urls: list[str],
    version: int,
    admin_key: str | None,
    evidence: dict[str, Any],
) -> None:
    """Promote `version` on every server of the fleet; the decision keeps each one's answer
    and is `promoted` only if every server took it."""
    report = await change_fleet(
        urls, "promote", version=version, admin_key=admin_key, evidence=evidence
    )
    decision["fleet"] = report
    decision["promoted"] = report["ok"]
    if not report["ok"]:
        decision["reason"] += "; the fleet did not take it everywhere (see fleet)"


async def recalibrate(
    url: str, game: str, key: str | None, tables: int, seed: int, options: dict[str, Any]
) -> dict[str, Any]:
    """The tiers calibrated again for the production just promoted: what the decision logs
    (each tier's setting and strength; the candidates stay in the calibration file)."""
    from croupier.arena.tiers import calibrate
    from croupier.policies.tiers import read_calibration

    try:
        # On the side the last calibration measured (a landlord's tiers stay a landlord's).
        previous = read_calibration(options["weights_dir"]) if options.get("weights_dir") else None
        if previous and previous.get("side") and "side" not in options:
            options = {**options, "side": previous["side"]}
        calibration = await calibrate(url, game, api_key=key, tables=tables, seed=seed, **options)
    except (ArenaError, ValueError, OSError) as e:
        # The promotion stands: the old tiers keep serving, said stale, until a calibration.
        return {"error": f"the tiers were not calibrated again: {e}"}
    return {k: v for k, v in calibration.items() if k != "candidates"}


def log_decision(decision: dict[str, Any], log_path: Path | None) -> dict[str, Any]:
    """Append the decision, refusals included, as one JSON line (when a log is given)."""
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("a") as f:
            f.write(json.dumps(decision, default=float) + "\n")
    return decision
