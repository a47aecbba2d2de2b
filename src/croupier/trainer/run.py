"""`croupier train`: build the Algorithm, resume from the checkpoint dir, train, checkpoint.

Each iteration appends one JSON line to `<checkpoint-dir>/progress.jsonl` (and prints a short
progress line), which is what the demo and the benchmarks read.

Its life cycle as a service (docs/trainer-lifecycle.md): the link opens only after the state is
restored; it goes on from the newest weights it published (so a number always names the same
weights); without traffic it waits, reports itself idle and resumes when games return (for
`max_idle_s` at most, forever by default); SIGTERM and SIGINT both checkpoint and exit, within
`stop_grace_s`; `/healthz` on the metrics port says where it stands.

Why one module of ~640 lines: it is the trainer's whole life, read top to bottom in the order
it happens (build, restore, open the link, train, checkpoint, stop on a signal), like a
CleanRL script. Each step's mechanics live in a module of its own: the checkpoint, its shapes
and where a start comes from (`checkpoints.py`), the remote runners' merged view
(`runners.py`), the progress record and its line (`progress.py`), the rules anchor, the link,
the EnvRunner, the inbox, the published-weights notes and RLlib's internals.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from croupier.files import owner_only, private_dir
from croupier.games.presets import DEFAULT_ALGO
from croupier.link.secret import TokenSource
from croupier.trainer import ray_processes
from croupier.trainer.algo import Hyper
from croupier.trainer.checkpoints import (
    check_shapes,
    continue_from_published,
    recover_checkpoint,
    save_checkpoint,
    start_from_pretrain,
)
from croupier.trainer.metrics import (
    learner_stats,
    learner_trained_lifetime,
    serve_trainer_metrics,
)
from croupier.trainer.progress import (
    PROGRESS,
    format_progress,
    histogram_delta,
    lag_summary,
    per_hand,
    trained_share,
)
from croupier.trainer.ray_token import private_ray_token
from croupier.trainer.rules_anchor import RulesAnchor
from croupier.trainer.runners import (
    check_runners,
    merge_link_stats,
    remote_runners_ready,
)

log = logging.getLogger(__name__)


@dataclass
class TrainOptions:
    game: str = "leduc-holdem"
    algo: str = DEFAULT_ALGO
    listen: str = "127.0.0.1:5555"
    checkpoint_dir: Path = Path("runs/trainer")
    minutes: float | None = None
    iterations: int | None = None
    ray_address: str | None = None
    num_cpus: int | None = None
    max_version_lag: int | None = None
    # Where the link token is (a file or an environment variable), never the token itself:
    # each env runner reads it in its own process (see link/secret.py).
    link_token: TokenSource = field(default_factory=TokenSource)
    # Listen on a non-loopback address without a token (refused otherwise).
    insecure: bool = False
    checkpoint_every: int = 10
    hiddens: list[int] = field(default_factory=lambda: [128, 128])
    score_hidden: int = 64  # candidate games: the move scorer's width
    hyper: Hyper | None = None  # None: Hyper.defaults(algo)
    num_env_runners: int = 0
    num_learners: int = 0
    num_gpus_per_learner: float = 0
    # Ray custom resources each env runner / learner needs: what places them on given nodes.
    env_runner_resources: dict[str, float] = field(default_factory=dict)
    learner_resources: dict[str, float] = field(default_factory=dict)
    obs_size: int | None = None
    num_actions: int | None = None
    # Prometheus metrics on this port (see trainer/metrics.py); None: none.
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    # A pretrain's output dir (`croupier pretrain`): start from its weights and version, unless
    # a checkpoint exists to resume from.
    init_weights: Path | None = None
    # Rules-anchored learning (trainer/rules_anchor.py): a run with neither a checkpoint nor
    # init weights starts from the rules' clone, when the game has rules and a simulator; the
    # learner is held near what it started from by a decaying KL term.
    rules_anchor: RulesAnchor = field(default_factory=RulesAnchor)
    # Without episodes for this long the trainer reports itself idle (log, /healthz).
    idle_after_s: float = 30.0
    # Without episodes for this long it checkpoints and stops; None: it waits forever.
    max_idle_s: float | None = None
    # After SIGTERM/SIGINT, the most seconds `croupier train` takes to checkpoint and exit
    # before it exits anyway (without the checkpoint).
    stop_grace_s: float = 60.0
    # Benchmarks only (`croupier bench overload`): a pause after each update, so the games
    # outpace the learner by a chosen factor without a bigger machine.
    update_sleep_s: float = 0.0


_EPISODE_COUNTS = (
    "episodes_received",
    "episodes_sampled",
    "episodes_dropped_stale",
    "episodes_dropped_backlog",
    "episodes_dropped_lag",
)


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
        # What /healthz reads (see `health`).
        self.state = "starting"  # starting, training, idle, stopping, stopped
        self._state_lock = threading.Lock()  # the loop, the idle watcher and signals set it
        self.iteration = 0
        self.last_checkpoint: dict[str, Any] | None = None
        # The version the newest checkpoint holds (restored or written); None: none yet.
        self.checkpointed_version: int | None = None
        self.learner_nodes: list[str] = []
        self.restored: dict[str, Any] | None = None
        self.stop_reason: str | None = None
        # Rules-anchored learning: the clone's report, and the env steps trained under the
        # anchor before this run (the coefficient's clock); None: no anchor in this run.
        self.anchor: dict[str, Any] | None = None
        self._anchor_steps0 = self._anchor_steps = 0.0
        self._anchor_release: Any = None  # rules_anchor.Release: when the anchor lets go
        # Called right after ray.init (which replaces the SIGTERM handler with its own).
        self.after_ray_init: Any = None
        # Whether this trainer started Ray itself (a local session, not `--ray-address`):
        # then its Ray processes are recorded, and stopped by the next start if left behind.
        self.own_ray = False

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
        opts.link_token.read()  # a missing, empty or short token: refused before anything
        # Checkpoints hold the weights, the optimizer state and the run's settings: owner only
        # (also what an older croupier left there with the umask's modes).
        owner_only(private_dir(Path(opts.checkpoint_dir)))
        if not ray.is_initialized():
            # Ray's token file owner-only (Ray writes a new one 0644): written here for a local
            # cluster, only tightened for one `ray start` began (`ray_token.py`).
            private_ray_token(create=not opts.ray_address)
            if opts.ray_address:
                ray.init(address=opts.ray_address)
            else:
                # Ray's processes of a trainer SIGKILLed on this dir, if any, go first.
                ray_processes.kill_leftovers(Path(opts.checkpoint_dir))
                ray.init(num_cpus=opts.num_cpus, include_dashboard=False)
                self.own_ray = True
                ray_processes.record(Path(opts.checkpoint_dir))
        if self.after_ray_init is not None:
            self.after_ray_init()
        if opts.max_idle_s is not None and opts.num_env_runners > 0:
            raise ValueError("max_idle_s needs num_env_runners=0 (it watches the local runner)")
        adapter = load_adapter(opts.game, obs_size=opts.obs_size, num_actions=opts.num_actions)
        host, port = parse_address(opts.listen)
        link = LinkOptions(
            host=host,
            port=port,
            token_file=opts.link_token.file,
            token_env=opts.link_token.env,
            max_version_lag=opts.max_version_lag,
            state_dir=str(Path(opts.checkpoint_dir).resolve()),
            insecure=opts.insecure,
            # Nothing is served before the checkpoint is restored: `_open_links` below.
            listen_at_start=False,
        )
        check_listen(link)  # before building: inside an env runner, Ray would wrap the error
        spec = ModelSpec(algo=opts.algo, hiddens=list(opts.hiddens), score_hidden=opts.score_hidden)
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
            env_runner_resources=opts.env_runner_resources,
            learner_resources=opts.learner_resources,
        )
        self.algo = config.build_algo()
        if self.own_ray:  # the workers and agents started meanwhile
            ray_processes.record(Path(opts.checkpoint_dir))
        self.learner_nodes = self._learner_nodes()
        from croupier.trainer.published import published_version

        # Read before restoring: what servers have seen, whatever the checkpoint says.
        published = published_version(Path(opts.checkpoint_dir))
        checkpoint = recover_checkpoint(Path(opts.checkpoint_dir))
        from_rules = False
        if checkpoint is not None:
            check_shapes(self.algo, checkpoint)
            self.algo.restore_from_path(str(checkpoint.resolve()))
        elif opts.init_weights is not None:
            self._start_from(Path(opts.init_weights), spec)
        elif opts.rules_anchor.enabled:
            from_rules = self._start_from_rules(adapter, spec)
        self._hold_anchor()
        self.restored, moved = continue_from_published(
            self.algo, Path(opts.checkpoint_dir), published
        )
        if checkpoint is not None or opts.init_weights is not None or moved or from_rules:
            # Hand the learner's weights (and their weights_seq_no) to the runners now, so
            # servers that connect before the first update get the resumed version.
            self.algo.env_runner_group.sync_weights(
                from_worker_or_learner_group=self.algo.learner_group, inference_only=True
            )
        if checkpoint is not None:
            self.checkpointed_version = self.restored["checkpoint_version"]
            log.info("resumed from %s at version %d", checkpoint, self.weights_seq_no())
        self._open_links()
        self._set_state("training", expect=("starting",))

    def _learner_nodes(self) -> list[str]:
        """The Ray node of each learner (the driver's when it learns itself)."""
        import ray

        if self.options.num_learners == 0:
            return [ray.get_runtime_context().get_node_id()]
        results = self.algo.learner_group.foreach_learner(
            lambda _learner: ray.get_runtime_context().get_node_id()
        )
        return [r.get() for r in results]

    def _open_links(self) -> None:
        """Let servers connect: only now, with the restored weights in place."""
        if self.options.num_env_runners == 0:
            self.algo.env_runner.start_link()
        else:
            self.algo.env_runner_group.foreach_env_runner(
                lambda r: r.start_link(), local_env_runner=False
            )

    def _start_from(self, init_dir: Path, spec: Any) -> None:
        """A pretrain's module as the start (`--init-weights`)."""
        weights = start_from_pretrain(self.algo, init_dir, spec)
        if self.options.rules_anchor.enabled:  # a pretrain clones the rules too: the reference
            from croupier.trainer.rules_anchor import save_anchor

            save_anchor(Path(self.options.checkpoint_dir), weights, {"from": str(init_dir)})

    def _start_from_rules(self, adapter: Any, spec: Any) -> bool:
        """A first start: the rules' clone, distilled through the game's simulator (or the
        one an interrupted first start already distilled), becomes version 1. False (and a
        log line saying why) for a game without rules or a simulator: it starts untrained."""
        from croupier.trainer import rules_anchor as ra
        from croupier.trainer import rules_clone as rc

        opts = self.options
        why = rc.anchorable(opts.game, adapter)
        if why is not None:
            log.warning("no rules-anchored start: %s", why)
            return False
        directory = Path(opts.checkpoint_dir)
        found = ra.load_anchor(directory)
        # At warning, the default level: the clone takes a while (doudizhu ~70 s, the
        # from-scratch Hearts' candidates ~90 s, a slot per card up to ~170 s) before the link
        # opens, and a trainer silent that long reads as hung.
        if found is None:
            budget, most = opts.rules_anchor.clone_decisions, opts.rules_anchor.clone_max_decisions
            grows = f", up to {most} while the clone misses their moves" if most > budget else ""
            log.warning("distilling the rules of %s (%d decisions%s) before the link opens...",
                        opts.game, budget, grows)  # fmt: skip
            gamma = opts.hyper.gamma if opts.hyper else 1.0
            weights, report = rc.distil(opts.game, spec, opts.rules_anchor, gamma=gamma)
            ra.save_anchor(directory, weights, report)
        else:
            weights, report = found[0], found[1].get("clone", {})
        ra.start_from(self.algo, weights, version=1)
        last = (report.get("rounds") or [{}])[-1]  # (a clone kept before rounds: none)
        log.warning("starting from the rules' clone as version 1 (fitted on %s decisions; it "
                    "misses the rules' move on %s of fresh decisions, the rules themselves on "
                    "%s; the whole report: %s)", report.get("decisions"), last.get("misses"),
                    last.get("rules_misses"), directory / ra.ANCHOR_STATE)  # fmt: skip
        log.info("the rules' clone: %s", report)
        return True

    def _hold_anchor(self) -> None:
        """The learners hold the clone the run started from (kept beside the checkpoint) as
        the KL term's reference; a run that started otherwise has none."""
        from croupier.trainer import rules_anchor as ra

        anchor = self.options.rules_anchor
        found = ra.load_anchor(Path(self.options.checkpoint_dir)) if anchor.enabled else None
        if found is None:
            return
        weights, state = found
        ra.hold_reference(self.algo, weights)
        self._anchor_steps0 = self._anchor_steps = float(state.get("env_steps", 0.0))
        self.anchor = state.get("clone") or {}
        self._anchor_release = release = ra.restored_release(state)
        ra.set_coefficients(self.algo, anchor, release.clock(self._anchor_steps0), release.released)

    def request_stop(self, reason: str = "stop requested") -> None:
        """End the run soon: the loop checkpoints and returns, a waiting sample gives up."""
        if not self.stop_requested.is_set():
            self.stop_reason = reason
        self.stop_requested.set()
        self._set_state("stopping", expect=("starting", "training", "idle"))
        runner = self._runner() if self.algo is not None else None
        if runner is not None:
            runner.request_stop()

    def _set_state(self, new: str, expect: tuple[str, ...]) -> bool:
        """Move to `new` only from one of `expect` (so a late "idle" never hides a stop)."""
        with self._state_lock:
            if self.state not in expect:
                return False
            self.state = new
            return True

    def health(self) -> dict[str, Any]:
        """Where the trainer stands, for orchestrators (`/healthz` on the metrics port)."""
        runner = self._runner()
        stats = runner.link_stats() if runner is not None else self.last_progress
        ckpt = self.last_checkpoint
        return {
            "alive": self.state not in ("stopped",),
            "state": self.state,
            "idle": self.state == "idle",
            "idle_s": stats.get("idle_s"),
            "max_idle_s": self.options.max_idle_s,
            "iteration": self.iteration,
            "version": stats.get("weights_seq_no"),
            "connected_servers": stats.get("connected_servers"),
            # The backlog: env steps waiting for the learner, and the share of the episodes
            # taken so far that were trained rather than dropped.
            "waiting_steps": stats.get("waiting_steps"),
            # Taken and not yet trained or dropped: not acknowledged, so still in the
            # servers' spools (a trainer killed now loses none of them).
            "unacked_episodes": stats.get("unacked_episodes"),
            "trained_share": trained_share(stats),
            "episodes": {k: stats.get(k) for k in _EPISODE_COUNTS},
            "last_checkpoint": None
            if ckpt is None
            else {**ckpt, "age_s": round(time.time() - ckpt["time"], 1)},
            "restored": self.restored,
            "stop_reason": self.stop_reason,
        }

    # --- views of the runner(s) ----------------------------------------------------------

    def _runner(self) -> Any:
        if self.algo is None or self.options.num_env_runners != 0:
            return None
        return self.algo.env_runner

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
        group = self.algo.env_runner_group
        per_runner = group.foreach_env_runner(lambda r: r.link_stats(), local_env_runner=False)
        check_runners(group.num_remote_env_runners(), len(per_runner))
        return merge_link_stats(per_runner)

    # --- the loop ------------------------------------------------------------------------

    def run(self, on_progress: Any = None) -> dict[str, Any]:
        from croupier.trainer.env_runner import SamplingStopped

        opts = self.options
        deadline = time.monotonic() + opts.minutes * 60 if opts.minutes else None
        timer = None
        if opts.minutes:
            # The deadline must also reach a sample() waiting inside algo.train() for episodes
            # that may no longer come (games stopped): a timer asks the run to stop.
            timer = threading.Timer(opts.minutes * 60, self.request_stop, ("--minutes",))
            timer.daemon = True
            timer.start()
        private_dir(Path(opts.checkpoint_dir))
        self._set_state("training", expect=("starting", "stopped"))  # run() may run again
        runner = self._runner()
        watcher = None
        if runner is not None:
            watcher = threading.Thread(
                target=self._watch_idle, args=(runner,), daemon=True, name="trainer-idle"
            )
            watcher.start()
        min_steps = opts.hyper.train_batch_size if opts.hyper else 1
        last: dict[str, Any] = {}
        first = self.link_stats()
        t_last, steps_last = time.monotonic(), first["steps_sampled"]
        hands_last = (first.get("hands_received", 0), first.get("hand_payoff_received", 0.0))
        lag_before: dict[int, int] = {}
        trained_last: float | None = None  # learner env steps trained, lifetime
        while not self.stop_requested.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                break
            if opts.iterations is not None and self.iteration >= opts.iterations:
                break
            # Wait here (interruptibly) rather than inside algo.train(): an idle trainer still
            # answers signals, deadlines and progress.
            if runner is not None and not runner.wait_for_steps(min_steps, 1.0):
                self._checkpoint_if_idle()
                continue
            if runner is None and not remote_runners_ready(
                self.algo.env_runner_group, min_steps, opts.algo
            ):
                self._checkpoint_if_idle()
                continue
            t_train = time.monotonic()
            try:
                result = self.algo.train()
            except SamplingStopped:
                break  # the runner gave up waiting because we are stopping
            except Exception:
                if self.stop_requested.is_set():
                    break
                raise
            self.iteration += 1
            stats = self.link_stats()
            now = time.monotonic()
            steps = stats["steps_sampled"]  # handed to the learner
            lag_now = {int(k): v for k, v in stats["lag_histogram"].items()}
            trained = learner_trained_lifetime(result)
            last = {
                "iteration": self.iteration,
                "time": time.time(),
                "version": stats["weights_seq_no"],
                "env_steps": steps,
                "env_steps_per_s": (steps - steps_last) / max(now - t_last, 1e-9),
                "episode_return_mean": result.get("env_runners", {}).get("episode_return_mean"),
                # Every hand a learned seat sat in, acted or not (RLlib's return counts only
                # the hands it acted in): over the episodes received since the last iteration.
                "payoff_per_hand": per_hand(stats, hands_last),
                "env_steps_trained": trained,
                **learner_stats(result),  # the policy's entropy, losses, critic's variance
                # Samples trained per second of algo.train() (from the second iteration on).
                "learner_steps_per_s": None
                if trained is None or trained_last is None
                else (trained - trained_last) / max(now - t_train, 1e-9),
                "lag": lag_summary(histogram_delta(lag_now, lag_before)),
                "lag_lifetime": lag_summary(lag_now),
                "trained_share": trained_share(stats),
                "learner_nodes": self.learner_nodes,
                **{k: v for k, v in stats.items() if k not in ("lag_histogram",)},
            }
            if self.anchor is not None:
                last["rules_anchor"] = self._anchor_step(result, steps - first["steps_sampled"])
            t_last, steps_last, lag_before, trained_last = now, steps, lag_now, trained
            hands_last = (stats.get("hands_received", 0), stats.get("hand_payoff_received", 0.0))
            self.last_progress, self.last_lag_histogram = last, lag_now
            with self.progress_path.open("a") as f:
                f.write(json.dumps(last, default=float) + "\n")
            if on_progress is not None:
                on_progress(last)
            if self.iteration % opts.checkpoint_every == 0:
                self.checkpoint()
            if opts.update_sleep_s > 0:
                self.stop_requested.wait(opts.update_sleep_s)
        if timer is not None:
            timer.cancel()
        self._set_state("stopping", expect=("training", "idle"))
        self.checkpoint()
        self._set_state("stopped", expect=("stopping",))
        if watcher is not None:
            watcher.join(2.0)
        if self.stop_reason is not None:
            log.info("stopped (%s) at iteration %d, version %d, checkpoint written",
                     self.stop_reason, self.iteration, self.weights_seq_no())  # fmt: skip
        return {**last, "stop_reason": self.stop_reason} if self.stop_reason else last

    def _anchor_step(self, result: dict[str, Any], steps_this_run: int) -> dict[str, Any]:
        """After an update: the KL term's coefficient for the next one (by the anchor's clock:
        the env steps trained under it, set back while the policy is below its clone), and
        what the learner measured in this one."""
        from croupier.trainer import rules_anchor as ra

        self._anchor_steps = self._anchor_steps0 + steps_this_run
        return ra.after_update(self.algo, self.options.rules_anchor, self._anchor_release,
                               self._anchor_steps, result)  # fmt: skip

    def _watch_idle(self, runner: Any) -> None:
        """Report going idle and coming back (log, `state`), and end an idle run after
        `max_idle_s`. A thread, since an idle trainer may wait inside algo.train()."""
        opts = self.options
        while self.state not in ("stopping", "stopped"):
            idle_s = runner.idle_s()
            if idle_s >= opts.idle_after_s and self._set_state("idle", expect=("training",)):
                log.warning("no episodes for %.0f s: idle, waiting for games (%s)", idle_s,
                            "for ever" if opts.max_idle_s is None
                            else f"at most {opts.max_idle_s:.0f} s")  # fmt: skip
            elif idle_s < opts.idle_after_s and self._set_state("training", expect=("idle",)):
                log.warning("episodes again: training resumes")
            if opts.max_idle_s is not None and idle_s >= opts.max_idle_s:
                log.warning("no episodes for %.0f s (max idle %.0f s): stopping",
                            idle_s, opts.max_idle_s)  # fmt: skip
                self.request_stop("max idle")
                return
            self.stop_requested.wait(min(1.0, max(0.05, opts.idle_after_s / 4)))

    def _checkpoint_if_idle(self) -> None:
        """Idle (no episode for `idle_after_s`) with a newer version published than the last
        checkpoint holds: checkpoint now. Otherwise a trainer left idle for hours restarts
        from the last `--checkpoint-every` iteration (an idle trainer stayed on v60's
        checkpoint while serving v64); the restart then goes on from the published weights
        but with the checkpoint's value function and optimizer state. Here, in the loop's own
        wait, it never runs beside an update."""
        runner = self._runner()
        idle_s = runner.idle_s() if runner is not None else self.link_stats().get("idle_s")
        if idle_s is None or idle_s < self.options.idle_after_s:
            return
        version = self.weights_seq_no()
        done = self.checkpointed_version
        if version > (done if done is not None else 0):
            self.checkpoint()
            log.info("idle: checkpointed version %d (the last checkpoint held %s)", version, done)

    def checkpoint(self) -> Path:
        """Save atomically (`checkpoints.save_checkpoint`), the anchor's clock before the swap."""

        def anchor_clock() -> None:  # the coefficient's clock, for a restart
            from croupier.trainer.rules_anchor import save_steps

            save_steps(Path(self.options.checkpoint_dir), self._anchor_steps, self._anchor_release)

        target = save_checkpoint(
            self.algo, Path(self.options.checkpoint_dir),
            anchor_clock if self.anchor is not None else None,
        )  # fmt: skip
        self.last_checkpoint = {
            "iteration": self.iteration,
            "version": self.weights_seq_no(),
            "time": time.time(),
        }
        self.checkpointed_version = self.last_checkpoint["version"]
        return target

    def close(self) -> None:
        import ray

        if self.algo is not None:
            self.algo.stop()
            self.algo = None
        if not self.options.ray_address and ray.is_initialized():
            ray.shutdown()
        if self.own_ray:
            ray_processes.forget(Path(self.options.checkpoint_dir))


def train(options: TrainOptions, quiet: bool = False) -> dict[str, Any]:
    trainer = Trainer(options)
    grace: list[threading.Timer] = []

    def on_signal(signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if trainer.stop_requested.is_set():
            log.warning("%s again: exiting now, without a checkpoint", name)
            os._exit(128 + signum)
        log.warning("%s: checkpointing and stopping (at most %.0f s)", name, options.stop_grace_s)
        trainer.request_stop(name)
        # Bounded: an orchestrator's kill must not find the trainer half way.
        timer = threading.Timer(options.stop_grace_s, _overdue, (options.stop_grace_s,))
        timer.daemon = True
        timer.start()
        grace.append(timer)

    def install_handlers() -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, on_signal)
            signal.signal(signal.SIGINT, on_signal)

    install_handlers()
    # ray.init sets its own SIGTERM handler (sys.exit: no checkpoint); ours goes back on top.
    trainer.after_ray_init = install_handlers
    quiet_ray_deprecations()
    metrics_server = None
    try:
        if options.metrics_port is not None:
            # Up before the (slow) build, so that /healthz says "starting" meanwhile.
            metrics_server = serve_trainer_metrics(
                trainer, options.metrics_port, options.metrics_host
            )
        trainer.build()
        return trainer.run(None if quiet else lambda p: print(format_progress(p), flush=True))
    finally:
        if metrics_server is not None:
            metrics_server.shutdown()
        trainer.close()
        for timer in grace:
            timer.cancel()


def _overdue(grace_s: float) -> None:
    log.error("not stopped %.0f s after the signal: exiting without a checkpoint", grace_s)
    os._exit(1)


def quiet_ray_deprecations() -> None:
    """RLlib logs (and warns) each use of an API it deprecates, many times a run, through
    paths croupier does not call directly; keep the trainer's log for croupier's own lines."""
    import warnings

    warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"ray(\.|$)")
    # Ray's `deprecation_warning` logs through this logger (a private module's name).
    from croupier.rllib_private import DEPRECATION_LOGGER

    logging.getLogger(DEPRECATION_LOGGER).setLevel(logging.ERROR)
