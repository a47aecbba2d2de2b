"""`python -m experiments.warmstart`: the first minutes of training with and without a warm
start.

One command, one run:
1. Record the rules (a server with `--offline-dir`, the engine playing rules vs random with
   `record: rules`), unless `--from DIR` names episodes already recorded.
2. `croupier pretrain` behaviour-clones them (RLlib BC) into version 1.
3. The whole external path (trainer + server + engine, as `make demo`) runs twice for the same
   minutes: from scratch, then with `croupier train --init-weights` (the server starting on the
   pretrained version 1). The learned seats' payoff against the rules is recorded over time
   (the training hands, actions sampled), and each final version is evaluated against the rules.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Annotated, Any

import typer
import uvloop

from croupier.bench.plotting import pyplot, save
from croupier.demo import ExternalRun, run_external, window_means
from croupier.engine.runner import run_engine
from croupier.local_server import serving
from croupier.policies.module import ModelSpec
from croupier.policies.weights_file import weights_path
from croupier.trainer.pretrain import pretrain


def record_rules(game: str, out: Path, hands: int, log: Path) -> dict[str, Any]:
    """Rules against random through a server recording the rules' decisions into `out`."""
    # Stopped with SIGTERM on the way out: the server flushes the episodes then.
    with log.open("w") as f, serving(["--game", game, "--offline-dir", str(out)], f) as (url, _):
        summary = uvloop.run(
            run_engine(url, game, 32, ["rules", "random"], hands, None, batch=True, record="rules")
        )
    return summary.to_dict()


def bench_warmstart(
    game: str,
    minutes: float,
    out_dir: Path,
    from_dir: Path | None = None,
    record_hands: int = 4000,
    algo: str = "ppo",
    pretrain_iterations: int = 5,
    eval_hands: int = 4000,
    window_s: float = 30.0,
) -> dict[str, Any]:
    run_dir = out_dir / f"warmstart-{time.strftime('%Y%m%d-%H%M%S')}"
    run_dir.mkdir(parents=True, exist_ok=True)
    recorded = None
    if from_dir is None:
        from_dir = run_dir / "rules-episodes"
        print(f"recording the rules ({record_hands} hands vs random)...", flush=True)
        recorded = record_rules(game, from_dir, record_hands, run_dir / "record.log")
    print("pretraining (RLlib BC)...", flush=True)
    pre_dir = run_dir / "pretrained"
    pre = pretrain(game, from_dir, pre_dir, ModelSpec(algo=algo), iterations=pretrain_iterations)
    print(f"  agreement with the rules: {pre['rules_agreement']}", flush=True)

    runs: dict[str, Any] = {}
    for name in ("cold", "warm"):
        print(f"{name} start: {minutes:g} min of training...", flush=True)
        external = ExternalRun(
            game=game,
            minutes=minutes,
            algo=algo,
            eval_hands=eval_hands,
            run_dir=run_dir / name,
            quiet=True,
        )
        # Offline BC alone against no start at all: neither run is rules-anchored (the
        # trainer's default, `bench rules-anchor`), so the comparison stays what it measured.
        external.train_args = ["--no-rules-anchor"]
        if name == "warm":
            external.train_args += ["--init-weights", str(pre_dir)]
            weights = run_dir / name / "weights"
            weights.mkdir(parents=True, exist_ok=True)
            for path in (weights_path(pre_dir, 1), pre_dir / "latest.json"):
                shutil.copy(path, weights / path.name)
        report = run_external(external)
        runs[name] = {
            "windows": window_means(report["curve"], window_s),
            "final_version": report["final_version"],
            "final_vs_rules": report["final_vs_rules"],
            "env_steps": (report["trainer_last"] or {}).get("env_steps"),
        }
        f = report["final_vs_rules"]
        print(f"  final version {report['final_version']} vs rules: {f['mean']:+.3f} ± "
              f"{f['ci95']:.3f}", flush=True)  # fmt: skip
    result = {
        "game": game,
        "algo": algo,
        "minutes": minutes,
        "recorded": recorded,
        "pretrain": pre,
        "runs": runs,
    }
    (run_dir / "warmstart.json").write_text(json.dumps(result, indent=2, default=float))
    plot(result, run_dir / "warmstart.png")
    result["saved"] = str(run_dir)
    return result


def plot(result: dict[str, Any], path: Path) -> None:
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, run in result["runs"].items():
        xs = [(w["from_s"] + w["to_s"]) / 120 for w in run["windows"]]
        ax.plot(xs, [w["payoff"] for w in run["windows"]], marker="o", label=f"{name} start")
    ax.axhline(0, c="black", lw=0.5)
    ax.set_xlabel("minutes of training")
    ax.set_ylabel("payoff per hand vs rules (training hands)")
    ax.set_title(f"{result['game']}: warm start from the rules (BC) vs from scratch")
    ax.legend()
    save(fig, path)


def format_report(result: dict[str, Any]) -> str:
    lines = [
        f"pretrain: {result['pretrain']['rules_agreement']} agreement with the rules, "
        f"{result['pretrain']['seconds']:.0f} s"
    ]
    for name, run in result["runs"].items():
        cells = "  ".join(
            f"{w['from_s'] / 60:.1f}-{w['to_s'] / 60:.1f}m {w['payoff']:+.3f}"
            for w in run["windows"]
        )
        f = run["final_vs_rules"]
        lines.append(f"{name:>4}: {cells}")
        lines.append(
            f"      final v{run['final_version']} vs rules {f['mean']:+.3f} ± {f['ci95']:.3f} "
            f"({run['env_steps']} env steps)"
        )
    lines.append(f"saved: {result.get('saved')}")
    return "\n".join(lines)


def main(
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
    report = bench_warmstart(
        game, minutes, out, from_dir, record_hands, algo, pretrain_iterations, eval_hands
    )
    typer.echo(format_report(report))


if __name__ == "__main__":
    typer.run(main)
