"""`croupier tiers calibrate`: five difficulty tiers, each measured in the arena against the
rules, from about the rules' level to the best version (`policies/tiers.py` serves them).

1. Candidates, from the server's loaded versions up to the best one (production, else the
   newest): a few versions spread over the history, sampled; the best version greedy, sampled
   and at temperatures 2 and 4 (wider, weaker); the best version mixed with the rules at
   shares 0.2 to 0.8 of its decisions; where asked (`search_rollouts`), a search over the
   best version's greedy play at each of those rollouts (above it, where the game's search
   wins: docs/search.md).
2. Each candidate plays the rules in the arena (`arena/arena.py`, through the server, as a
   `frozen@V[:greedy|:temp=T][:rules=P]` seat): croupier's one strength score
   (`arena/duplicate.py`) with its 95% CI over duplicate sets.
3. `choose`: tier 5 is the strongest candidate; tiers 1-4 the candidates nearest the targets
   evenly spaced from the rules' level (score 0: the rules against themselves) up to it, with
   strengths strictly increasing and each CI above the one below (when the screening allows
   it; strictly increasing means otherwise).
4. The five chosen are measured again on fresh deals (another seed, `verify_hands` each):
   those are the strengths stored, free of the selection's luck, and `ordered` says whether
   they are strictly increasing with CIs apart.

The calibration names the production version it was made for; a promotion makes it stale
until this runs again (`croupier promote --auto --tiers-dir DIR` runs it right after a
promotion it makes).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from croupier.arena.arena import ArenaError, play_arena
from croupier.arena.duplicate import SCORE_MEANING
from croupier.client import CroupierClient
from croupier.policies.seats import TIERS
from croupier.policies.tiers import CALIBRATION_FORMAT, TierSetting, write_calibration

HISTORY = 5  # versions of the history sampled as candidates (the best one included)
TEMPERATURES = (0.0, 1.0, 2.0, 4.0)  # the best version's: greedy, as trained, wider
RULES_SHARES = (0.2, 0.4, 0.6, 0.8)  # the best version's decisions left to the rules
YARDSTICK = "rules"


@dataclass(frozen=True)
class Measured:
    """A setting's strength score against the yardstick, with its 95% CI half-width."""

    setting: TierSetting
    score: float
    ci95: float
    hands: int

    @property
    def low(self) -> float:
        return self.score - self.ci95

    @property
    def high(self) -> float:
        return self.score + self.ci95

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.setting.to_dict(),
            "score": self.score,
            "ci95": self.ci95,
            "hands": self.hands,
        }


def candidate_settings(
    versions: Sequence[int],
    best: int,
    *,
    history: int = HISTORY,
    temperatures: Sequence[float] = TEMPERATURES,
    rules_shares: Sequence[float] = RULES_SHARES,
    search_rollouts: Sequence[int] = (),
) -> list[TierSetting]:
    """The settings to measure (see the module doc); `versions`: the loaded ones."""
    past = sorted(v for v in set(versions) if v <= best)
    if best not in past:
        past.append(best)
    picks = {past[round(i * (len(past) - 1) / max(1, history - 1))] for i in range(history)}
    out = [TierSetting(v) for v in sorted(picks)]
    out += [TierSetting(best, temperature=t) for t in temperatures]
    out += [TierSetting(best, rules_share=p) for p in rules_shares]
    out += [TierSetting(best, temperature=0.0, rollouts=n) for n in search_rollouts]
    return list(dict.fromkeys(out))  # in order, once each


def choose(measured: Sequence[Measured], tiers: int = TIERS) -> tuple[list[Measured], bool]:
    """`tiers` of the measured settings, weakest first, and whether their CIs lie apart (see
    the module doc, step 3). `ValueError` when fewer than `tiers` distinct strengths exist."""
    ranked = sorted(measured, key=lambda m: m.score)
    distinct = len({m.score for m in ranked})
    if distinct < tiers:
        raise ValueError(f"{distinct} distinct strengths measured, {tiers} tiers need more")
    top = ranked[-1]
    # From the rules' level (0: the rules against themselves) up; from the weakest measured
    # when nothing beats the rules (a version history that never did).
    lo, hi = (0.0 if top.score > 0 else ranked[0].score), top.score
    targets = [lo + (hi - lo) * k / (tiers - 1) for k in range(tiers)]
    for apart in (True, False):
        chosen = _nearest_chain(ranked, targets, apart)
        if chosen is not None:
            return chosen, apart
    raise ValueError("no strictly increasing chain of strengths")  # unreachable: distinct >= tiers


