"""The learned policy: the last K weights versions, swapped atomically, and the batched forward.

Readers take a reference to the current `{version: module}` mapping once and keep using it; a
new version builds a fresh module off to the side and then replaces the mapping in a single
assignment. In-flight forwards finish on the weights they started with and nobody waits.

Why ~500 lines in one module: installing, resolving and running a version share the one
mapping that makes the swap atomic; the module itself is `policies/module.py`, retention
`policies/retention.py`.
"""

from __future__ import annotations

import json
import logging
import threading
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from ray.rllib.utils.torch_utils import FLOAT_MIN

from croupier import stages
from croupier.games.base import GameAdapter
from croupier.games.candidates import is_candidate_game
from croupier.policies.module import ModelSpec, PolicyNetwork, build_inference_module
from croupier.policies.onnx_scorer import CandidateScorer
from croupier.policies.retention import Retention
from croupier.policies.weights_file import (
    UnreadableWeights,
    WeightsState,
    nonfinite,
    read_weights,
    version_of,
    weights_path,
    write_json,
    write_weights,
)
from croupier.rllib_private import forward_logits

log = logging.getLogger(__name__)

# Below any legal action's log-prob (the logits' spread would have to pass 1e37), above any
# illegal one's (its logit sits at FLOAT_MIN, -3.4e38).
_LOGP_FLOOR = np.float32(-1e37)


# The model's answer to one decision. Plain slotted class: a frozen dataclass's __init__
# (object.__setattr__ per field) costs more than everything else done per decision.
@dataclass(slots=True)
class ModelDecision:
    action: int
    logp: float
    logits: np.ndarray
    version: int


# One decision for the model: observation, legal-action mask, weights version pin.
Row = tuple[np.ndarray, np.ndarray, int | None]


@dataclass(frozen=True)
class ActResult:
    """One batched forward: per-row action index, its log-prob and the masked logits."""

    actions: np.ndarray  # int64[B]
    logp: np.ndarray  # float32[B]
    logits: np.ndarray  # float32[B, A]
    # None: every row is fit to serve (a legal action, finite logits and log-prob). Else the
    # rows that are (bool[B]); one that is not (weights gone bad) is the fallback's to answer,
    # never served or recorded as learned.
    valid: np.ndarray | None


def module_weights(module: Any) -> WeightsState:
    return {k: v.detach().cpu().numpy() for k, v in module.state_dict().items()}


