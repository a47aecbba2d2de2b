"""`croupier tune`: a game's training preset found by Ray Tune, not by hand.

Each trial is one training preset (`games/presets.py` `TrainingPreset`: learning rate, batch,
minibatch, epochs, entropy, hidden sizes, the candidate scorer's width) trained as `croupier
train --preset` would train it, in-process on the game's simulator (RLlib, learned seat vs the
rules, `trainer/algo.py` `anchor_config`; from the rules' clone under the decaying KL, as
`croupier train` starts), for at most `trial_minutes` of training (evaluations excluded). Every
`eval_every_s` of training the trial reports its strength score against the rules (sampled,
`bench/evaluate.py` `payoff_vs`: the same deals for every trial and every report), on which:

- `asha` (default): ASHA stops the trials behind at each rung (training seconds);
- `pbt`: population-based training: every `trial_minutes / 4` the trials behind take the
  weights and settings of one ahead and perturb its lr, entropy, batch, minibatches and epochs
  (the hidden sizes stay those it was sampled with: weights cannot change shape).

The first trial is always the game's current preset (its own, else the defaults `croupier
train` uses), so the search starts from what is shipped (or from a preset file: `start`). The
winner is the best last score among the trials that trained their full `trial_minutes` (else
those that trained longest); for PBT, the settings the best member ended with (not the
schedule that led there).
`--minutes` bounds the whole search (Ray Tune's time budget). A Ray cluster (`--address`)
runs as many trials at once as it has CPUs: one CPU a trial.

`compare` trains the current preset and the tuned one side by side (two trials at once, one
CPU each, the same load on both) for the same training minutes, each evaluated every
`eval_every_s` and finally over `final_hands` duplicate hands, sampled and greedy, with their
95% CIs, the rules' own record and the minutes each curve spent below it (JSON + PNG under
bench/results/).

Why ~560 lines in one module: the search, its trial, the comparison and their one report
share the trial's config format (`trial_config`, `preset_of`) and its reports; apart, the
report's reader would chase that format through three files.
"""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from croupier.bench.plotting import pyplot, save, save_report
from croupier.bench.record import evaluation_spans
from croupier.games.presets import TrainingPreset, save_preset
from croupier.settings import parse_layer_sizes
from croupier.stats import minutes_below

SCHEDULERS = ("asha", "pbt")
# What a trial's config may set (the preset's searched fields); everything else is the
# current preset's (algo, policy, gamma, lambda).
SEARCHED = ("lr", "train_batch_size", "minibatches", "num_epochs", "entropy_coeff",
            "hiddens", "score_hidden")  # fmt: skip
CHECKPOINT = "trial.npz"


@dataclass
class TuneRun:
    game: str = "leduc-holdem"
    minutes: float = 10.0  # the whole search, wall clock (Ray Tune's time budget)
    scheduler: str = "asha"  # asha | pbt
    trials: int = 8  # configurations sampled (asha) or the population (pbt)
    trial_minutes: float = 2.0  # training minutes a trial runs at most (evaluations excluded)
    eval_every_s: float = 20.0
    eval_hands: int = 2000
    final_hands: int = 4000  # a trial's last evaluation, and the comparison's
    address: str | None = None  # a Ray cluster; None: a local Ray with `cpus`
    cpus: int = 2
    seed: int = 1
    # Rules-anchored learning as `croupier train` (its settings, `RulesAnchor` fields).
    rules_anchor: dict[str, Any] = field(default_factory=dict)
    num_envs: int = 64
    # Choices over the default search for some of its fields (`SEARCHED`), e.g.
    # {"hiddens": ["64,64"], "train_batch_size": [500, 1000]}: a narrower search.
    space: dict[str, list[Any]] = field(default_factory=dict)
    # The preset the search starts from (its first trial) and the comparison sets the tuned
    # one beside; None: the game's current preset (`current_preset`).
    start: TrainingPreset | None = None
    compare: bool = False
    compare_minutes: float | None = None  # None: trial_minutes


