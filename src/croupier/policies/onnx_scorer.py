"""The served candidate forward in ONNX Runtime: one native call instead of ~15 torch ops.

A served doudizhu decision's forward (`CandidateNet.embed` + `score_pairs`, preset 256x256
state MLP, scorer 128, 161-float candidates) is a few small matmuls; at serving batch sizes
torch's per-op dispatch costs as much as the arithmetic. The same graph, written here as ONNX
nodes from the module's weights and run by ONNX Runtime (one thread):
`python -m experiments.forward` (`PolicyVersions.act_rows`: assembly, forward, sampling; real
doudizhu states, ~9 legal moves each; CPU µs a decision, the two alternated; a loaded 2-core
VM, 2026-12-03):

    decisions a forward      1     2     4     8    16    64
    torch                  278   199   112    62    48    34
    ONNX Runtime           126    68    45    30    24    22

(The same arithmetic in numpy's BLAS matmuls fell between the two up to 16 decisions and far
behind at 64, where OpenBLAS's threads fought over the 2 cores.)

Exactness (`policies.module.LOGITS_RTOL`): the graph is the same arithmetic in another
summation order, so it agrees with the module's own torch forward to float32 rounding, not bit
for bit. `CandidateScorer.of` builds it only after it reproduced the torch scores on random
inputs of several shapes (`logits_agree`); anything else (no onnxruntime installed, another
network layout, a CPU whose kernels disagree beyond rounding) serves torch: slower, never
wrong. The learner keeps computing in torch; nothing it learns changes.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch

from croupier.policies.module import logits_agree

log = logging.getLogger(__name__)

OPSET = 17
# Shapes the check runs: (states, candidates of each state); 1 x 1 is a forced-looking row, the
# longest list a batch of many-move states.
_CHECK_SHAPES = ((1, (1,)), (1, (53,)), (5, (3, 1, 40, 7, 12)), (16, tuple(range(1, 33, 2))))


def _weights(net: Any) -> list[tuple[str, np.ndarray]]:
    """The net's parameters the graph reads, as float32 arrays (copied: the graph owns them)."""

    def a(t: torch.Tensor) -> np.ndarray:
        return t.detach().cpu().numpy().astype(np.float32, copy=True)

    out = []
    for i, layer in enumerate(net._state_layers):
        out += [(f"W{i}", a(layer.weight)), (f"b{i}", a(layer.bias))]
    hidden, dot = net.score[1], net.score[3]
    out += [("Ws", a(net.state_in.weight)), ("bs", a(net.state_in.bias)),
            ("WaT", a(net.cand_in.weight).T.copy()), ("W2", a(hidden.weight)),
            ("b2", a(hidden.bias)), ("w3", a(dot.weight)[None, :]),
            ("b3", a(dot.bias).reshape(1))]  # fmt: skip
    return out


def _graph(net: Any) -> bytes:
    """obs float32[B, S], cands float32[C, F], rows int64[C] -> scores float32[C]: the
    candidate i's score in state rows[i], as `CandidateNet.score_pairs(embed(obs), ...)`."""
    from onnx import TensorProto, helper, numpy_helper

    weights = _weights(net)
    nodes, x = [], "obs"
    for i in range(len(net._state_layers)):
        nodes += [helper.make_node("Gemm", [x, f"W{i}", f"b{i}"], [f"l{i}"], transB=1),
                  helper.make_node("Relu", [f"l{i}"], [f"h{i}"])]  # fmt: skip
        x = f"h{i}"
    nodes += [
        helper.make_node("Gemm", [x, "Ws", "bs"], ["s"], transB=1),  # [B, H]: once a state
        helper.make_node("Gather", ["s", "rows"], ["s_rows"], axis=0),  # [C, H]
        helper.make_node("MatMul", ["cands", "WaT"], ["a"]),  # [C, H]
        helper.make_node("Add", ["s_rows", "a"], ["z0"]),
        helper.make_node("Relu", ["z0"], ["z1"]),
        helper.make_node("Gemm", ["z1", "W2", "b2"], ["z2"], transB=1),
        helper.make_node("Relu", ["z2"], ["z3"]),
        helper.make_node("Gemm", ["z3", "w3", "b3"], ["score"], transB=1),  # [C, 1]
        helper.make_node("Flatten", ["score"], ["flat"], axis=0),  # [1, C]
        helper.make_node("Squeeze", ["flat", "axis0"], ["scores"]),  # [C]
    ]
    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    graph = helper.make_graph(
        nodes,
        "candidate_scores",
        [
            helper.make_tensor_value_info("obs", f32, ["B", net._state_layers[0].in_features]),
            helper.make_tensor_value_info("cands", f32, ["C", net.cand_in.in_features]),
            helper.make_tensor_value_info("rows", i64, ["C"]),
        ],  # fmt: skip
        [helper.make_tensor_value_info("scores", f32, ["C"])],
        initializer=[numpy_helper.from_array(v, k) for k, v in weights]
        + [numpy_helper.from_array(np.zeros(1, np.int64), "axis0")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    return model.SerializeToString()


class CandidateScorer:
    """`CandidateNet.score_pairs(embed(obs), cands, rows)` as one ONNX Runtime call."""

    def __init__(self, session: Any):
        self._session = session

    @classmethod
    def of(cls, module: Any) -> CandidateScorer | None:
        """The scorer of a candidate module's net, or None (torch serves) when onnxruntime is
        missing, the net is not `CandidateNet`'s layout, or the scores disagree."""
        net = getattr(module, "net", None)
        if net is None or not hasattr(net, "_state_layers"):
            return None
        try:
            import onnxruntime as ort

            options = ort.SessionOptions()
            # One thread, no spinning: the server runs one forward at a time on a core it
            # shares with the event loop.
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            session = ort.InferenceSession(_graph(net), options, providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001  (not installed, or a layout the graph lacks)
            log.debug("no ONNX Runtime scorer for %s: %s", type(module).__name__, e)
            return None
        scorer = cls(session)
        return scorer if scorer.matches(net) else None

    def matches(self, net: Any) -> bool:
        """Its scores and the torch net's agree (`logits_agree`) on random inputs."""
        rng = np.random.default_rng(0)
        obs_size, cand_size = net._state_layers[0].in_features, net.cand_in.in_features
        for states, counts in _CHECK_SHAPES:
            obs = rng.standard_normal((states, obs_size)).astype(np.float32)
            cands = (rng.random((sum(counts), cand_size)) < 0.2).astype(np.float32)
            rows = np.repeat(np.arange(states), counts)
            with torch.inference_mode():
                h = net.embed(torch.from_numpy(obs))
                want = net.score_pairs(h, torch.from_numpy(cands), torch.from_numpy(rows))
            try:
                got = self(obs, cands, rows)
            except Exception as e:  # noqa: BLE001  (ONNX Runtime's own errors)
                log.debug("ONNX Runtime scorer failed its check: %s", e)
                return False
            if not logits_agree(got, want.numpy()):
                return False
        return True

    def __call__(self, obs: np.ndarray, cands: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """float32[C]: candidate i's score in state rows[i] (obs [B, S], cands [C, F])."""
        return self._session.run(None, {"obs": obs, "cands": cands, "rows": rows})[0]
