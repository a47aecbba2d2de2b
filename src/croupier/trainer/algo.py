"""Build the RLlib Algorithm that learns from the policy servers' episodes.

No environment lives in the trainer: the spaces come from the game adapter, the samples from
`LinkEnvRunner`, the network is croupier's masked module. APPO (V-trace corrects the lag of
episodes played with older weights) is the default; PPO stays selectable. `anchor_config` is
the same algorithm on the same module stepping the game in-process: the benchmark's anchor.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from functools import partial
from typing import Any

from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.algorithms.appo import APPOConfig
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.connectors.connector_v2 import ConnectorV2

from croupier.games.base import GameAdapter
from croupier.games.candidates import is_candidate_game
from croupier.games.presets import TrainingPreset
from croupier.policies.module import ModelSpec
from croupier.policies.tables import RULES_TABLE
from croupier.trainer.candidate_slots import CandidateSlots
from croupier.trainer.distill import DEFAULT_DISTILL_COEFF, DISTILL_COEFF
from croupier.trainer.env_runner import LinkEnvRunner, LinkOptions
from croupier.trainer.hand_returns import HandReturns
from croupier.trainer.rules_tables import RulesTables

# The most train batches of a candidate game's steps waiting in the trainer's memory.
CANDIDATE_BACKLOG_BATCHES = 4


@dataclass
class Hyper:
    """Training hyperparameters; `Hyper.defaults(algo)` gives what learned leduc-holdem
    against its rules fastest on a 2-core machine (docs/training.md)."""

    lr: float = 1e-3
    gamma: float = 1.0
    train_batch_size: int = 128
    minibatch_size: int = 500  # PPO
    num_epochs: int = 4  # PPO
    entropy_coeff: float = 0.01
    vf_loss_coeff: float = 0.5
    # PPO: RLlib's own KL penalty between the policy before and after an update, its
    # coefficient adapted toward this mean KL (RLlib's `use_kl_loss`, `kl_target`); 0: off,
    # the clip alone bounds an update.
    kl_target: float = 0.0
    # The most one learner update takes, in train batches of the oldest waiting env steps;
    # the rest waits for the next updates (see `EpisodeInbox.take`). None: everything
    # received. PPO needs it: its update blocks sampling and grows with the sample, so a
    # learner slower than the games fell further behind with every update.
    max_sample_batches: float | None = None
    # Waiting episodes more versions behind than this when sampled are dropped (counted);
    # None: none are. What bounds the staleness of a backlog trained after an outage.
    max_sample_lag: int | None = None
    # An update needs episodes played within this many versions; None: any will do. Without
    # it, a trainer restarted after the games stopped trained its backlog alone, update after
    # update on data ever more versions old, and pushed the result (bench outage: +0.74 per
    # hand down to +0.16 in 17 such updates).
    fresh_lag: int | None = None
    # The most env steps waiting in the trainer's memory; past it the oldest are dropped
    # (counted). None: no bound.
    backlog_max_steps: int | None = None
    # Expert iteration: the weight of the cross-entropy toward a search's labels, on the rows
    # a search labelled (`trainer/distill.py`); 0: off. Without labels it adds nothing.
    distill_coeff: float = DEFAULT_DISTILL_COEFF
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def defaults(cls, algo: str) -> Hyper:
        if algo == "ppo":
            return cls(
                lr=5e-4,
                train_batch_size=4000,
                minibatch_size=500,
                num_epochs=4,
                max_sample_batches=2.0,
                # A 60 s outage at ~1,300 steps/s is ~20 batches, drained in ~17 updates by a
                # learner twice as fast as the games: 32 leaves a margin of two
                # (docs/trainer-lifecycle.md). ~1 KB per waiting step: 256k steps ~ 250 MB.
                max_sample_lag=32,
                # Steady-state lag is 0-1 version (p90 1 in bench train): 2 never holds fresh
                # games back, and a backlog left alone waits for them.
                fresh_lag=2,
                backlog_max_steps=262_144,
            )
        # APPO in ray 2.60 takes one gradient step per train batch: small batches learn faster.
        return cls(lr=1e-3, train_batch_size=128)


# The network's settings a run may override; every other override is a `Hyper` field.
MODEL_SETTINGS = ("hiddens", "score_hidden")

# PPO's passes over each batch for a game that scores candidates and has no preset: 2, not
# `Hyper.defaults`' 4. Its update runs the scorer over every legal move of every step, and
# through the external path the learner shares the cores with the games: fewer passes leave
# more of them to playing. Crazy eights' candidates, 30 min from the clone, one core each:
# -0.018 sampled / +0.014 greedy and 0.0 minutes below the rules' record with 2, -0.031 /
# -0.021 and 10.0 minutes below with 4; declared doudizhu likewise (its preset, 2 since).
CANDIDATE_EPOCHS = 2


def training_defaults(
    game: str,
    algo: str | None = None,
    overrides: dict[str, Any] | None = None,
    preset: TrainingPreset | None = None,
) -> tuple[ModelSpec, Hyper]:
    """The network and hyperparameters a run of `game` starts from: `preset` if given (a
    preset file's: `croupier train --preset`), else the game's (`games/presets.py`), else the
    algorithm's own defaults, then `overrides` over them (`MODEL_SETTINGS` for the network,
    else `Hyper` field names; ValueError on any other). `algo` other than the preset's keeps
    the preset's network but that algorithm's defaults (a preset is measured for one
    algorithm). What `croupier train` and the in-process anchors all use: like for like."""
    from croupier.games.presets import DEFAULT_ALGO, preset_for

    given = preset
    preset = preset_for(game) if given is None else given
    algo = algo or (preset.algo if preset else DEFAULT_ALGO)
    hyper = Hyper.defaults(algo)
    if given is None:
        spec = ModelSpec.for_game(game, algo)
    else:
        spec = ModelSpec(algo=algo, hiddens=list(given.hiddens), score_hidden=given.score_hidden)
    if preset is None and algo == "ppo" and _scores_candidates(game):
        hyper.num_epochs = CANDIDATE_EPOCHS
    if preset is not None and preset.algo == algo:
        hyper.lr, hyper.entropy_coeff = preset.lr, preset.entropy_coeff
        hyper.gamma, hyper.train_batch_size = preset.gamma, preset.train_batch_size
        hyper.minibatch_size, hyper.num_epochs = preset.minibatch_size, preset.num_epochs
        if algo == "ppo":
            hyper.extra = {**hyper.extra, "lambda_": preset.lambda_}
    overrides = dict(overrides or {})
    model = {k: overrides.pop(k) for k in MODEL_SETTINGS if k in overrides}
    unknown = sorted(k for k in overrides if k not in {f.name for f in fields(Hyper)})
    if unknown:
        raise ValueError(f"unknown training settings {unknown}")
    for name, value in overrides.items():
        setattr(hyper, name, value)
    if not hyper.kl_target >= 0:
        raise ValueError(f"kl_target: 0 (off) or a mean KL above it, got {hyper.kl_target!r}")
    if not hyper.distill_coeff >= 0:
        raise ValueError(f"distill_coeff: 0 (off) or above, got {hyper.distill_coeff!r}")
    if "hiddens" in model:
        model["hiddens"] = list(model["hiddens"])
    return replace(spec, **model), hyper


def _scores_candidates(game: str) -> bool:
    """Whether `game`'s adapter scores candidate moves. False for a name `load_adapter`
    refuses (`vector` without its sizes, which the trainer passes later; an unknown name,
    refused there with its own message); a module or class that is not there was already
    raised by `preset_for`."""
    from croupier.games.candidates import is_candidate_game
    from croupier.games.registry import load_adapter

    try:
        return is_candidate_game(load_adapter(game))
    except ValueError:
        return False


def learner_pieces(
    observation_space: Any = None,
    action_space: Any = None,
    *,
    gamma: float = 1.0,
    candidate_slots: bool = False,
    untagged_table: str = "",
) -> list[ConnectorV2]:
    """The learner connector pieces RLlib runs before its own (module-level, bound by
    `functools.partial`: the builder is pickled to remote learners): a candidate game's
    episodes padded to the update's largest slot count, each whole hand's return and whether
    it was played at a rules table (the rules anchor's evidence; `untagged_table`: where an
    episode that does not say was played)."""
    slots: list[ConnectorV2] = [CandidateSlots()] if candidate_slots else []
    return [*slots, HandReturns(gamma=gamma), RulesTables(untagged=untagged_table)]


def base_config(
    spec: ModelSpec,
    hyper: Hyper,
    observation_space: Any = None,
    action_space: Any = None,
    candidate_slots: bool = False,
    untagged_table: str = "",
) -> AlgorithmConfig:
    """Algorithm, module and training settings, shared by the trainer and the anchor. The
    spaces, where given, choose the network (a candidate space: the candidate scorer);
    `untagged_table`: the table kind of episodes that carry none (`learner_pieces`)."""
    if spec.algo == "appo":
        config: AlgorithmConfig = APPOConfig()
        training: dict[str, Any] = {"vtrace": True, "use_kl_loss": False}
    elif spec.algo == "ppo":
        config = PPOConfig()
        training = {
            "num_epochs": hyper.num_epochs,
            "minibatch_size": hyper.minibatch_size,
            "use_kl_loss": hyper.kl_target > 0,
        }
        if hyper.kl_target > 0:  # RLlib's starting coefficient, adapted from there
            training.update(kl_target=hyper.kl_target, kl_coeff=0.2)
    else:
        raise ValueError(f"unknown algorithm {spec.algo!r}: appo or ppo")
    from croupier.trainer.learners import LEARNER_CLASSES

    return (
        config.rl_module(rl_module_spec=spec.rl_module_spec(observation_space, action_space))
        # RLlib's own learner plus the rules anchor's KL term, which stays out of the loss
        # until a reference is held (trainer/rules_anchor.py), and the search's labels'
        # cross-entropy, nothing without labels (trainer/distill.py): one learner class.
        .learners(
            learner_class=LEARNER_CLASSES[spec.algo],
            learner_config_dict={DISTILL_COEFF: hyper.distill_coeff},
            learner_connector=partial(
                learner_pieces,
                gamma=hyper.gamma,
                candidate_slots=candidate_slots,
                untagged_table=untagged_table,
            ),
        )
        .training(
            lr=hyper.lr,
            gamma=hyper.gamma,
            train_batch_size_per_learner=hyper.train_batch_size,
            entropy_coeff=hyper.entropy_coeff,
            vf_loss_coeff=hyper.vf_loss_coeff,
            **training,
            **hyper.extra,
        )
        .reporting(metrics_num_episodes_for_smoothing=200, min_time_s_per_iteration=2)
    )


def build_config(
    adapter: GameAdapter,
    link: LinkOptions,
    spec: ModelSpec,
    hyper: Hyper | None = None,
    num_env_runners: int = 0,
    num_learners: int = 0,
    num_gpus_per_learner: float = 0,
    env_runner_resources: dict[str, float] | None = None,
    learner_resources: dict[str, float] | None = None,
) -> AlgorithmConfig:
    hyper = hyper or Hyper.defaults(spec.algo)
    backlog = hyper.backlog_max_steps
    if is_candidate_game(adapter):
        # A waiting step holds its candidates padded to its episode's largest count (a
        # doudizhu step up to 512 x 161 floats, 330 KB; a fixed-size game's step is ~1 KB):
        # a few train batches at most.
        cap = CANDIDATE_BACKLOG_BATCHES * hyper.train_batch_size
        backlog = cap if backlog is None else min(backlog, cap)
    # IMPALA/APPO counts every `sample()` result as `rollout_fragment_length` steps when it
    # packs learner batches, and our runner returns at least `sample_min_steps`: make them one
    # train batch, so each sample is one learner update.
    link = LinkOptions(
        **{
            **asdict(link),
            "game": adapter.name,
            "model": spec.to_dict(),
            "sample_min_steps": hyper.train_batch_size,
            "sample_max_steps": int(hyper.max_sample_batches * hyper.train_batch_size)
            if hyper.max_sample_batches
            else None,
            "max_sample_lag": hyper.max_sample_lag,
            "fresh_lag": hyper.fresh_lag,
            "backlog_max_steps": backlog,
            # PPO's update is synchronous: the next version means the update that used a
            # sample has completed. APPO's learner queues a sample and trains it in the
            # background: one version later it may still wait there, so its ack waits for two.
            "ack_after_versions": 1 if spec.algo == "ppo" else 2,
        }
    )
    # PPO: one iteration is one update and one version, and the trainer's loop (which waits
    # for a train batch outside algo.train(), interruptibly) runs between any two updates.
    # RLlib repeats updates within an iteration until min_time_s_per_iteration: at 2 s, PPO
    # versions went up by 2 per progress line, and an iteration could wait inside sample().
    min_time_s = 0 if spec.algo == "ppo" else 2
    return (
        base_config(
            spec,
            hyper,
            adapter.observation_space,
            adapter.action_space,
            # Episodes come padded to their own largest candidate count: one per update.
            candidate_slots=is_candidate_game(adapter),
        )
        .reporting(min_time_s_per_iteration=min_time_s)
        .environment(
            observation_space=adapter.observation_space,
            action_space=adapter.action_space,
            env_config={"croupier": asdict(link)},
        )
        .env_runners(
            env_runner_cls=LinkEnvRunner,
            num_env_runners=num_env_runners,
            rollout_fragment_length=hyper.train_batch_size,
            custom_resources_per_env_runner=dict(env_runner_resources or {}),
        )
        .learners(
            num_learners=num_learners,
            num_gpus_per_learner=num_gpus_per_learner,
            custom_resources_per_learner=dict(learner_resources or {}),
        )
    )


def anchor_config(
    game: str,
    spec: ModelSpec,
    hyper: Hyper | None = None,
    num_envs: int = 64,
    env_config: dict[str, Any] | None = None,
) -> AlgorithmConfig:
    """The same algorithm and module stepping the game in-process (learner vs the rules, or
    the opponent `env_config` names: `engine/seat_env.py`)."""
    from croupier.engine.seat_env import SeatEnv
    from croupier.games.registry import load_adapter

    hyper = hyper or Hyper.defaults(spec.algo)
    adapter = load_adapter(game)  # its spaces choose the module (candidates or masked)
    env_config = {"game": game, "opponent": "rules", **(env_config or {})}
    # Every episode the seat env makes is at one table: the rules', or another opponent's.
    table = RULES_TABLE if env_config["opponent"] == "rules" else str(env_config["opponent"])
    return (
        base_config(
            spec, hyper, adapter.observation_space, adapter.action_space, untagged_table=table
        )
        .environment(SeatEnv, env_config=env_config)
        .env_runners(num_env_runners=0, num_envs_per_env_runner=num_envs)
    )