def current_preset(game: str) -> TrainingPreset:
    """What `croupier train --game G` trains with today, as a preset: the game's own, else
    the default algorithm's settings and network."""
    from croupier.games.candidates import is_candidate_game
    from croupier.games.presets import preset_for
    from croupier.games.registry import load_adapter
    from croupier.trainer.algo import training_defaults

    preset = preset_for(game)
    if preset is not None:
        return preset
    spec, hyper = training_defaults(game)
    return TrainingPreset(
        algo=spec.algo,
        policy="candidates" if is_candidate_game(load_adapter(game)) else "masked",
        hiddens=list(spec.hiddens), score_hidden=spec.score_hidden, lr=hyper.lr,
        entropy_coeff=hyper.entropy_coeff, train_batch_size=hyper.train_batch_size,
        minibatch_size=hyper.minibatch_size, num_epochs=hyper.num_epochs, gamma=hyper.gamma,
        lambda_=float(hyper.extra.get("lambda_", 0.95)), evidence="the defaults",
    )  # fmt: skip


def trial_config(preset: TrainingPreset) -> dict[str, Any]:
    """A preset's searched fields as a trial's config (minibatches: how many per batch, so a
    sampled minibatch never exceeds its batch)."""
    return {
        "lr": preset.lr,
        "train_batch_size": preset.train_batch_size,
        "minibatches": max(1, round(preset.train_batch_size / preset.minibatch_size)),
        "num_epochs": preset.num_epochs,
        "entropy_coeff": preset.entropy_coeff,
        # "128,128": a list in a config is a nested path to Tune, not a value
        "hiddens": ",".join(str(h) for h in preset.hiddens),
        "score_hidden": preset.score_hidden,
    }


