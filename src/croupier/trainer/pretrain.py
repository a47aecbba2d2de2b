"""`croupier pretrain --from DIR`: behaviour-clone the rules' recorded decisions (RLlib BC on its
offline API, new stack) into weights version 1, which the server serves and `croupier train
--init-weights` continues from.

The offline episodes are the Parquet files `record: rules` games write
(`trajectories/offline.py`). RLlib's default pre-learner expects the observation in one column;
ours is a Dict (observation + legal-action mask), stored as two columns, so a small pre-learner
subclass puts each row back together as a one-step episode.

Output directory:
    v00000001.npz + latest.json   the inference weights, as a server's --weights-dir holds them
    init.npz + init.json           the full module (policy and value heads) for the trainer
    pretrain.json                  what was trained on, and the measured agreement with the rules
"""

from __future__ import annotations

import gc
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from croupier.policies.module import ModelSpec

log = logging.getLogger(__name__)

INIT_WEIGHTS = "init.npz"
INIT_META = "init.json"


def _rows_to_episodes(batch: dict[str, Any]) -> list[Any]:
    """Rows of `trajectories/offline.py`'s schema → one-step episodes, Dict observations."""
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

    episodes = []
    for i in range(len(batch["actions"])):
        obs = {
            "observations": np.asarray(batch["obs"][i], np.float32),
            "action_mask": np.asarray(batch["action_mask"][i], np.float32),
        }
        new_obs = {
            "observations": np.asarray(batch["new_obs"][i], np.float32),
            "action_mask": np.asarray(batch["new_action_mask"][i], np.float32),
        }
        episode = SingleAgentEpisode(
            id_=f"{batch['eps_id'][i]}:{int(batch['t'][i])}",
            observations=[obs, new_obs],
            actions=[int(batch["actions"][i])],
            rewards=[float(batch["rewards"][i])],
            terminated=bool(batch["terminateds"][i]),
            truncated=bool(batch["truncateds"][i]),
            len_lookback_buffer=0,
        )
        episode.to_numpy()
        episodes.append(episode)
    return episodes


def _prelearner_class() -> type:
    from croupier.rllib_private import prelearner_class

    return prelearner_class(_rows_to_episodes, "RulesEpisodesPreLearner")


def bc_config(
    game: str,
    data_dir: Path,
    spec: ModelSpec,
    lr: float = 1e-3,
    batch_size: int = 512,
    iters_per_step: int = 20,
) -> Any:
    from ray.rllib.algorithms.bc import BCConfig

    from croupier.games.registry import load_adapter

    adapter = load_adapter(game)
    files = sorted(str(p.resolve()) for p in Path(data_dir).glob("*.parquet"))
    if not files:
        raise FileNotFoundError(f"no .parquet episodes in {data_dir} (record: rules writes them)")
    return (
        BCConfig()
        .environment(observation_space=adapter.observation_space, action_space=adapter.action_space)
        .rl_module(rl_module_spec=spec.rl_module_spec())
        .offline_data(
            input_=files,
            input_read_method="read_parquet",
            prelearner_class=_prelearner_class(),
            dataset_num_iters_per_learner=iters_per_step,
            map_batches_kwargs={"concurrency": 1, "num_cpus": 1},
            iter_batches_kwargs={"prefetch_batches": 1},
        )
        .training(lr=lr, train_batch_size_per_learner=batch_size)
        .learners(num_learners=0)
        .env_runners(num_env_runners=0)
        .reporting(min_time_s_per_iteration=0)
    )


