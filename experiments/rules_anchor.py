"""`python -m experiments.rules_anchor`: how the first minutes of learning go from the rules'
clone, with and without the pull back toward it, against a cold start: RLlib in-process on the
game's simulator (learned seat vs the rules), the same module and settings as `croupier train`.

Variants, run one after the other for the same training minutes each (evaluations excluded):
- `cold`: from scratch (what training did before rules-anchored learning);
- `clone`: from the rules' clone, no KL term;
- `kl`: from the clone, KL(clone || policy) with the default coefficient and half-life, let go
  once the policy beats the clone's values (`croupier train`'s default);
- `kl-schedule`: the same, its clock never set back (the half-life alone until let go: the
  default before the pull back);
- `kl-no-release`: the same, never let go;
- `kl-hold`: the same coefficient, never decaying nor let go.

Every `eval_every_s` of training (and at 0: the first version), the policy plays the rules
in-process over `eval_hands` hands, actions sampled (`bench/evaluate.py`, the same deals at
every point); the rules' own record is the rules in its place on those deals. Each point stands
for the seconds until the next one: "minutes below" sums those whose 95% CI lies wholly below
the rules' record. The last version is also played greedy over `final_hands`.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any

import typer

from croupier.bench.plotting import pyplot, save, save_report
from croupier.bench.record import evaluation_spans
from croupier.stats import minutes_below

VARIANTS = ("cold", "clone", "clone-entropy", "kl", "kl-schedule", "kl-no-release", "kl-hold")


def variant_anchor(name: str, base: Any) -> Any:
    """The `RulesAnchor` settings a variant trains with (`base`: the defaults, or flags)."""
    if name == "cold":
        return replace(base, enabled=False)
    if name == "clone":
        return replace(base, enabled=True, kl_coeff=0.0, entropy_boost=0.0)
    if name == "clone-entropy":
        return replace(base, enabled=True, kl_coeff=0.0)
    if name == "kl":
        return replace(base, enabled=True)
    if name == "kl-schedule":
        return replace(base, enabled=True, pull_back=False)
    if name == "kl-no-release":
        return replace(base, enabled=True, release=False)
    if name == "kl-hold":
        return replace(base, enabled=True, half_life=0.0, release=False)
    raise ValueError(f"unknown variant {name!r}; one of {list(VARIANTS)}")


@dataclass
class AnchorBench:
    game: str = "leduc-holdem"
    minutes: float = 3.0
    variants: tuple[str, ...] = ("cold", "clone", "kl")
    eval_every_s: float = 30.0
    eval_hands: int = 2000
    final_hands: int = 4000
    algo: str | None = None  # the game's preset's, else DEFAULT_ALGO
    seed: int = 1
    ray_cpus: int | None = None
    # Over `RulesAnchor`'s defaults, for every variant (e.g. {"smoothing": 0.2}).
    settings: dict[str, Any] = field(default_factory=dict)
    # Training settings over the game's preset, for every variant (e.g. {"lr": 1e-3}).
    train: dict[str, Any] = field(default_factory=dict)


def run_variant(bench: AnchorBench, name: str, record: float) -> dict[str, Any]:
    from croupier.bench.evaluate import payoff_vs
    from croupier.bench.train import run_anchor
    from croupier.games.registry import load_adapter
    from croupier.trainer.rules_anchor import anchor_for

    anchor = variant_anchor(name, anchor_for(load_adapter(bench.game), **bench.settings))
    print(f"{name}: {bench.minutes:g} min in-process...", flush=True)
    run = run_anchor(bench.game, bench.algo, bench.minutes, train=bench.train, rules_anchor=anchor,
                     eval_every_s=bench.eval_every_s, eval_hands=bench.eval_hands,
                     seed=bench.seed, ray_started=True)  # fmt: skip
    final = {
        how: payoff_vs(
            bench.game,
            run["spec"],
            run["weights"],
            bench.final_hands,
            seed=bench.seed,
            explore=how == "sampled",
        )  # fmt: skip
        for how in ("sampled", "greedy")
    }
    return {
        "anchor": run["rules_anchor"],
        "clone": run["clone"],
        "curve": run["curve"],
        "env_steps": run["env_steps"],
        "minutes_below": minutes_below(evaluation_spans(run["curve"], run["seconds"]), record),
        "final": final,
    }


def bench_rules_anchor(bench: AnchorBench, out_dir: Path) -> dict[str, Any]:
    import ray

    from croupier.bench.evaluate import rules_record

    unknown = [name for name in bench.variants if name not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variants {unknown}; of {list(VARIANTS)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    # Over the final evaluation's deals (the evaluations' are their first `eval_hands`): the
    # more hands, the less of the record's own noise in "significantly below" it.
    record = rules_record(bench.game, max(bench.eval_hands, bench.final_hands), seed=bench.seed)
    print(f"the rules' own record on these deals: {record['mean']:+.3f} ± {record['ci95']:.3f}",
          flush=True)  # fmt: skip
    report: dict[str, Any] = {"run": asdict(bench), "rules_record": record, "variants": {}}
    ray.init(num_cpus=bench.ray_cpus, include_dashboard=False)
    try:
        for name in bench.variants:
            report["variants"][name] = run_variant(bench, name, record["mean"])
    finally:
        ray.shutdown()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in bench.game)
    path = out_dir / f"rules-anchor-{safe}-{stamp}.json"
    return save_report(report, path, plot)


def plot(report: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, (name, v) in enumerate(report["variants"].items()):
        xs = [p["seconds"] / 60 for p in v["curve"]]
        label = f"{name} ({v['minutes_below']:.1f} min below the rules' record)"
        ax.errorbar(xs, [p["mean"] for p in v["curve"]], yerr=[p["ci95"] for p in v["curve"]],
                    c=f"C{i}", marker="o", capsize=2, label=label)  # fmt: skip
    ax.axhline(report["rules_record"]["mean"], ls="--", c="gray", label="the rules' own record")
    ax.set_xlabel("training minutes (evaluations excluded)")
    ax.set_ylabel("payoff per hand vs the rules (sampled)")
    ax.set_title(f"{report['run']['game']}: rules-anchored learning, in-process")
    ax.legend(fontsize=8)
    save(fig, path)


def format_report(report: dict[str, Any]) -> str:
    r = report["rules_record"]
    lines = [f"the rules' own record: {r['mean']:+.3f} ± {r['ci95']:.3f} ({r['n']} hands)"]
    for name, v in report["variants"].items():
        s, g = v["final"]["sampled"], v["final"]["greedy"]
        first = v["curve"][0]
        lines.append(
            f"{name:>8}: start {first['mean']:+.3f} ± {first['ci95']:.3f}, final sampled "
            f"{s['mean']:+.3f} ± {s['ci95']:.3f}, greedy {g['mean']:+.3f} ± {g['ci95']:.3f} "
            f"({v['env_steps']:,} env steps); {v['minutes_below']:.2f} min below the rules' record"
        )
    lines.append(f"saved: {report.get('saved')}")
    return "\n".join(lines)


def main(
    game: Annotated[str, typer.Option(help="Any game with a simulator and a rules bot")] = (
        "leduc-holdem"
    ),
    minutes: Annotated[float, typer.Option(help="Training minutes per variant")] = 3.0,
    variants: Annotated[
        str, typer.Option(help="Comma separated, of cold, clone, clone-entropy, kl, kl-hold")
    ] = "cold,clone,kl",
    eval_every: Annotated[float, typer.Option(help="Seconds of training between evaluations")] = (
        30.0
    ),
    eval_hands: int = 2000,
    final_hands: int = 4000,
    algo: Annotated[str | None, typer.Option(help="Default: the game's preset, else ppo")] = None,
    clone_smoothing: Annotated[float | None, typer.Option(help="Default: croupier train's")] = None,
    clone_epochs: Annotated[int | None, typer.Option(help="Default: croupier train's")] = None,
    rules_kl: Annotated[float | None, typer.Option(help="Default: croupier train's")] = None,
    rules_entropy_boost: Annotated[
        float | None, typer.Option(help="Default: croupier train's")
    ] = None,
    rules_anchor_half_life: Annotated[
        float | None, typer.Option(help="Default: croupier train's")
    ] = None,
    entropy_coeff: Annotated[float | None, typer.Option(help="Over the preset")] = None,
    lr: Annotated[float | None, typer.Option(help="Over the preset")] = None,
    ray_cpus: int | None = None,
    out: Path = Path("bench/results"),
) -> None:
    """Rules-anchored learning in-process: from the rules' clone with and without the KL pull
    toward it, against a cold start; payoff vs the rules over time and minutes below the
    rules' own record."""
    chosen = tuple(v.strip() for v in variants.split(",") if v.strip())
    given = {"smoothing": clone_smoothing, "clone_epochs": clone_epochs, "kl_coeff": rules_kl,
             "entropy_boost": rules_entropy_boost, "half_life": rules_anchor_half_life}  # fmt: skip
    bench = AnchorBench(game=game, minutes=minutes, variants=chosen, eval_every_s=eval_every,
                        eval_hands=eval_hands, final_hands=final_hands, algo=algo,
                        ray_cpus=ray_cpus,
                        settings={k: v for k, v in given.items() if v is not None},
                        train={k: v for k, v in (("entropy_coeff", entropy_coeff), ("lr", lr))
                               if v is not None})  # fmt: skip
    try:
        report = bench_rules_anchor(bench, out)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    typer.echo(format_report(report))


if __name__ == "__main__":
    typer.run(main)
