"""The tests whose floats depend on which matmul kernels torch picks (served against learned
logits, batches against rows alone, a padded update against the bound's), run again under each
instruction-set cap: what another CPU's dispatch would compute, so a claim that holds only on
this machine's kernels fails here (docs/architecture.md).

The caps are read when torch and its libraries load, so each runs in a pytest process of its
own, started from here: `make test`'s workers run the three beside the rest of the suite (run
one after another behind it, they added ~60 s to its wall clock on 2 cores).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

KERNEL_TESTS = (
    "tests/test_candidates.py",
    "tests/test_candidates_served.py",
    "tests/test_masking.py",
    "tests/test_candidate_slots.py",
)
# Whole hands through a real server and a trainer pushing NaN weights: they check that every
# answer is legal, which no kernel changes (the masking is exact), at ~40 s a cap of ~60.
NOT_KERNEL_BOUND = (
    "tests/test_masking.py::test_learned_decisions_over_http_are_legal",
    "tests/test_masking.py::test_a_trainer_pushing_nan_weights_leaves_the_server_serving_legal_actions",
)
CAPS = ("MKL_ENABLE_INSTRUCTIONS=AVX2", "ONEDNN_MAX_CPU_ISA=AVX2", "ATEN_CPU_CAPABILITY=avx2")
RUN_TIMEOUT_S = 540  # ~20 s alone on a 2-core box; a loaded one is many times slower


def dispatch_command() -> list[str]:
    deselect = [arg for test in NOT_KERNEL_BOUND for arg in ("--deselect", test)]
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
            *deselect, *KERNEL_TESTS]  # fmt: skip


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
@pytest.mark.parametrize("cap", CAPS)
def test_the_kernel_bound_tests_pass_under_the_cap(cap: str) -> None:
    name, value = cap.split("=")
    # A child of an xdist worker would otherwise read the worker's settings as its own.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env[name] = value
    out = subprocess.run(
        dispatch_command(), cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    text = out.stdout + out.stderr
    assert out.returncode == 0, f"{cap}:\n{text[-6000:]}"
    assert " passed" in text and "deselected" in text, text[-2000:]