def _nearest_chain(
    ranked: list[Measured], targets: list[float], apart: bool
) -> list[Measured] | None:
    """The chain i_1 < ... < i_k = the strongest (by score) nearest `targets` in squared
    distance, each link strictly stronger than the one before (and, `apart`, its CI's low
    above the one before's high); None when there is none. Dynamic programming: O(k n^2)."""
    n, k = len(ranked), len(targets)

    def follows(a: Measured, b: Measured) -> bool:
        return b.score > a.score and (not apart or b.low > a.high)

    inf = float("inf")
    cost = [[inf] * n for _ in range(k)]  # cost[j][i]: best chain of j+1 links ending at i
    back = [[-1] * n for _ in range(k)]
    for i in range(n):
        cost[0][i] = (ranked[i].score - targets[0]) ** 2
    for j in range(1, k):
        for i in range(n):
            here = (ranked[i].score - targets[j]) ** 2
            for p in range(i):
                if cost[j - 1][p] < inf and follows(ranked[p], ranked[i]):
                    total = cost[j - 1][p] + here
                    if total < cost[j][i]:
                        cost[j][i], back[j][i] = total, p
    if cost[k - 1][n - 1] == inf:
        return None
    chain, i = [], n - 1
    for j in range(k - 1, -1, -1):
        chain.append(ranked[i])
        i = back[j][i]
    return chain[::-1]


def ordered(tiers: Sequence[Measured]) -> bool:
    """Strictly increasing strengths, each tier's CI above the one below's."""
    return all(b.score > a.score and b.low > a.high for a, b in itertools.pairwise(tiers))


async def measure(
    url: str,
    game: str,
    settings: Sequence[TierSetting],
    hands: int,
    *,
    api_key: str | None = None,
    tables: int = 16,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    side: str | None = None,
) -> list[Measured]:
    """Each setting against the yardstick in the arena, on the same deals (`seed`; on `side`
    alone when given)."""
    out = []
    for setting in settings:
        r = await play_arena(
            url, game, setting.spec(), YARDSTICK, hands, tables=tables, seed=seed,
            api_key=api_key, side=side,
        )  # fmt: skip
        if r.errors:
            raise ArenaError(f"{setting.spec()}: {r.errors} arena hands failed: {r.error_samples}")
        out.append(Measured(setting, r.mean, r.ci95, r.hands))
        if progress is not None:
            progress(
                f"  {setting.spec():<32} {r.mean:+.3f} ± {r.ci95:.3f} ({r.hands} hands, "
                f"{r.hands_per_s:.0f}/s)"
            )
    return out


async def calibrate(
    url: str,
    game: str,
    *,
    weights_dir: Path | None = None,
    hands: int = 2000,
    verify_hands: int = 6000,
    api_key: str | None = None,
    tables: int = 16,
    seed: int = 0,
    settings: Sequence[TierSetting] | None = None,
    candidates: dict[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
    side: str | None = None,
) -> dict[str, Any]:
    """Calibrate the tiers on the server at `url` (see the module doc); written into its
    `weights_dir` (its `--weights-dir`: the server re-reads it) when given. `settings`: the
    candidates (default: `candidate_settings` of the server's loaded versions, with the
    keyword arguments `candidates`). `side`: every candidate measured on that side alone
    (a game of named sides whose versions learned one: doudizhu's landlord)."""
    t0 = time.monotonic()
    async with CroupierClient(url, api_key=api_key) as client:
        channels = await client.channels()
        loaded = (await client.policies())["policies"]["learned"]["versions"]
    production, latest = channels["production"], channels["latest"]
    best = production if production is not None else latest
    if settings is None:
        settings = candidate_settings(loaded, best, **(candidates or {}))
    screened = await measure(
        url, game, settings, hands, api_key=api_key, tables=tables, seed=seed, side=side
    )
    chosen, apart = choose(screened)
    verified = await measure(
        url, game, [m.setting for m in chosen], verify_hands,
        api_key=api_key, tables=tables, seed=seed + 1, side=side,
    )  # fmt: skip
    calibration = {
        "format": CALIBRATION_FORMAT,
        "game": game,
        "production": production,
        "best": best,
        "yardstick": YARDSTICK,
        "side": side,
        "score": SCORE_MEANING,
        "time": time.time(),
        "seconds": round(time.monotonic() - t0, 1),
        "hands": verify_hands,
        "screen_hands": hands,
        "seed": seed,
        "apart_when_screened": apart,
        "ordered": ordered(verified),
        "tiers": [{"tier": i + 1, **m.to_dict()} for i, m in enumerate(verified)],
        "candidates": [m.to_dict() for m in screened],
    }
    if weights_dir is not None:
        calibration["file"] = str(write_calibration(weights_dir, calibration))
    return calibration


def format_calibration(calibration: dict[str, Any]) -> str:
    lines = [
        f"{calibration['game']}: tiers for production {calibration['production']} (best "
        f"version {calibration['best']}), strength score against the {calibration['yardstick']}"
        + (f" as {calibration['side']}" if calibration.get("side") else "")
        + f" over {calibration['hands']} fresh hands each ({calibration['seconds']} s)",
    ]
    for t in calibration["tiers"]:
        lines.append(f"  tier:{t['tier']}  {t['spec']:<32} {t['score']:+.3f} ± {t['ci95']:.3f}")
    lines.append(
        "strictly ordered, 95% CIs apart" if calibration["ordered"]
        else "NOT strictly ordered with CIs apart: more hands (--verify-hands) or candidates"
    )  # fmt: skip
    if "file" in calibration:
        lines.append(f"written to {calibration['file']} (the server re-reads it)")
    return "\n".join(lines)
