"""`croupier export --format onnx`: a served version as an ONNX file, for a game's own runtime.

Studios that ship a policy inside the game (Unity Sentis, ONNX Runtime for C#, JavaScript or
C++) need the network, not a server. The file takes what the server's network takes and gives
what it gives, the masked logits:

    inputs  observations float32[batch, obs_size], action_mask float32[batch, num_actions]
    output  logits       float32[batch, num_actions]   (illegal actions at -3.4e38)

traced through the module's own forward (the one the server calls), so the mask is applied by
the same formula. The server samples from softmax(logits) (a greedy player takes the argmax).

A game of scored candidates (`policies/candidates.py`: doudizhu, UNO, a toolkit game whose moves
are card sets) has a variable number of legal moves per state, each described by features; its
file scores one state's moves:

    inputs  observations float32[1, obs_size], candidates float32[K, candidate_size]
    output  logits       float32[K]            (one per legal move, in the engine's order)

with the adapter's `encode` giving both inputs (the state's features and its legal moves').

A JSON beside it (`policy.json`) says the sizes, a fixed head's action names in index order (a
declared card game's: its slots, `CardGame.slot_names`; null for candidates, whose logits are
the state's legal moves) and where the weights came from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from ray.rllib.utils.torch_utils import FLOAT_MIN

from croupier.games.base import GameAdapter
from croupier.games.candidates import is_candidate_game
from croupier.policies.module import MODULE_CLASSES, ModelSpec, build_inference_module
from croupier.policies.weights_file import read_weights, weights_path, write_json
from croupier.rllib_private import forward_logits

OPSET = 17
CHANNEL_SUBDIR = "channels"  # policies/rollout/channels.py keeps promoted versions there


class ExportError(ValueError):
    """A version that cannot be exported (a clear message for the command line)."""


class _MaskedLogits(torch.nn.Module):
    """(observations, action_mask) -> masked logits, through the module's own forward."""

    def __init__(self, module: Any):
        super().__init__()
        self.module = module

    def forward(self, observations: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
        batch = {"obs": {"observations": observations, "action_mask": action_mask}}
        return forward_logits(self.module, batch)


class _CandidateLogits(torch.nn.Module):
    """(observations [1, S], candidates [K, F]) -> logits [K], through the module's own
    `CandidateNet` (the server's `score_pairs`: every candidate scored against the one state)."""

    def __init__(self, module: Any):
        super().__init__()
        self.net = module.net

    def forward(self, observations: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        h = self.net.embed(observations)
        rows = torch.zeros_like(candidates[:, 0], dtype=torch.long)  # every move: state 0
        return self.net.score_pairs(h, candidates, rows)


def load_version(weights_dir: Path, version: int, adapter: GameAdapter) -> tuple[ModelSpec, Any]:
    """Version `version` of a server's weights dir (or its production channel's copies) as a
    served module, with its spec from `latest.json`."""
    try:
        meta = json.loads((weights_dir / "latest.json").read_text())
        spec = ModelSpec.from_dict(meta["spec"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ExportError(f"{weights_dir} has no readable latest.json: {e}") from None
    if spec.algo not in MODULE_CLASSES:
        raise ExportError(
            f"model {spec.algo!r} is not one croupier trains; only {sorted(MODULE_CLASSES)} export"
        )
    for folder in (weights_dir, weights_dir / CHANNEL_SUBDIR):
        path = weights_path(folder, version)
        if path.exists():
            break
    else:
        raise ExportError(f"version {version} is not in {weights_dir} (nor in its channels/)")
    weights = read_weights(path)  # UnreadableWeights (a ValueError) for a damaged file
    module = build_inference_module(spec, adapter.observation_space, adapter.action_space)
    try:
        module.load_state_dict({k: torch.as_tensor(v) for k, v in weights.items()})
    except (RuntimeError, KeyError) as e:
        raise ExportError(f"version {version} does not fit {adapter.name}'s model: {e}") from None
    return spec, module


def export_onnx(weights_dir: Path, version: int, adapter: GameAdapter, out: Path) -> dict[str, Any]:
    """Write `out/policy.onnx` and `out/policy.json`; returns what the JSON says."""
    spec, module = load_version(Path(weights_dir), version, adapter)
    out.mkdir(parents=True, exist_ok=True)
    onnx_path = out / "policy.onnx"
    if is_candidate_game(adapter):
        size = int(adapter.candidate_size)  # type: ignore[attr-defined]
        graph: torch.nn.Module = _CandidateLogits(module)
        example = (torch.zeros(1, adapter.obs_size), torch.zeros(2, size))
        inputs = {"observations": [1, adapter.obs_size], "candidates": ["candidates", size]}
        outputs = {"logits": ["candidates"]}
        axes = {"candidates": {0: "candidates"}, "logits": {0: "candidates"}}
        play = (
            "one state at a time: the state's features and its K legal moves' features, as the "
            "adapter's encode gives them; greedy: the move at argmax(logits); as the server: "
            "sample from softmax(logits)"
        )
    else:
        graph = _MaskedLogits(module)
        example = (torch.zeros(1, adapter.obs_size), torch.ones(1, adapter.num_actions))
        inputs = {
            "observations": ["batch", adapter.obs_size],
            "action_mask": ["batch", adapter.num_actions],
        }
        outputs = {"logits": ["batch", adapter.num_actions]}
        axes = {name: {0: "batch"} for name in ("observations", "action_mask", "logits")}
        play = "greedy: argmax(logits); as the server: sample from softmax(logits)"
    with torch.inference_mode(False), torch.no_grad():
        # The TorchScript exporter (dynamo=False): the graph is a small MLP, and the dynamo
        # exporter would need onnxscript as another dependency for nothing more.
        torch.onnx.export(
            graph,
            example,
            str(onnx_path),
            input_names=list(inputs),
            output_names=list(outputs),
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,
        )
    # A fixed head's outputs by name (a declared card game's slots included); a candidates
    # file's logits are the state's legal moves, in its order: no names to give.
    names = () if is_candidate_game(adapter) else getattr(adapter, "action_names", ()) or ()
    info = {
        "format": "onnx",
        "file": onnx_path.name,
        "opset": OPSET,
        "version": version,
        "game": adapter.name,
        "policy": "candidates" if is_candidate_game(adapter) else "masked",
        "obs_size": adapter.obs_size,
        "num_actions": adapter.num_actions,
        "action_names": list(names) if len(names) == adapter.num_actions else None,
        "inputs": inputs,
        "outputs": outputs,
        "illegal_logit": float(FLOAT_MIN),  # what the mask adds: `module.apply_mask`
        "spec": spec.to_dict(),
        "play": play,
    }
    write_json(out / "policy.json", info)
    return info
