"""A TypeScript client generated from the published contract compiles the README's examples.

openapi-typescript (default flags) turns each published document (docs/openapi/<game>.json)
into types; `tsc` then compiles tests/typescript/examples.ts, the README's minimal calls written
with openapi-fetch for leduc, UNO and doudizhu: optional request fields left out, each game's
state and action typed, and lines marked `@ts-expect-error` (a wrong state, action, payoff or
problem type) refused. The npm packages are pinned by tests/typescript/package-lock.json and
installed there on first run (`npm ci`; `make tools` does the same); Node and npm themselves
from Debian's packages when missing, as the other tools the tests need.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from croupier.api.openapi_export import PUBLISHED
from tests.conftest import APT_TIMEOUT_S, apt_tool

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ROOT / "tests" / "typescript"

pytestmark = pytest.mark.integration  # node processes


def _installed() -> Path:
    # Debian's Node (18 on bookworm) runs openapi-typescript 7 and tsc 5 (the pinned ones).
    node, npm = apt_tool(("node", "npm"), ("nodejs", "npm"))
    if not (PROJECT / "node_modules" / ".package-lock.json").exists():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=PROJECT, check=True, timeout=600)
    return Path(node)


# Installing Node and the npm packages on a fresh machine may take minutes: over the default.
@pytest.mark.timeout(APT_TIMEOUT_S * 2 + 900)
def test_generated_types_compile_the_readme_examples() -> None:
    node = _installed()
    out = subprocess.run(
        [str(node), "generate.mjs", str(ROOT / "docs" / "openapi"), "generated", *PUBLISHED],
        cwd=PROJECT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    for game in PUBLISHED:
        types = (PROJECT / "generated" / f"{game}.ts").read_text()
        prefix = "".join(w.capitalize() for w in game.split("-"))
        assert f"{prefix}State: {{" in types, game  # the game's state, an object type
    tsc = PROJECT / "node_modules" / ".bin" / "tsc"
    out = subprocess.run(
        [str(tsc), "-p", "."], cwd=PROJECT, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-2000:]
