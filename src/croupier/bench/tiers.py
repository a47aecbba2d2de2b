"""`croupier bench tiers`: five difficulty tiers calibrated on a version history, then each one
served as a `tier:N` seat and measured against the rules once more, on fresh deals.

A copy of the weights dir (the source is left as it is) is served by a local `croupier serve`;
the best version (`--production`, default the newest) is promoted, `croupier tiers calibrate`'s
calibration runs (`arena/tiers.py`: candidates screened, five chosen, measured again) and
writes the tiers into the copy; the server re-reads them and every tier plays the rules in
the arena as `tier:N` (croupier's one strength score, `arena/duplicate.py`, with its 95% CI).
The report says whether the five are strictly ordered with CIs apart, and where they lie
between the rules' level (0) and the best version.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop

from croupier.arena.arena import local_server, play_arena
from croupier.arena.tiers import YARDSTICK, Measured, calibrate, ordered
from croupier.bench.plotting import pyplot, save
from croupier.client import CroupierClient
from croupier.games.registry import load_adapter
from croupier.policies.seats import TIERS
from croupier.policies.tiers import TierSetting


def bench_tiers(
    game: str,
    weights_dir: Path,
    out_dir: Path,
    *,
    production: int | None = None,
    hands: int = 2000,
    verify_hands: int = 6000,
    check_hands: int = 6000,
    tables: int = 16,
    seed: int = 0,
    name: str | None = None,
    side: str | None = None,
) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="croupier-tiers-") as tmp:
        served = Path(tmp) / "weights"
        shutil.copytree(weights_dir, served)
        (served / "tiers.json").unlink(missing_ok=True)
        with local_server(game, served, log=Path(tmp) / "server.log") as url:
            hands_each = (hands, verify_hands, check_hands)
            run = _run(url, game, served, production, *hands_each, tables, seed, side)
            report = uvloop.run(run)
    report["seconds"] = round(time.monotonic() - t0, 1)
    report["source"] = str(weights_dir)
    stem = f"tiers-{load_adapter(game).name}-{name or time.strftime('%Y%m%d-%H%M%S')}"
    (out_dir / f"{stem}.json").write_text(json.dumps(report, indent=2, default=float))
    plot(report, out_dir / f"{stem}.png")
    report["saved"] = str(out_dir / f"{stem}.json")
    return report


async def _run(
    url: str,
    game: str,
    served: Path,
    production: int | None,
    hands: int,
    verify_hands: int,
    check_hands: int,
    tables: int,
    seed: int,
    side: str | None,
) -> dict[str, Any]:
    async with CroupierClient(url) as client:
        learned = (await client.policies())["policies"]["learned"]
        best = learned["latest"] if production is None else production
        if (await client.channels())["production"] != best:
            await client.promote(best, {"by": "croupier bench tiers"})
    calibration = await calibrate(
        url, game, weights_dir=served, hands=hands, verify_hands=verify_hands, tables=tables,
        seed=seed, progress=_say, side=side,
    )  # fmt: skip
    _say(f"each tier served as tier:N, {check_hands} hands each:")
    served_tiers = []
    for tier in range(1, TIERS + 1):
        r = await play_arena(url, game, f"tier:{tier}", YARDSTICK, check_hands, tables=tables,
                             seed=seed + 2, side=side)  # fmt: skip
        setting = TierSetting.of(calibration["tiers"][tier - 1])
        served_tiers.append(Measured(setting, r.mean, r.ci95, r.hands))
        _say(f"  tier:{tier} {r.mean:+.3f} ± {r.ci95:.3f}")
    by_spec = {c["spec"]: c for c in calibration["candidates"]}
    best_sampled = by_spec.get(TierSetting(best).spec())
    return {
        "game": game,
        "versions_loaded": learned["versions"],
        "production": best,
        "yardstick": f"the strength score against the {YARDSTICK} (0: the rules' level)"
        + (f", as {side} (half of A - the rules there, on the same deals)" if side else ""),
        "side": side,
        "calibration": calibration,
        "served": [{"tier": i + 1, **m.to_dict()} for i, m in enumerate(served_tiers)],
        "served_hands": check_hands,
        "ordered": ordered(served_tiers),
        "best_sampled": best_sampled,
        "top_candidate": max(calibration["candidates"], key=lambda c: c["score"]),
    }


def _say(line: str) -> None:
    print(line, flush=True)


def plot(report: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    fig, (screen, tiers) = plt.subplots(1, 2, figsize=(12, 4.8))
    candidates = sorted(report["calibration"]["candidates"], key=lambda c: c["score"])
    chosen = {t["spec"] for t in report["calibration"]["tiers"]}
    for i, c in enumerate(candidates):
        color = "C3" if c["spec"] in chosen else "C7"
        screen.errorbar(i, c["score"], yerr=c["ci95"], fmt="o", c=color, capsize=3)
    screen.set_xticks(range(len(candidates)), [c["spec"] for c in candidates], rotation=70,
                      fontsize=7)  # fmt: skip
    screen.axhline(0, c="k", lw=0.8, ls="--")
    screened = report["calibration"]["screen_hands"]
    screen.set_ylabel(f"strength score vs the rules ({screened} hands)")
    screen.set_title("candidates screened (red: chosen)")
    for key, label, dx, color in (
        ("calibration", "calibrated (fresh deals)", -0.15, "C0"),
        ("served", "served as tier:N (fresh deals)", 0.15, "C1"),
    ):
        rows = report["calibration"]["tiers"] if key == "calibration" else report["served"]
        tiers.errorbar([t["tier"] + dx for t in rows], [t["score"] for t in rows],
                       yerr=[t["ci95"] for t in rows], fmt="o", capsize=4, c=color,
                       label=label)  # fmt: skip
    tiers.axhline(0, c="k", lw=0.8, ls="--", label="the rules' level")
    top = report["top_candidate"]
    tiers.axhline(top["score"], c="C2", lw=0.8, ls=":", label=f"best: {top['spec']}")
    labels = [f"tier:{t['tier']}\n{t['spec']}" for t in report["calibration"]["tiers"]]
    tiers.set_xticks(range(1, TIERS + 1), labels, rotation=20, fontsize=7)
    tiers.set_ylabel("strength score vs the rules, 95% CI")
    tiers.legend(fontsize=8)
    tiers.set_title("the five tiers" + (" (ordered, CIs apart)" if report["ordered"] else ""))
    side = report.get("side")
    side = f", as {side} (the rules there on the same deals)" if side else ""
    fig.suptitle(f"bench tiers: {report['game']}, production v{report['production']}{side}")
    save(fig, path)


def format_report(report: dict[str, Any]) -> str:
    cal = report["calibration"]
    lines = [
        f"{report['game']}: {len(cal['candidates'])} candidates screened over "
        f"{cal['screen_hands']} hands each, five tiers for production v{report['production']} "
        f"({report['seconds']} s)",
        f"{'tier':<7} {'setting':<30} {'calibrated':>16} {'served as tier:N':>18}",
    ]
    for c, s in zip(cal["tiers"], report["served"], strict=True):
        lines.append(
            f"tier:{c['tier']:<2} {c['spec']:<30} {c['score']:+.3f} ± {c['ci95']:.3f}    "
            f"{s['score']:+.3f} ± {s['ci95']:.3f}"
        )
    lines.append(
        "served tiers strictly ordered, 95% CIs apart" if report["ordered"]
        else "served tiers NOT strictly ordered with 95% CIs apart"
    )  # fmt: skip
    lines.append(f"saved: {report.get('saved')}")
    return "\n".join(lines)
