"""The candidate-scoring RLModule: padding masked, logits recomputed exactly by the learner."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.utils.torch_utils import FLOAT_MIN

from croupier.policies.candidates import (
    CandidateAPPOModule,
    CandidatePPOModule,
    candidate_module_spec,
)
from croupier.policies.module import logits_agree

OBS, K, F = 12, 9, 54


def space(k: int = K) -> gym.spaces.Dict:
    return gym.spaces.Dict(
        {
            "observations": gym.spaces.Box(-np.inf, np.inf, (OBS,), np.float32),
            "candidates": gym.spaces.Box(-np.inf, np.inf, (k, F), np.float32),
            "candidate_mask": gym.spaces.Box(0.0, 1.0, (k,), np.float32),
        }
    )


def build(algo: str = "ppo", k: int = K):
    torch.manual_seed(0)
    spec = candidate_module_spec(algo, space(k), gym.spaces.Discrete(k), hiddens=[32, 32],
                                 score_hidden=16)  # fmt: skip
    return spec.build()


def decisions(n: int, seed: int, k: int = K) -> list[dict[str, np.ndarray]]:
    """n decisions with 1..k real candidates each (multi-hot rows), zero padding after."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        count = int(rng.integers(1, k + 1))
        cands = np.zeros((k, F), np.float32)
        cands[:count] = rng.random((count, F)) < 0.1
        mask = np.zeros(k, np.float32)
        mask[:count] = 1.0
        out.append({"observations": rng.standard_normal(OBS).astype(np.float32),
                    "candidates": cands, "candidate_mask": mask})  # fmt: skip
    return out


def batch(rows: list[dict[str, np.ndarray]]) -> dict:
    return {Columns.OBS: {key: torch.from_numpy(np.stack([r[key] for r in rows]))
                          for key in rows[0]}}  # fmt: skip


@pytest.mark.parametrize("algo", ["ppo", "appo"])
def test_learner_recomputes_the_acting_logits(algo):
    module = build(algo)
    rows = decisions(64, seed=1)
    # Act as env runners do: small batches of decisions with different candidate counts.
    acted_logits, actions, logps = [], [], []
    with torch.no_grad():
        for start in range(0, len(rows), 5):
            part = rows[start : start + 5]
            logits = module.forward_exploration(batch(part))[Columns.ACTION_DIST_INPUTS]
            dist = torch.distributions.Categorical(logits=logits)
            a = dist.sample()
            acted_logits.append(logits)
            actions.append(a)
            logps.append(dist.log_prob(a))
    acted = torch.cat(acted_logits)
    action, logp = torch.cat(actions), torch.cat(logps)
    mask = torch.from_numpy(np.stack([r["candidate_mask"] for r in rows]))
    assert (mask.gather(1, action[:, None]) == 1).all(), "sampled a padded slot"
    assert (acted[mask == 0] == FLOAT_MIN).all()

    # The learner: the whole batch in a shuffled order, with gradients.
    perm = np.random.default_rng(2).permutation(len(rows))
    out = module.forward_train(batch([rows[i] for i in perm]))
    train_logits = out[Columns.ACTION_DIST_INPUTS]
    assert train_logits.requires_grad
    # To float32 rounding (`LOGITS_RTOL`): the learner's batch is not the acting one.
    assert logits_agree(train_logits.detach().numpy(), acted[perm].numpy())
    train_logp = torch.distributions.Categorical(logits=train_logits).log_prob(action[perm])
    assert logits_agree(train_logp.detach().numpy(), logp[perm].numpy())
    values = module.compute_values(batch(rows))
    assert values.shape == (len(rows),)