def preset_of(base: TrainingPreset, config: dict[str, Any], evidence: str = "") -> TrainingPreset:
    """`base` with a trial's searched fields."""
    batch = int(config["train_batch_size"])
    return replace(
        base, lr=float(config["lr"]), train_batch_size=batch,
        minibatch_size=max(1, batch // int(config["minibatches"])),
        num_epochs=int(config["num_epochs"]), entropy_coeff=float(config["entropy_coeff"]),
        hiddens=parse_layer_sizes(str(config["hiddens"])), score_hidden=int(config["score_hidden"]),
        evidence=evidence or base.evidence,
    )  # fmt: skip


def search_space(
    base: TrainingPreset, scheduler: str, choices: dict[str, list[Any]] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The sampled space around `base`, and (PBT) the mutations of a trial's settings;
    `choices` replace the default domains of the fields they name."""
    from ray import tune

    choices = choices or {}
    unknown = sorted(set(choices) - set(SEARCHED))
    bad = sorted(k for k, v in choices.items() if not isinstance(v, list) or not v)
    if unknown or bad:
        raise ValueError(f"space: lists of choices for {list(SEARCHED)}; "
                         f"unknown {unknown}, not a non-empty list {bad}")  # fmt: skip

    wide = ["64,64", "128,128", "256,256"]
    space = {
        "lr": tune.loguniform(base.lr / 5, base.lr * 5),
        "train_batch_size": tune.choice([1000, 2000, 4000, 8000]),
        "minibatches": tune.choice([2, 4, 8, 16]),
        "num_epochs": tune.choice([1, 2, 4, 8]),
        "entropy_coeff": tune.loguniform(1e-3, 0.05),
        "hiddens": tune.choice(wide),
        "score_hidden": tune.choice([32, 64, 128])
        if base.policy == "candidates"
        else base.score_hidden,
    }
    mutations = {
        "lr": tune.loguniform(base.lr / 5, base.lr * 5),
        "train_batch_size": [1000, 2000, 4000, 8000],
        "minibatches": [2, 4, 8, 16],
        "num_epochs": [1, 2, 4, 8],
        "entropy_coeff": tune.loguniform(1e-3, 0.05),
    }
    for key, values in choices.items():
        space[key] = tune.choice(values)
        if key in mutations:
            mutations[key] = list(values)
    return space, (mutations if scheduler == "pbt" else {})


def trial(config: dict[str, Any], setup: dict[str, Any]) -> None:
    """One preset trained in-process and evaluated against the rules every `eval_every_s` of
    training (a Ray Tune function trainable). `setup`: the game, the base preset, the
    evaluation, the rules' recorded decisions the clone is fitted to, and whether to keep
    checkpoints (PBT)."""
    import torch
    from ray import tune
    from ray.rllib.core import DEFAULT_MODULE_ID

    from croupier.bench.evaluate import payoff_vs
    from croupier.trainer import rules_anchor as ra
    from croupier.trainer import rules_clone as rc
    from croupier.trainer.algo import anchor_config, training_defaults

    torch.set_num_threads(1)
    game, seed = setup["game"], setup["seed"]
    preset = preset_of(setup["base"], config)
    spec, hyper = training_defaults(game, preset.algo, None, preset)  # as `train --preset`
    anchor = ra.RulesAnchor(**setup["rules_anchor"])
    if anchor.enabled and setup["decisions"] is None:
        anchor = replace(anchor, enabled=False)  # a game without rules or simulator
    algo = anchor_config(game, spec, hyper, num_envs=setup["num_envs"])
    algo = algo.debugging(seed=seed).build_algo()
    steps0, trained_s, reference = 0, 0.0, None
    release = ra.Release()  # the anchor lets go once the policy beats the rules, as in `train`
    restored = tune.get_checkpoint()  # PBT: the weights of the trial this one copies
    if restored is not None:
        with restored.as_directory() as folder, np.load(Path(folder) / CHECKPOINT) as saved:
            arrays = dict(saved)
        steps0, trained_s = int(arrays.pop("__steps")), float(arrays.pop("__trained_s"))
        released_at, floor = float(arrays.pop("__released_at")), float(arrays.pop("__floor"))
        release = replace(release, gains=[float(g) for g in arrays.pop("__gains")],
                          ses=[float(e) for e in arrays.pop("__ses")],
                          held_back=float(arrays.pop("__held_back")), seen_steps=steps0,
                          offset=float(arrays.pop("__offset")),
                          offset_se=float(arrays.pop("__offset_se")),
                          scale=float(arrays.pop("__scale")),
                          floor=None if math.isnan(floor) else floor,
                          floor_se=float(arrays.pop("__floor_se")),
                          released_at=None if math.isnan(released_at) else released_at)  # fmt: skip
        reference = {k[4:]: v for k, v in arrays.items() if k.startswith("ref/")}
        ra.start_from(algo, {k: v for k, v in arrays.items() if "/" not in k}, version=1)
    elif anchor.enabled:
        reference, clone = rc.distil(game, spec, anchor, hyper.gamma, seed, setup["decisions"],
                                     setup["first_steps"])  # fmt: skip
        release = ra.restored_release({"clone": clone})  # the clone's value offset and scale
        ra.start_from(algo, reference, version=1)
    if anchor.enabled and reference:
        ra.hold_reference(algo, reference)
        ra.set_coefficients(algo, anchor, release.clock(steps0), release.released)
    algo.env_runner_group.sync_weights(
        from_worker_or_learner_group=algo.learner_group, inference_only=True
    )

    def full_weights() -> dict[str, np.ndarray]:
        state = algo.learner_group.get_weights([DEFAULT_MODULE_ID])[DEFAULT_MODULE_ID]
        return {k: np.asarray(getattr(v, "cpu", lambda v=v: v)()) for k, v in state.items()}

    def report(steps: int, last: bool) -> None:
        full = full_weights()
        served = rc.served_weights(game, spec, full)
        hands = setup["final_hands"] if last else setup["eval_hands"]
        score = payoff_vs(game, spec, served, hands, seed=seed)
        metrics = {"trained_s": trained_s, "env_steps": steps, "score": score["mean"],
                   "ci95": score["ci95"], "hands": score["n"], "last": last}  # fmt: skip
        if last:
            greedy = payoff_vs(game, spec, served, hands, seed=seed, explore=False)
            metrics.update(greedy=greedy["mean"], greedy_ci95=greedy["ci95"])
        if not setup["checkpoints"]:
            tune.report(metrics)
            return
        with tempfile.TemporaryDirectory() as folder:
            extra = {"__steps": np.array(steps), "__trained_s": np.array(trained_s),
                     "__gains": np.array(release.gains, np.float64),
                     "__ses": np.array(release.ses, np.float64),
                     "__held_back": np.array(release.held_back),
                     "__offset": np.array(release.offset),
                     "__offset_se": np.array(release.offset_se),
                     "__scale": np.array(release.scale),
                     "__floor": np.array(math.nan if release.floor is None else release.floor),
                     "__floor_se": np.array(release.floor_se),
                     "__released_at": np.array(release.released_at or math.nan)}  # fmt: skip
            ref = {f"ref/{k}": v for k, v in (reference or {}).items()}
            np.savez(Path(folder) / CHECKPOINT, **full, **ref, **extra)
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(folder))

    limit_s = setup["trial_s"]
    steps, next_eval = steps0, trained_s
    try:
        while True:
            if trained_s >= limit_s:
                report(steps, last=True)
                return
            if trained_s >= next_eval:
                report(steps, last=False)
                next_eval = trained_s + setup["eval_every_s"]
            t0 = time.monotonic()
            result = algo.train()
            trained_s += time.monotonic() - t0
            steps = steps0 + int(result["num_env_steps_sampled_lifetime"])
            if anchor.enabled:
                ra.after_update(algo, anchor, release, steps, result)
    finally:
        algo.stop()


def trial_setup(run: TuneRun, base: TrainingPreset, trial_s: float, checkpoints: bool) -> dict:
    """What every trial of a search or comparison shares (`trial`'s `setup`)."""
    from croupier.games.registry import load_adapter
    from croupier.trainer import rules_anchor as ra
    from croupier.trainer import rules_clone as rc

    anchor = ra.anchor_for(load_adapter(run.game), **run.rules_anchor)  # as `croupier train`
    decisions = first_steps = None
    if anchor.enabled and rc.anchorable(run.game) is None:
        # Recorded once here, each trial fitting its own clone (its own network) to them:
        # leduc's 20,000 decisions took 3.2 s to record and 9.2 s to fit on the 2-core box.
        decisions = rc.rules_decisions(run.game, anchor.clone_decisions, seed=run.seed,
                                       gamma=base.gamma)  # fmt: skip
        first_steps = rc.calibration_steps(run.game, len(decisions), run.seed, base.gamma)
    return {"game": run.game, "base": base, "seed": run.seed, "rules_anchor": anchor.to_dict(),
            "decisions": decisions, "first_steps": first_steps, "num_envs": run.num_envs,
            "trial_s": trial_s, "eval_every_s": run.eval_every_s, "eval_hands": run.eval_hands,
            "final_hands": run.final_hands, "checkpoints": checkpoints}  # fmt: skip


def _run_trials(run: TuneRun, setup: dict[str, Any], tune_config: Any, param_space: dict,
                name: str, storage: Path) -> list[dict[str, Any]]:  # fmt: skip
    """Every trial's config and reports, in trial order."""
    from ray import tune

    trainable = tune.with_resources(tune.with_parameters(trial, setup=setup), {"cpu": 1})
    tuner = tune.Tuner(
        trainable,
        param_space=param_space,
        tune_config=tune_config,
        run_config=tune.RunConfig(
            name=name, storage_path=str(storage.resolve()), verbose=0, callbacks=[_progress()]
        ),  # fmt: skip
    )
    grid = tuner.fit()
    trials = []
    for result in grid:
        history = result.metrics_dataframe
        reports = [] if history is None else history.to_dict("records")
        keep = ("trained_s", "env_steps", "score", "ci95", "hands", "last", "greedy",
                "greedy_ci95")  # fmt: skip
        reports = [{k: r[k] for k in keep if k in r and _finite(r[k])} for r in reports]
        trials.append({"config": result.config, "reports": reports,
                       "error": None if result.error is None else str(result.error)})  # fmt: skip
    return trials


def _finite(value: Any) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


def _progress() -> Any:
    """A Tune callback printing one line per trial report (Tune's own table is too wide for a
    log)."""
    from ray import tune

    class Progress(tune.Callback):
        def on_trial_result(self, iteration: int, trials: list, trial: Any,
                            result: dict, **info: Any) -> None:  # fmt: skip
            c = trial.config
            print(f"  {trial.trial_id}  {result['trained_s'] / 60:5.2f} min  "
                  f"{int(result['env_steps']):>8,} steps  score {result['score']:+.3f} ± "
                  f"{result['ci95']:.3f}  lr {c['lr']:.2g} batch {c['train_batch_size']}/"
                  f"{c['minibatches']} epochs {c['num_epochs']} ent "
                  f"{c['entropy_coeff']:.2g} {c['hiddens']}", flush=True)  # fmt: skip

    return Progress()


def winner(trials: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The trial with the best last score among those that trained longest (to the end of
    their minutes if any did): ASHA stops the rest early, PBT's copies end together."""
    done = [t for t in trials if t["reports"]]
    if not done:
        return None
    finished = [t for t in done if t["reports"][-1].get("last")]
    if not finished:
        longest = max(t["reports"][-1]["trained_s"] for t in done)
        finished = [t for t in done if t["reports"][-1]["trained_s"] >= 0.9 * longest]
    return max(finished, key=lambda t: t["reports"][-1]["score"])


def search(run: TuneRun, storage: Path) -> dict[str, Any]:
    """The tune: trials sampled around the current preset (which is the first), scheduled by
    ASHA or PBT, within `run.minutes`; the winning preset and every trial's reports."""
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler, PopulationBasedTraining
    from ray.tune.search import BasicVariantGenerator

    if run.scheduler not in SCHEDULERS:
        raise ValueError(f"scheduler: one of {list(SCHEDULERS)}, got {run.scheduler!r}")
    base = run.start or current_preset(run.game)
    trial_s = run.trial_minutes * 60
    space, mutations = search_space(base, run.scheduler, run.space)
    first = trial_config(base)
    if run.scheduler == "asha":
        scheduler: Any = ASHAScheduler(
            time_attr="trained_s", max_t=trial_s, grace_period=max(run.eval_every_s, trial_s / 9),
            reduction_factor=3,
        )  # fmt: skip
    else:
        scheduler = PopulationBasedTraining(
            time_attr="trained_s", perturbation_interval=max(run.eval_every_s, trial_s / 4),
            hyperparam_mutations=mutations, quantile_fraction=0.25, synch=False,
        )  # fmt: skip
    config = tune.TuneConfig(
        metric="score", mode="max", scheduler=scheduler, num_samples=run.trials,
        time_budget_s=run.minutes * 60,
        search_alg=BasicVariantGenerator(points_to_evaluate=[first]),
    )  # fmt: skip
    setup = trial_setup(run, base, trial_s, checkpoints=run.scheduler == "pbt")
    t0 = time.monotonic()
    trials = _run_trials(run, setup, config, space, f"tune-{run.scheduler}", storage)
    best = winner(trials)
    return {
        "current": asdict(base),
        "trials": trials,
        "seconds": time.monotonic() - t0,
        "winner": None if best is None else {
            "preset": asdict(preset_of(base, best["config"])),
            "last": best["reports"][-1],
            "is_current": trial_config(preset_of(base, best["config"])) == first,
        },
    }  # fmt: skip


def compare(run: TuneRun, tuned: TrainingPreset, storage: Path) -> dict[str, Any]:
    """The current preset and `tuned` trained at once (one CPU each) for the same training
    minutes, and scored on the same deals, sampled and greedy; the rules' own record."""
    from ray import tune
    from ray.tune.search import BasicVariantGenerator

    from croupier.bench.evaluate import rules_record

    base = run.start or current_preset(run.game)
    minutes = run.compare_minutes or run.trial_minutes
    presets = {"current": base, "tuned": tuned}
    sides = {name: trial_config(preset) for name, preset in presets.items()}
    space, _ = search_space(base, "asha")  # the two points below are all that is sampled
    points = BasicVariantGenerator(points_to_evaluate=list(sides.values()), max_concurrent=2)
    config = tune.TuneConfig(num_samples=2, search_alg=points)
    setup = trial_setup(run, base, minutes * 60, checkpoints=False)
    trials = _run_trials(run, setup, config, space, "compare", storage)
    # Tune keeps its trials in the order they were made: the points' order.
    if [trial_config(preset_of(base, t["config"])) for t in trials] != list(sides.values()):
        raise RuntimeError("the comparison's trials are not the two presets given")
    record = rules_record(run.game, run.final_hands, seed=run.seed)
    out: dict[str, Any] = {"minutes": minutes, "rules_record": record, "sides": {}}
    for name, t in zip(sides, trials, strict=True):
        curve = t["reports"]
        end_s = curve[-1]["trained_s"] if curve else 0.0
        last = curve[-1] if curve else {}
        out["sides"][name] = {
            "preset": asdict(presets[name]),
            "curve": curve,
            "error": t["error"],
            "minutes_below": minutes_below(
                evaluation_spans(curve, end_s, "trained_s", "score"), record["mean"]
            ),
            "env_steps": int(last.get("env_steps", 0)),
            "final": {
                "hands": int(last.get("hands", 0)),
                "sampled": {"mean": last.get("score"), "ci95": last.get("ci95")},
                "greedy": {"mean": last.get("greedy"), "ci95": last.get("greedy_ci95")},
            },
        }
    return out


def tune_game(
    run: TuneRun,
    preset_out: Path,
    out_dir: Path = Path("bench/results"),
    storage: Path = Path("runs/tune"),
    tuned: TrainingPreset | None = None,
) -> dict[str, Any]:
    """Search (unless `tuned` is given: then only the comparison), write the winning preset to
    `preset_out`, compare if asked; the report (JSON + PNG) under `out_dir`."""
    import ray

    if tuned is None and run.trials < 1:
        raise ValueError("trials: at least 1")
    started = not ray.is_initialized()  # a caller's own Ray session is left running
    if started and run.address:
        ray.init(address=run.address, include_dashboard=False, log_to_driver=False)
    elif started:
        from croupier.trainer.ray_token import private_ray_token

        private_ray_token()  # Ray's own would be 0644
        ray.init(num_cpus=run.cpus, include_dashboard=False, log_to_driver=False)
    report: dict[str, Any] = {"run": asdict(run)}
    stamp = time.strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in run.game)
    storage = storage / f"{safe}-{stamp}"  # Ray Tune's own files for this run's trials
    try:
        if tuned is None:
            print(f"tuning {run.game}: {run.trials} trials ({run.scheduler}), "
                  f"{run.trial_minutes:g} training min each at most, {run.minutes:g} min "
                  f"in all...", flush=True)  # fmt: skip
            found = search(run, storage)
            report["search"] = found
            if found["winner"] is None:
                raise RuntimeError("no trial reported a score (see the trials' errors)")
            best = found["winner"]
            evidence = (f"croupier tune --scheduler {run.scheduler} --trials {run.trials} "
                        f"--trial-minutes {run.trial_minutes:g} ({stamp})")  # fmt: skip
            tuned = replace(TrainingPreset(**best["preset"]), evidence=evidence)
            found_by = {"scheduler": run.scheduler, "trials": len(found["trials"]),
                        "trial_minutes": run.trial_minutes, "score": best["last"],
                        "is_current": best["is_current"], "at": stamp}  # fmt: skip
            report["preset_file"] = str(save_preset(tuned, preset_out, run.game, found_by))
            print(f"preset written to {preset_out}", flush=True)
        report["tuned"] = asdict(tuned)
        if run.compare:
            minutes = run.compare_minutes or run.trial_minutes
            print(f"compare: the current preset and the tuned one at once, {minutes:g} "
                  "training min each...", flush=True)  # fmt: skip
            report["compare"] = compare(run, tuned, storage)
    finally:
        if started:
            ray.shutdown()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"tune-{safe}-{stamp}.json"
    return save_report(report, path, plot)


def plot(report: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    panels = [k for k in ("search", "compare") if k in report]
    if not panels:
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 4.5), squeeze=False)
    for ax, key in zip(axes[0], panels, strict=True):
        if key == "search":
            found = report["search"]
            best = found["winner"]["preset"] if found["winner"] else None
            for i, t in enumerate(found["trials"]):
                pts = t["reports"]
                if not pts:  # never started: the search's minutes ran out first
                    continue
                preset = asdict(preset_of(TrainingPreset(**found["current"]), t["config"]))
                style = {"c": "k", "lw": 2, "label": "the current preset"} if i == 0 else \
                    {"c": "C1", "lw": 2, "label": "the winner"} if preset == best else \
                    {"c": "gray", "lw": 0.8, "alpha": 0.6}  # fmt: skip
                ax.plot([p["trained_s"] / 60 for p in pts], [p["score"] for p in pts],
                        marker=".", **style)  # fmt: skip
            started = sum(1 for t in found["trials"] if t["reports"])
            ax.set_title(f"{report['run']['game']}: {started} trials started "
                         f"({report['run']['scheduler']})")  # fmt: skip
        else:
            cmp = report["compare"]
            for i, (name, side) in enumerate(cmp["sides"].items()):
                pts = side["curve"]
                ax.errorbar([p["trained_s"] / 60 for p in pts], [p["score"] for p in pts],
                            yerr=[p["ci95"] for p in pts], c=f"C{i}", marker="o", capsize=2,
                            label=f"{name} ({side['minutes_below']:.1f} min below the "
                                  "rules' record)")  # fmt: skip
                g = side["final"]["greedy"]
                if g["mean"] is not None and pts:
                    ax.errorbar([pts[-1]["trained_s"] / 60 + 0.03], [g["mean"]],
                                yerr=[g["ci95"]], c=f"C{i}", marker="s",
                                label=f"{name} final, greedy")  # fmt: skip
            ax.axhline(cmp["rules_record"]["mean"], ls="--", c="gray",
                       label="the rules' own record")  # fmt: skip
            ax.set_title(f"current vs tuned preset, side by side, {cmp['minutes']:g} min each")
        ax.set_xlabel("training minutes (evaluations excluded)")
        ax.set_ylabel("strength score vs the rules (sampled)")
        ax.legend(fontsize=7)
    save(fig, path)


def format_report(report: dict[str, Any]) -> str:
    rows = []
    if "search" in report:
        found = report["search"]
        started = sum(1 for t in found["trials"] if t["reports"])
        rows.append(f"{started} of {len(found['trials'])} trials started in "
                    f"{found['seconds'] / 60:.1f} min")  # fmt: skip
        w = found["winner"]
        if w:
            last = w["last"]
            rows.append(f"winner{' (the current preset)' if w['is_current'] else ''}: "
                        f"{last['score']:+.3f} ± {last['ci95']:.3f} after "
                        f"{last['trained_s'] / 60:.2f} training min")  # fmt: skip
    if "preset_file" in report:
        rows.append(f"preset: {report['preset_file']}")
    t = report.get("tuned")
    if t:
        rows.append(f"  lr {t['lr']:.3g}, batch {t['train_batch_size']}, minibatch "
                    f"{t['minibatch_size']}, epochs {t['num_epochs']}, entropy "
                    f"{t['entropy_coeff']:.3g}, hiddens {t['hiddens']}, scorer "
                    f"{t['score_hidden']}")  # fmt: skip
    if "compare" in report:
        cmp = report["compare"]
        r = cmp["rules_record"]
        rows.append(f"side by side, {cmp['minutes']:g} training min each; the rules' own "
                    f"record {r['mean']:+.3f} ± {r['ci95']:.3f}")  # fmt: skip
        for name, side in cmp["sides"].items():
            f = side["final"]
            if f["sampled"]["mean"] is None:
                rows.append(f"  {name:>8}: no score ({side['error']})")
                continue
            rows.append(
                f"  {name:>8}: sampled {f['sampled']['mean']:+.3f} ± {f['sampled']['ci95']:.3f}, "
                f"greedy {f['greedy']['mean']:+.3f} ± {f['greedy']['ci95']:.3f} ({f['hands']} "
                f"hands, {side['env_steps']:,} env steps); {side['minutes_below']:.2f} min "
                "below the rules' record"
            )
    if "saved" in report:
        rows.append(f"saved: {report['saved']}")
    return "\n".join(rows)