def rules_agreement(
    game: str, spec: ModelSpec, weights: dict[str, np.ndarray], hands: int = 300, seed: int = 1
) -> dict[str, Any]:
    """How often the policy's most likely action is the rules' action, on fresh states (the
    rules against random play, so states off the rules' own path are included)."""
    from croupier.games.registry import load_adapter, load_simulator
    from croupier.policies.learned import PolicyVersions

    table = load_simulator(game)  # any game with a simulator
    adapter = load_adapter(game)  # the given adapter, not only the table's default
    rules = adapter.rules()
    versions = PolicyVersions(adapter, spec)
    versions.install(1, weights)
    _, module = versions.resolve(1)
    rng = np.random.default_rng(seed)
    obs_rows, masks, wanted = [], [], []
    for hand in range(hands):
        table.reset(seed * 100_003 + hand)
        rules_seat = hand % adapter.num_players
        while not table.is_over():
            player = table.current_player()
            state = table.state(player)
            action = rules(state)
            if player == rules_seat:
                obs, mask = adapter.encode(state)
                obs_rows.append(obs)
                masks.append(mask)
                wanted.append(adapter.action_index(action, state))
            else:
                action = state["legal_actions"][int(rng.integers(len(state["legal_actions"])))]
            table.step(action)
    act = versions.act(module, np.stack(obs_rows), np.stack(masks), explore=False)
    agree = act.actions == np.asarray(wanted)
    return {"decisions": int(agree.size), "agreement": float(agree.mean())}


def pretrain(
    game: str,
    data_dir: Path,
    out_dir: Path,
    spec: ModelSpec,
    iterations: int = 10,
    lr: float = 1e-3,
    batch_size: int = 512,
    iters_per_step: int = 20,
    version: int = 1,
) -> dict[str, Any]:
    """Run BC for `iterations` training steps; write version `version` to `out_dir`."""
    import ray
    import torch

    from croupier.games.registry import load_adapter
    from croupier.policies.learned import PolicyVersions

    torch.set_num_threads(1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    started_ray = not ray.is_initialized()
    if started_ray:
        from croupier.trainer.ray_token import private_ray_token

        private_ray_token()  # Ray's own would be 0644
        ray.init(num_cpus=2, include_dashboard=False)
    t0 = time.monotonic()
    algo = bc_config(game, data_dir, spec, lr, batch_size, iters_per_step).build_algo()
    try:
        losses = []
        for _ in range(iterations):
            result = algo.train()
            losses.append(_policy_loss(result))
        from ray.rllib.core import DEFAULT_MODULE_ID

        state = algo.learner_group.get_weights([DEFAULT_MODULE_ID])[DEFAULT_MODULE_ID]
        full = {k: np.asarray(getattr(v, "cpu", lambda v=v: v)()) for k, v in state.items()}
    finally:
        algo.stop()
        # Close the dataset iterators while Ray is still up (else they complain at exit).
        del algo
        gc.collect()
        if started_ray:
            ray.shutdown()
    seconds = time.monotonic() - t0

    adapter = load_adapter(game)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    versions = PolicyVersions(adapter, spec, weights_dir=out_dir)
    inference_keys = versions.weights(0).keys()
    versions.install(version, {k: full[k] for k in inference_keys})
    np.savez(out_dir / INIT_WEIGHTS, **full)
    (out_dir / INIT_META).write_text(
        json.dumps({"version": version, "spec": spec.to_dict(), "file": INIT_WEIGHTS})
    )
    report = {
        "game": game,
        "from": str(data_dir),
        "version": version,
        "iterations": iterations,
        "seconds": seconds,
        "policy_loss": losses,
        "model": spec.to_dict(),
        "rules_agreement": rules_agreement(game, spec, versions.weights(version)),
    }
    (out_dir / "pretrain.json").write_text(json.dumps(report, indent=2, default=float))
    return report


def _policy_loss(result: dict[str, Any]) -> float | None:
    learners = result.get("learners", {})
    for key in ("default_policy", "__all_modules__"):
        stats = learners.get(key, {})
        for name in ("policy_loss", "total_loss"):
            if name in stats:
                return float(stats[name])
    return None


def read_init_weights(path: Path) -> tuple[ModelSpec, dict[str, np.ndarray], int]:
    """The full module a pretrain wrote (`croupier train --init-weights DIR`): (model,
    weights, version)."""
    path = Path(path)
    meta = json.loads((path / INIT_META).read_text())
    with np.load(path / meta["file"], allow_pickle=False) as data:
        weights = {k: data[k] for k in data.files}
    return ModelSpec.from_dict(meta["spec"]), weights, int(meta["version"])