def test_padding_width_does_not_change_the_real_candidates_logits():
    narrow, wide = build(k=K), build(k=4 * K)
    wide.load_state_dict(narrow.state_dict())
    rows = decisions(16, seed=3)
    padded = []
    for r in rows:
        cands = np.zeros((4 * K, F), np.float32)
        cands[:K] = r["candidates"]
        mask = np.zeros(4 * K, np.float32)
        mask[:K] = r["candidate_mask"]
        padded.append({**r, "candidates": cands, "candidate_mask": mask})
    with torch.no_grad():
        a = narrow.forward_inference(batch(rows))[Columns.ACTION_DIST_INPUTS]
        b = wide.forward_inference(batch(padded))[Columns.ACTION_DIST_INPUTS]
    torch.testing.assert_close(b[:, :K], a, rtol=0, atol=1e-6)
    assert (b[:, K:] == FLOAT_MIN).all()


def test_softmax_only_over_real_candidates_and_gradients_skip_padding():
    module = build()
    rows = decisions(8, seed=4)
    logits = module.forward_train(batch(rows))[Columns.ACTION_DIST_INPUTS]
    probs = torch.softmax(logits, -1)
    mask = torch.from_numpy(np.stack([r["candidate_mask"] for r in rows]))
    assert (probs[mask == 0] == 0).all()
    torch.testing.assert_close(probs.sum(-1), torch.ones(len(rows)))
    # Junk in padded slots must not change anything.
    junk = [{**r, "candidates": np.where(r["candidate_mask"][:, None] > 0, r["candidates"], 7.0)
             .astype(np.float32)} for r in rows]  # fmt: skip
    with torch.no_grad():
        assert torch.equal(module.forward_inference(batch(junk))[Columns.ACTION_DIST_INPUTS],
                           logits.detach())  # fmt: skip


def test_appo_target_network_follows_the_module():
    module = build("appo")
    assert isinstance(module, CandidateAPPOModule) and isinstance(module, CandidatePPOModule)
    module.make_target_networks()
    rows = decisions(6, seed=5)
    with torch.no_grad():
        own = module.forward_inference(batch(rows))[Columns.ACTION_DIST_INPUTS]
        target = module.forward_target(batch(rows))
    (tgt,) = target.values()
    assert torch.equal(own, tgt)


def test_refuses_a_space_without_candidates():
    bad = gym.spaces.Dict({"observations": gym.spaces.Box(0, 1, (3,), np.float32)})
    with pytest.raises(ValueError):
        candidate_module_spec("ppo", bad, gym.spaces.Discrete(3)).build()
    with pytest.raises(ValueError):
        candidate_module_spec("ppo", space(), gym.spaces.Discrete(K + 1)).build()


@pytest.mark.parametrize("width_in,width_out", [(399, 128), (161, 64), (353, 256), (12, 16)])
def test_a_rows_result_agrees_in_any_batch_to_float32_rounding(width_in, width_out):
    """A row's result alone, in batches of any size and in any order agrees to
    `LOGITS_RTOL` (not bit for bit: kernels depend on shape and CPU). And the tolerance is
    tight enough to catch a real mistake: another input row, or weights off by one step of
    training, are far outside it."""
    torch.manual_seed(width_in)
    layer = torch.nn.Linear(width_in, width_out)
    x = torch.randn(300, width_in)
    with torch.no_grad():
        full = layer(x).numpy()
        for n in (1, 2, 3, 5, 9, 17, 64, 65, 300):
            assert logits_agree(layer(x[:n]).numpy(), full[:n]), n
            assert logits_agree(layer(x[:n].flip(0)).numpy(), full[:n][::-1]), n
        alone = np.concatenate([layer(x[i : i + 1]).numpy() for i in range(0, 300, 7)])
        assert logits_agree(alone, full[::7])
        assert not logits_agree(layer(x[1:2]).numpy(), full[:1])
        nudged = torch.nn.Linear(width_in, width_out)
        nudged.load_state_dict(layer.state_dict())
        nudged.weight.add_(1e-3 * torch.randn_like(nudged.weight))  # a small learning step
        assert not logits_agree(nudged(x[:9]).numpy(), full[:9])
