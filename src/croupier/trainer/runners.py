"""The trainer's view of its remote env runners (`--num-env-runners` > 0): their link
counters merged into one, each runner's own beside them, whether enough episodes wait for an
update, and a runner lost said as such."""

from __future__ import annotations

from typing import Any

# Per remote runner in the progress line (`runners`): its Ray node and its own traffic.
RUNNER_KEYS = (
    "worker_index",
    "node_id",
    "port",
    "connected_servers",
    "weights_seq_no",
    "episodes_received",
    "steps_received",
    "steps_sampled",
)
# A runner's own, not summed over runners.
RUNNER_OWN = ("worker_index", "node_id", "port")


class EnvRunnerLost(RuntimeError):
    """A remote env runner died (its process or its node): the games it listened for have
    no trainer side, so the run ends here with this, not later on a missing counter."""


def check_runners(configured: int, answering: int) -> None:
    """Raise `EnvRunnerLost` when fewer remote env runners answer than were started. Not
    restarted: a runner's link port and the servers pointed at it belong to that process
    (docs/scale-out.md: restart the trainer; it resumes from its checkpoint)."""
    if answering < configured:
        raise EnvRunnerLost(
            f"{configured - answering} of {configured} env runners died (see the Ray log "
            "above); restart the trainer: it resumes from its last checkpoint"
        )


def merge_link_stats(per_runner: list[dict[str, Any]]) -> dict[str, Any]:
    """One set of link counters for the whole trainer: summed over the runners (the lag
    histogram per lag), idle when every runner is, the newest version any holds, and each
    runner's own under `runners`."""
    merged: dict[str, Any] = {"lag_histogram": {}}
    for stats in per_runner:
        for k, v in stats.items():
            if k == "lag_histogram":
                for lag, n in v.items():
                    merged[k][lag] = merged[k].get(lag, 0) + n
            elif k == "idle_s":  # the fleet is idle when every runner is
                merged[k] = min(merged.get(k, v), v)
            elif isinstance(v, int | float) and k not in RUNNER_OWN:
                merged[k] = merged.get(k, 0) + v
    merged["weights_seq_no"] = max((s["weights_seq_no"] for s in per_runner), default=0)
    # Each runner on its own: where Ray placed it and what came through it.
    merged["runners"] = [{k: s.get(k) for k in RUNNER_KEYS} for s in per_runner]
    return merged


def remote_runners_ready(group: Any, steps: int, algo: str) -> bool:
    """Remote runners: enough episodes wait for an update (PPO samples every runner and
    waits for each: all of them; APPO takes what any has). Asked with a timeout, outside
    algo.train(): a remote sample() waiting for games that stopped cannot be interrupted
    (an actor runs one call at a time), and a SIGTERM then found the trainer stuck inside
    algo.train() past its grace, without a checkpoint (tests/test_multinode.py, before)."""
    ready = group.foreach_env_runner(
        lambda r: r.wait_for_steps(steps, 0.5), local_env_runner=False, timeout_seconds=2.0
    )
    check_runners(group.num_remote_env_runners(), group.num_healthy_remote_env_runners())
    if algo == "ppo":
        return len(ready) == group.num_remote_env_runners() and all(ready)
    return any(ready)