class PolicyVersions:
    """The learned policy's weights versions kept in memory (the newest `keep` of them, plus
    every version a channel or a live game refers to) and, with a weights dir, on disk (what
    `retention` keeps, plus the same referenced ones: `policies/retention.py`)."""

    def __init__(
        self,
        adapter: GameAdapter,
        spec: ModelSpec | None = None,
        keep: int = 8,
        weights_dir: Path | None = None,
        seed: int = 0,
        behaviour_lag: int = 0,
        retention: Retention | None = None,
        max_pinned: int = 32,
        onnx_forward: bool = True,
        history_every: int = 0,
    ):
        if keep < 1 or behaviour_lag < 0 or max_pinned < 0 or history_every < 0:
            raise ValueError(
                "keep must be at least 1, behaviour_lag, max_pinned and history_every at least 0"
            )
        self.adapter = adapter
        # Without one, the game's preset network (`ModelSpec.for_game`): what its trainer will
        # most likely send, and what benchmarks of a server alone should measure.
        self.spec = spec or ModelSpec.for_game(adapter.name)
        # Whether `spec` is the trainer's (given, read with the weights on disk, or adopted
        # from the link), not the placeholder a server without a trainer builds: until then
        # the algorithm is not known (`/v1/policies` says null rather than the default's).
        self.spec_known = spec is not None
        # Experiments only (`croupier bench lag`): serve the version `behaviour_lag` places
        # behind the newest, to measure how learning copes with stale behaviour.
        self.behaviour_lag = behaviour_lag
        self.keep = max(keep, behaviour_lag + 1)
        self.weights_dir = Path(weights_dir) if weights_dir else None
        self.retention = retention or Retention(keep_last=self.keep)
        # The versions live games are pinned to (the composition root points this at the game
        # store's): never evicted nor deleted while a game may still ask for them, up to the
        # newest `max_pinned` of them (`held_for_games`): past that an engine keeping one game
        # open per new version would hold every version (the review's probe: 302 in memory,
        # ~1.8 MiB each for doudizhu). An older pin then resolves like any evicted version.
        self.in_use: Callable[[], Iterable[int]] = tuple
        self.max_pinned = max_pinned
        # A history kept in memory besides the newest `keep`: one version per `history_every`
        # version numbers (`Retention`'s rule), what `league` seats draw from (FSP).
        self.history = Retention(keep_last=1, keep_every=history_every) if history_every else None
        self._install_lock = threading.Lock()  # writers only; readers never lock
        self._rng = np.random.default_rng(seed)
        self._zeros = np.zeros(64, np.int64)  # `_zero_rows`: grown, never written
        self._modules: dict[int, Any] = {}
        # Each module's plain policy network (None: serve through the module's `_forward`),
        # made on its first forward; it goes when the module does.
        self._networks: weakref.WeakKeyDictionary[Any, PolicyNetwork | None] = (
            weakref.WeakKeyDictionary()
        )
        # Each candidate module's ONNX Runtime scorer (None: torch serves it), the same way;
        # `onnx_forward` False: torch always (`croupier bench serve` compares the two).
        self.onnx_forward = onnx_forward
        self._scorers: weakref.WeakKeyDictionary[Any, CandidateScorer | None] = (
            weakref.WeakKeyDictionary()
        )
        self._latest = 0
        # A game of scored candidates: rows hold candidate features, not masks.
        self.candidates = is_candidate_game(adapter)
        # Versions a channel (production, its rollback history) holds: never evicted.
        self._pinned: set[int] = set()
        # Versions refused at install for NaN/inf weights (a diverged run): the last good one
        # keeps serving.
        self.refused_nonfinite = 0
        self.last_refused: str | None = None
        # Whether version 0 is this server's own untrained network (no weights on disk; not
        # replaced by a trainer's version 0): a server that trains answers the model seats
        # that would play it with the rules instead (`sessions/deciding.py`).
        self.placeholder_zero = not self._load_newest_from_disk()
        if self.placeholder_zero:
            torch.manual_seed(seed)
            self._modules = {0: self._build()}

    # --- reading (hot path) --------------------------------------------------------------

    @property
    def latest(self) -> int:
        return self._latest

    @property
    def current(self) -> int:
        """The version new games get: the newest, unless a behaviour lag holds it back."""
        if not self.behaviour_lag:
            return self._latest
        versions = sorted(self._modules)
        return versions[max(0, len(versions) - 1 - self.behaviour_lag)]

    def versions(self) -> list[int]:
        return sorted(self._modules)

    def resolve(self, wanted: int | None) -> tuple[int, Any]:
        """The version to serve for `wanted` (None: the current one). A version already
        evicted is served by the oldest kept one after it, so a pinned game stays close."""
        modules, latest = self._modules, self._latest
        if wanted is None:
            wanted = self.current
        module = modules.get(wanted)
        if module is not None:
            return wanted, module
        if wanted >= latest:
            return latest, modules[latest]
        newer = [v for v in modules if v > wanted]
        v = min(newer) if newer else latest
        return v, modules[v]

    # --- writing -------------------------------------------------------------------------

    def install(self, version: int, weights: WeightsState, *, force: bool = False) -> bool:
        """Install a version. Older-or-equal versions are ignored unless `force` (only the
        link's first state, to replace the server's own untrained version 0 by the trainer's)."""
        bad = nonfinite(weights)
        if bad:
            self.refused_nonfinite += 1
            self.last_refused = f"version {version}: non-finite values in {bad[:3]}"
            log.error("refusing weights %s; still serving %d", self.last_refused, self._latest)
            return False
        with self._install_lock:
            if version <= self._latest and not force:
                return False
            module = self._build()
            module.load_state_dict(
                {k: torch.as_tensor(np.asarray(v)) for k, v in weights.items()}, strict=True
            )
            if self.candidates:  # here (the link's thread), not in the version's first forward
                self._scorer(module)
            kept = {v: m for v, m in self._modules.items() if v < version or v in self._pinned}
            kept[version] = module
            held = self._pinned | self.held_for_games()
            if self.history is not None:
                held |= self.history.kept(kept)
            evictable = [v for v in sorted(kept) if v not in held and v != version]
            for old in evictable[: max(0, len(evictable) + 1 - self.keep)]:
                del kept[old]
            self._modules = kept  # the atomic swap
            self._latest = version
            if version == 0:
                self.placeholder_zero = False
        if self.weights_dir is not None:
            self._save(version, weights)
        return True

    def held_for_games(self) -> set[int]:
        """The versions kept because live games are pinned to them: the newest `max_pinned`
        of those pinned (the rest are served by `resolve`'s nearest kept version)."""
        pinned = sorted(set(self.in_use()))
        return set(pinned[len(pinned) - self.max_pinned :]) if self.max_pinned else set()

    def retain(self, version: int, weights: WeightsState | None = None) -> None:
        """Keep `version` loaded whatever comes after it (a channel points at it). `weights`
        load it back when it is not in memory (a restart, or evicted before it was pinned)."""
        with self._install_lock:
            if version not in self._modules:
                if weights is None:
                    raise KeyError(f"version {version} is not loaded")
                bad = nonfinite(weights)
                if bad:
                    raise ValueError(f"version {version} has non-finite values in {bad[:3]}")
                module = self._build()
                module.load_state_dict(
                    {k: torch.as_tensor(np.asarray(v)) for k, v in weights.items()}, strict=True
                )
                if self.candidates:  # as `install`: not in the version's first forward
                    self._scorer(module)
                self._modules = {**self._modules, version: module}
                if version > self._latest:
                    self._latest = version
            self._pinned.add(version)

    def release(self, version: int) -> None:
        """No channel needs `version` any more: it may be evicted like any other."""
        with self._install_lock:
            self._pinned.discard(version)

    def reset_spec(self, spec: ModelSpec) -> None:
        """Rebuild with another architecture (the trainer's), dropping all versions. The new
        module is built first: a spec that cannot be built raises and changes nothing."""
        module = build_inference_module(
            spec, self.adapter.observation_space, self.adapter.action_space
        )
        with self._install_lock:
            self.spec = spec
            self.spec_known = True
            self._modules = {0: module}
            self._latest = 0
            self._pinned.clear()
            self.placeholder_zero = True

    def weights(self, version: int | None = None) -> WeightsState:
        return module_weights(self.resolve(version)[1])

    # --- forward -------------------------------------------------------------------------

    def act_rows(
        self,
        module: Any,
        obs: list[np.ndarray],
        masks: list[np.ndarray],
        explore: bool = True,
        greedy: np.ndarray | None = None,
    ) -> ActResult:
        """One forward for a batch of rows (what the batcher holds). A candidate game's rows
        carry K_i candidates each: only the real (state, candidate) pairs are scored
        (`CandidateNet.score_pairs`), sampled over the batch's longest list, not the game's
        bound; each row's logits come back trimmed to its own K_i."""
        if self.candidates:
            return self._act_candidates(module, obs, masks, explore, greedy)
        # np.array over a list of equal-shape rows: ~5x faster than np.stack at these sizes.
        t0 = stages.clock() if stages.ON else 0
        states, legal = np.array(obs), np.array(masks)
        if not stages.ON:
            return self.act(module, states, legal, explore, greedy)
        t0 = stages.add(stages.BATCH_ASSEMBLY, t0)
        logits = self._logits(module, states, legal)
        t0 = stages.add(stages.FORWARD, t0)
        res = self._sample(logits, legal, explore, greedy)
        stages.add(stages.SAMPLING, t0)
        return res

    def _act_candidates(
        self,
        module: Any,
        obs: list[np.ndarray],
        cands: list[np.ndarray],
        explore: bool,
        greedy: np.ndarray | None,
    ) -> ActResult:
        # The candidates go in as one flat [C, F] list (each row's own ones, no padding) and
        # come back as C scores: no padded [B, K, F] block to build and gather from.
        t0 = stages.clock() if stages.ON else 0
        one = len(cands) == 1  # a lone decision: the usual batch below saturation
        if one:
            flat = cands[0]
            states, rows = obs[0][None, :], self._zero_rows(len(flat))
        else:
            counts = np.fromiter((len(c) for c in cands), np.int64, len(cands))
            rows = np.repeat(np.arange(len(cands)), counts)
            states, flat = np.array(obs), np.concatenate(cands)
        if stages.ON:
            t0 = stages.add(stages.BATCH_ASSEMBLY, t0)
        scorer = self._scorer(module)
        if scorer is not None:
            scores = scorer(states, flat, rows)
        else:
            with torch.inference_mode():
                net = module.net
                h = net.embed(torch.from_numpy(states))
                scores = net.score_pairs(h, torch.from_numpy(flat), torch.from_numpy(rows)).numpy()
        if stages.ON:
            t0 = stages.add(stages.FORWARD, t0)
        if one:
            res = self._sample_row(scores, explore, greedy)
        else:
            mask = np.arange(counts.max())[None, :] < counts[:, None]
            logits = np.full(mask.shape, FLOAT_MIN, np.float32)
            logits[mask] = scores  # row-major: row i's K_i scores in order
            res = self._sample(logits, mask, explore, greedy)
            trimmed = [row[:k] for row, k in zip(res.logits, counts.tolist(), strict=True)]
            res = ActResult(res.actions, res.logp, trimmed, res.valid)  # type: ignore[arg-type]
        if stages.ON:
            stages.add(stages.SAMPLING, t0)
        return res

    def _zero_rows(self, k: int) -> np.ndarray:
        """int64[k] zeros (every candidate of state 0), a view of one array kept for it."""
        if len(self._zeros) < k:
            self._zeros = np.zeros(max(k, 2 * len(self._zeros)), np.int64)
        return self._zeros[:k]

    def _sample_row(
        self, scores: np.ndarray, explore: bool, greedy: np.ndarray | None
    ) -> ActResult:
        """`_sample` of one candidate row (all K_i slots legal): the same operations on the
        same values in the same order, so the same action, log-prob and random draws
        (`tests/test_candidate_sampling.py`), in ~10 numpy calls instead of ~25 with the
        mask's set-up (54 -> 22 us a lone decision in-process on this VM, 500 rows, busy)."""
        shifted = scores - scores.max()
        logp_all = shifted - np.log(np.exp(shifted).sum())
        if explore:
            action = int(np.argmax(logp_all + self._rng.gumbel(size=(1, len(scores)))))
            if greedy is not None and greedy[0]:
                action = int(np.argmax(scores))
        else:
            action = int(np.argmax(scores))
        logp = logp_all[action]
        valid = None
        # Every slot is legal; the rest of `_sample`'s guard: a finite log-prob and logits.
        if not (logp > _LOGP_FLOOR and scores.min() > -np.inf):
            valid = np.array([logp > _LOGP_FLOOR and bool(np.isfinite(scores).all())])
        return ActResult(
            np.array([action]),
            np.array([logp], np.float32),
            [scores],
            valid,  # type: ignore[arg-type]
        )

    def act(
        self,
        module: Any,
        obs: np.ndarray,
        mask: np.ndarray,
        explore: bool = True,
        greedy: np.ndarray | None = None,
    ) -> ActResult:
        """One forward for a batch, then sampling in numpy (Gumbel-max): at these sizes each
        torch op costs more in dispatch than the arithmetic, and RLlib's `forward_inference`
        wrapper adds ~80 us of checks around the module's own `_forward`, which itself adds
        ~20 us around its layers (`PolicyNetwork` skips both). `explore=False` takes every
        row's most likely legal action; `greedy` (bool[B]) only the rows it marks."""
        return self._sample(self._logits(module, obs, mask), mask, explore, greedy)

    def _sample(
        self,
        logits: np.ndarray,
        mask: np.ndarray,
        explore: bool,
        greedy: np.ndarray | None = None,
    ) -> ActResult:
        shifted = logits - logits.max(axis=1, keepdims=True)
        logp_all = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        if explore:
            # argmax(logp + Gumbel noise) samples from softmax(logits); masked logits sit at
            # -3.4e38, far below any noise, so an illegal action is never drawn.
            actions = np.argmax(logp_all + self._rng.gumbel(size=logp_all.shape), axis=1)
            if greedy is not None:
                actions = np.where(greedy, np.argmax(logits, axis=1), actions)
        else:
            actions = np.argmax(logits, axis=1)
        rows = np.arange(len(actions))
        logp = logp_all[rows, actions]
        # Legal by construction only while the logits are sane: NaN makes argmax pick 0, and
        # finite weights can still lift an illegal logit over the legal ones (the mask adds
        # FLOAT_MIN to the raw logit: a raw +3.4e38 cancels it, legal ones at -1e36 lose). So
        # every row's chosen action is looked up in its mask, whatever the log-probs say; NaN
        # or inf in a row makes its logp NaN. Three reductions vouch for the whole batch (the
        # mask lookup ~1-2 us of a ~10-45 us sample at 1-256 rows, `python -m experiments.guards`);
        # the row-by-row check runs only when they fail.
        chosen = mask[rows, actions]
        valid = None
        if not (chosen.all() and logp.min() > _LOGP_FLOOR and logits.min() > -np.inf):
            valid = (chosen > 0) & (logp > _LOGP_FLOOR)
            valid &= np.isfinite(logits).all(axis=1)
        return ActResult(actions, logp.astype(np.float32), logits, valid)

    # --- internals -----------------------------------------------------------------------

    def _logits(self, module: Any, obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        try:
            network = self._networks[module]
        except KeyError:  # the module's first forward (two threads may both make it: harmless)
            network = self._networks[module] = PolicyNetwork.of(module)
        if network is not None:
            return network(obs, mask)
        batch = {
            "obs": {"observations": torch.from_numpy(obs), "action_mask": torch.from_numpy(mask)}
        }
        with torch.inference_mode():
            return forward_logits(module, batch).numpy()

    def _scorer(self, module: Any) -> CandidateScorer | None:
        """The module's ONNX Runtime scorer (None: torch serves it), made when the version is
        installed or on its first forward (~10 ms the graph, ~40 ms the session and its check,
        on a busy 2-core VM; the first in a process also imports onnx, ~1.7 s), gone with
        the module."""
        if not self.onnx_forward:
            return None
        try:
            return self._scorers[module]
        except KeyError:  # two threads may both make it: harmless
            scorer = self._scorers[module] = CandidateScorer.of(module)
            return scorer

    def _build(self) -> Any:
        return build_inference_module(
            self.spec, self.adapter.observation_space, self.adapter.action_space
        )

    def _save(self, version: int, weights: WeightsState) -> None:
        # npz + json, no pickle; the file is on disk (fsynced, file and directory) before
        # latest.json names it, so a crash never leaves latest.json pointing at half a file.
        assert self.weights_dir is not None
        path = weights_path(self.weights_dir, version)
        write_weights(path, weights)
        meta = {"version": version, "spec": self.spec.to_dict(), "file": path.name}
        write_json(self.weights_dir / "latest.json", meta)
        on_disk = self._versions_on_disk()
        referenced = {version, *self._pinned, *self.held_for_games()}
        for old in set(on_disk) - self.retention.kept(on_disk, referenced):
            weights_path(self.weights_dir, old).unlink(missing_ok=True)

    def _load_newest_from_disk(self) -> bool:
        """Serve the newest good version on disk: the one latest.json names, or, when that
        one does not load (cut short by a crash, NaN in it, a torn zip), the newest that does.
        Nothing loadable: False (a fresh model), never a failed start."""
        if self.weights_dir is None or not self.weights_dir.is_dir():
            return False
        named: int | None = None
        try:
            meta = json.loads((self.weights_dir / "latest.json").read_text())
            self.spec = ModelSpec.from_dict(meta["spec"])
            self.spec_known = True
            named = int(meta["version"])
        except FileNotFoundError:
            pass  # no latest.json: any versions on disk still carry the default model
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.warning("ignoring unreadable latest.json in %s: %s", self.weights_dir, e)
        candidates = self._versions_on_disk()
        if named is not None and named in candidates:  # the named one first, then newest down
            candidates.remove(named)
            candidates.insert(0, named)
        for version in candidates:
            try:
                module = self._load_version(version)
            except UnreadableWeights as e:
                log.warning("skipping weights version %d in %s: %s", version, self.weights_dir, e)
                continue
            self._modules = {version: module, **self._older_from_disk(version)}
            self._latest = version
            log.info(
                "serving weights version %d from %s (loaded: %s)",
                self._latest,
                self.weights_dir,
                sorted(self._modules),
            )
            return True
        if candidates:
            log.warning("no loadable weights in %s: serving a fresh model", self.weights_dir)
        return False

    def _versions_on_disk(self) -> list[int]:
        assert self.weights_dir is not None
        found = (version_of(p) for p in self.weights_dir.glob("v*.npz"))
        return sorted((v for v in found if v is not None), reverse=True)

    def _load_version(self, version: int) -> Any:
        """Version `version`'s module from disk; `UnreadableWeights` for any failure."""
        assert self.weights_dir is not None
        weights = read_weights(weights_path(self.weights_dir, version))
        module = self._build()
        try:
            module.load_state_dict({k: torch.as_tensor(v) for k, v in weights.items()})
        except (RuntimeError, ValueError, KeyError) as e:  # another model's weights
            raise UnreadableWeights(f"v{version}: does not fit the model: {e}") from None
        return module

    def _older_from_disk(self, newest: int) -> dict[int, Any]:
        """The other versions still on disk (up to `keep` in all), so a restarted server can
        seat `frozen@N` and arenas can compare. One that does not load is skipped."""
        found: dict[int, Any] = {}
        for version in self._versions_on_disk():
            if len(found) >= self.keep - 1:
                break
            if version >= newest:
                continue
            try:
                found[version] = self._load_version(version)
            except UnreadableWeights as e:
                log.warning("skipping %s", e)
        return found


def read_weights_dir(weights_dir: Path) -> tuple[int, ModelSpec, WeightsState]:
    """The newest version a server wrote to its weights directory: (version, model, weights)."""
    meta = json.loads((weights_dir / "latest.json").read_text())
    weights = read_weights(weights_dir / meta["file"])
    return int(meta["version"]), ModelSpec.from_dict(meta["spec"]), weights
