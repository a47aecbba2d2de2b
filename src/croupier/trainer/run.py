"""`croupier train`: build the Algorithm, resume from the checkpoint dir, train, checkpoint.

Each iteration appends one JSON line to `<checkpoint-dir>/progress.jsonl` (and prints a short
progress line), which is what the demo and the benchmarks read.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from croupier.trainer.algo import Hyper
from croupier.trainer.metrics import learner_trained_lifetime, serve_trainer_metrics

log = logging.getLogger(__name__)

CHECKPOINT = "checkpoint"
PROGRESS = "progress.jsonl"


@dataclass
class TrainOptions:
    game: str = "leduc-holdem"
    algo: str = "appo"
    listen: str = "127.0.0.1:5555"
    checkpoint_dir: Path = Path("runs/trainer")
    minutes: float | None = None
    iterations: int | None = None
    ray_address: str | None = None
    num_cpus: int | None = None
    max_version_lag: int | None = None
    token: str | None = None
    # Listen on a non-loopback address without a token (refused otherwise).
    insecure: bool = False
    checkpoint_every: int = 10
    hiddens: list[int] = field(default_factory=lambda: [128, 128])
    hyper: Hyper | None = None  # None: Hyper.defaults(algo)
    num_env_runners: int = 0
    num_learners: int = 0
    num_gpus_per_learner: float = 0
    obs_size: int | None = None
    num_actions: int | None = None
    # Prometheus metrics on this port (see trainer/metrics.py); None: none.
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    # A pretrain's output dir (`croupier pretrain`): start from its weights and version, unless
    # a checkpoint exists to resume from.
    init_weights: Path | None = None


def lag_summary(histogram: dict[int, int]) -> dict[str, float]:
    """Mean, p50, p90 and max of an ingest-lag histogram {lag: episodes}."""
    total = sum(histogram.values())
    if not total:
        return {"mean": 0.0, "p50": 0.0, "p90": 0.0, "max": 0.0}
    lags = sorted(histogram)

    def quantile(q: float) -> float:
        seen = 0
        for lag in lags:
            seen += histogram[lag]
            if seen >= q * total:
                return float(lag)
        return float(lags[-1])

    mean = sum(lag * n for lag, n in histogram.items()) / total
    return {"mean": mean, "p50": quantile(0.5), "p90": quantile(0.9), "max": float(lags[-1])}


def _histogram_delta(now: dict[int, int], before: dict[int, int]) -> dict[int, int]:
    return {k: v - before.get(k, 0) for k, v in now.items() if v - before.get(k, 0) > 0}


def recover_checkpoint(checkpoint_dir: Path) -> Path | None:
    """The checkpoint to resume from, if any. `Trainer.checkpoint` swaps with two renames
    (checkpoint -> .old, .tmp -> checkpoint); a kill between them leaves no `checkpoint` but a
    complete `.tmp` (and the previous one as `.old`): finish the swap."""
    target = checkpoint_dir / CHECKPOINT
    if target.exists():
        return target
    old, tmp = target.with_name(CHECKPOINT + ".old"), target.with_name(CHECKPOINT + ".tmp")
    if not old.exists():
        return None  # never checkpointed (a lone .tmp is a save that did not finish)
    (tmp if tmp.exists() else old).rename(target)
    log.warning("finished an interrupted checkpoint swap in %s", checkpoint_dir)
    return target


class Trainer:
    """Owns the Ray session and the Algorithm for one `croupier train` run."""

    def __init__(self, options: TrainOptions):
        self.options = options
        self.stop_requested = threading.Event()
        self.algo: Any = None
        self.progress_path = Path(options.checkpoint_dir) / PROGRESS
        # What /metrics reads (trainer/metrics.py): the last progress line and lag histogram.
        self.last_progress: dict[str, Any] = {}
        self.last_lag_histogram: dict[int, int] = {}

    # --- setup ---------------------------------------------------------------------------

    def build(self) -> None:
        import ray
        import torch

        from croupier.games.registry import load_adapter
        from croupier.link.client import parse_address
        from croupier.policies.module import ModelSpec
        from croupier.trainer.algo import build_config
        from croupier.trainer.env_runner import LinkOptions, check_listen

        # Small models: intra-op threads only fight each other (20x slower measured).
        torch.set_num_threads(1)
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        opts = self.options
        if not ray.is_initialized():
            if opts.ray_address:
                ray.init(address=opts.ray_address)
            else:
                ray.init(num_cpus=opts.num_cpus, include_dashboard=False)
        adapter = load_adapter(opts.game, obs_size=opts.obs_size, num_actions=opts.num_actions)
        host, port = parse_address(opts.listen)
        link = LinkOptions(
            host=host,
            port=port,
            token=opts.token,
            max_version_lag=opts.max_version_lag,
            state_dir=str(Path(opts.checkpoint_dir).resolve()),
            insecure=opts.insecure,
        )
        check_listen(link)  # before building: inside an env runner, Ray would wrap the error
        spec = ModelSpec(algo=opts.algo, hiddens=list(opts.hiddens))
        if opts.hyper is None:
            opts.hyper = Hyper.defaults(opts.algo)
        config = build_config(
            adapter,
            link,
            spec,
            opts.hyper,
            num_env_runners=opts.num_env_runners,
            num_learners=opts.num_learners,
            num_gpus_per_learner=opts.num_gpus_per_learner,
        )
        self.algo = config.build_algo()
        from croupier.trainer.env_runner import published_version

        # Read before restoring: what servers have seen, whatever the checkpoint says.
        published = published_version(Path(opts.checkpoint_dir))
        checkpoint = recover_checkpoint(Path(opts.checkpoint_dir))
        if checkpoint is not None:
            self.algo.restore_from_path(str(checkpoint.resolve()))
        elif opts.init_weights is not None:
            self._start_from(Path(opts.init_weights), spec)
        renumbered = self._number_past_published(published)
        if checkpoint is not None or opts.init_weights is not None or renumbered:
            # Hand the learner's weights (and their weights_seq_no) to the runners now, so
            # servers that connect before the first update get the resumed version.
            self.algo.env_runner_group.sync_weights(
                from_worker_or_learner_group=self.algo.learner_group, inference_only=True
            )
        if checkpoint is not None:
            log.info("resumed from %s at version %d", checkpoint, self.weights_seq_no())

    def _number_past_published(self, published: int) -> bool:
        """A trainer killed after its last checkpoint (or before its first) had pushed newer
        versions: go on from the highest one published, so that servers never see one version
        number for two different weights. True if the version was moved on."""
        from ray.rllib.core import COMPONENT_LEARNER
        from ray.rllib.utils.metrics import WEIGHTS_SEQ_NO

        restored = self.algo.learner_group.get_state(components=COMPONENT_LEARNER)
        seq = int(restored.get(COMPONENT_LEARNER, {}).get(WEIGHTS_SEQ_NO, 0))
        if published <= seq:
            return False
        self.algo.learner_group.set_state({COMPONENT_LEARNER: {WEIGHTS_SEQ_NO: published + 1}})
        log.info("weights at version %d, %d published before: going on as version %d",
                 seq, published, published + 1)  # fmt: skip
        return True

    def _start_from(self, init_dir: Path, spec: Any) -> None:
        """Load a pretrain's full module (policy and value heads) into the learner(s) and keep
        its version number (`build` then hands it to the runners, which push it to servers)."""
        from ray.rllib.core import COMPONENT_LEARNER, COMPONENT_RL_MODULE, DEFAULT_MODULE_ID
        from ray.rllib.utils.metrics import WEIGHTS_SEQ_NO

        from croupier.trainer.pretrain import read_init_weights

        init_spec, weights, version = read_init_weights(init_dir)
        if init_spec.to_dict() != spec.to_dict():
            raise ValueError(
                f"{init_dir} holds a {init_spec.to_dict()} model; this run trains "
                f"{spec.to_dict()} (pretrain with the same --algo and --hiddens)"
            )
        group = self.algo.learner_group
        group.set_state(
            {
                COMPONENT_LEARNER: {
                    COMPONENT_RL_MODULE: {DEFAULT_MODULE_ID: weights},
                    WEIGHTS_SEQ_NO: version,
                }
            }
        )

        def sync_targets(learner: Any) -> None:
            # APPO's target networks start as copies of the loaded ones, not of the random init.
            module = learner.module[DEFAULT_MODULE_ID]
            for main, target in getattr(module, "get_target_network_pairs", list)():
                target.load_state_dict(main.state_dict())

        group.foreach_learner(sync_targets)
        log.info("starting from %s (version %d)", init_dir, version)

    def request_stop(self) -> None:
        """End the run soon: the loop checkpoints and returns, a waiting sample gives up."""
        self.stop_requested.set()
        runner = self._runner() if self.algo is not None else None
        if runner is not None:
            runner.request_stop()

    # --- views of the runner(s) ----------------------------------------------------------

    def _runner(self) -> Any:
        return self.algo.env_runner if self.options.num_env_runners == 0 else None

    def weights_seq_no(self) -> int:
        runner = self._runner()
        if runner is not None:
            return runner.weights_seq_no
        seqs = self.algo.env_runner_group.foreach_env_runner(
            lambda r: r.weights_seq_no, local_env_runner=False
        )
        return max(seqs, default=0)

    def link_stats(self) -> dict[str, Any]:
        runner = self._runner()
        if runner is not None:
            return runner.link_stats()
        per_runner = self.algo.env_runner_group.foreach_env_runner(
            lambda r: r.link_stats(), local_env_runner=False
        )
        merged: dict[str, Any] = {"lag_histogram": {}}
        for stats in per_runner:
            for k, v in stats.items():
                if k == "lag_histogram":
                    for lag, n in v.items():
                        merged[k][lag] = merged[k].get(lag, 0) + n
                elif isinstance(v, int | float):
                    merged[k] = merged.get(k, 0) + v
        merged["weights_seq_no"] = max((s["weights_seq_no"] for s in per_runner), default=0)
        return merged

    # --- the loop ------------------------------------------------------------------------

    def run(self, on_progress: Any = None) -> dict[str, Any]:
        opts = self.options
        deadline = time.monotonic() + opts.minutes * 60 if opts.minutes else None
        timer = None
        if opts.minutes:
            # The deadline must also reach a sample() waiting inside algo.train() for episodes
            # that may no longer come (games stopped): a timer asks the run to stop.
            timer = threading.Timer(opts.minutes * 60, self.request_stop)
            timer.daemon = True
            timer.start()
        Path(opts.checkpoint_dir).mkdir(parents=True, exist_ok=True)
        runner = self._runner()
        min_steps = opts.hyper.train_batch_size if opts.hyper else 1
        iteration = 0
        last: dict[str, Any] = {}
        t_last, steps_last = time.monotonic(), self.link_stats()["steps_sampled"]
        lag_before: dict[int, int] = {}
        trained_last: float | None = None  # learner env steps trained, lifetime
        while not self.stop_requested.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                break
            if opts.iterations is not None and iteration >= opts.iterations:
                break
            # Wait here (interruptibly) rather than inside algo.train(): an idle trainer still
            # answers signals, deadlines and progress.
            if runner is not None and not runner.wait_for_steps(min_steps, 1.0):
                continue
            t_train = time.monotonic()
            try:
                result = self.algo.train()
            except Exception:
                if self.stop_requested.is_set():
                    break  # the runner gave up waiting because we are stopping
                raise
            iteration += 1
            stats = self.link_stats()
            now = time.monotonic()
            steps = stats["steps_sampled"]  # handed to the learner (a backlog's surplus is not)
            lag_now = {int(k): v for k, v in stats["lag_histogram"].items()}
            trained = learner_trained_lifetime(result)
            last = {
                "iteration": iteration,
                "time": time.time(),
                "version": stats["weights_seq_no"],
                "env_steps": steps,
                "env_steps_per_s": (steps - steps_last) / max(now - t_last, 1e-9),
                "episode_return_mean": result.get("env_runners", {}).get("episode_return_mean"),
                "env_steps_trained": trained,
                # Samples trained per second of algo.train() (from the second iteration on).
                "learner_steps_per_s": None
                if trained is None or trained_last is None
                else (trained - trained_last) / max(now - t_train, 1e-9),
                "lag": lag_summary(_histogram_delta(lag_now, lag_before)),
                "lag_lifetime": lag_summary(lag_now),
                **{k: v for k, v in stats.items() if k not in ("lag_histogram",)},
            }
            t_last, steps_last, lag_before, trained_last = now, steps, lag_now, trained
            self.last_progress, self.last_lag_histogram = last, lag_now
            with self.progress_path.open("a") as f:
                f.write(json.dumps(last, default=float) + "\n")
            if on_progress is not None:
                on_progress(last)
            if iteration % opts.checkpoint_every == 0:
                self.checkpoint()
        if timer is not None:
            timer.cancel()
        self.checkpoint()
        return last

    def checkpoint(self) -> Path:
        """Save atomically: write beside, then swap, so a crash never leaves half a checkpoint."""
        target = Path(self.options.checkpoint_dir).resolve() / CHECKPOINT
        tmp = target.with_name(CHECKPOINT + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        self.algo.save_to_path(str(tmp))
        old = target.with_name(CHECKPOINT + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if target.exists():
            target.rename(old)
        tmp.rename(target)
        shutil.rmtree(old, ignore_errors=True)
        return target

    def close(self) -> None:
        import ray

        if self.algo is not None:
            self.algo.stop()
            self.algo = None
        if not self.options.ray_address and ray.is_initialized():
            ray.shutdown()


def format_progress(p: dict[str, Any]) -> str:
    ret = p.get("episode_return_mean")
    return (
        f"iter {p['iteration']:4d}  version {p['version']:5d}  "
        f"{p['env_steps_per_s']:7.0f} steps/s  steps {p['env_steps']:9d}  "
        f"lag p50/p90 {p['lag']['p50']:.0f}/{p['lag']['p90']:.0f}  "
        f"return {ret if ret is None else round(ret, 3)}  servers {p['connected_servers']}"
    )


def train(options: TrainOptions, quiet: bool = False) -> dict[str, Any]:
    trainer = Trainer(options)

    def request_stop(signum: int, frame: Any) -> None:
        trainer.request_stop()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)
    metrics_server = None
    try:
        trainer.build()
        if options.metrics_port is not None:
            metrics_server = serve_trainer_metrics(
                trainer, options.metrics_port, options.metrics_host
            )
        return trainer.run(None if quiet else lambda p: print(format_progress(p), flush=True))
    finally:
        if metrics_server is not None:
            metrics_server.shutdown()
        trainer.close()
