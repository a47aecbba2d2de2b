"""docs/operations.md's runbook, run as written against real processes on loopback.

Every `bash` block of the runbook's sections (Start … Stop) runs in order. A `systemctl` line
runs the unit from examples/systemd/ as systemd would: `ExecStart` expanded from the
`EnvironmentFile` (`%i`, `${VAR}` one word, `$VAR` split on spaces), started means its
`ExecStartPost` health check passed within `TimeoutStartSec`, stop is `KillSignal` and an exit
within `TimeoutStopSec`; `UnsetEnvironment=` is applied; `enable --now` of a timer runs its
service once (its first firing). Any other line runs in bash after the environment file was
loaded exactly as the runbook says (`set -a; . croupier.env; set +a`) and must exit 0. The
environment file is the shipped one with the operator's edits (keys, ports, sizes) appended,
as an operator edits it; bash must load it without a word on stderr, and systemd's reading of
it must give the same values. Between steps the test checks what the runbook promises. Only
the units' `User=` is not applied (the test runs as whoever runs it), and the fleet's ports
8001/8002 become free ports.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port, wait_for
from tests.helpers.docs import bash_blocks, commands

ROOT = Path(__file__).resolve().parents[1]
UNITS = ROOT / "examples/systemd"
SECTIONS = (
    "### Start",
    "### Promote a version, set the canary share",
    "### Roll back",
    "### Restart a server",
    "### Upgrade",
    "### Outage: the trainer is down",
    "### Stop",
)
DOC_PORTS = ("8001", "8002")
COMMAND_TIMEOUT_S = 120


SOURCE = "set -a; . {file}; set +a"  # the runbook's words for loading the file


def read_env_file(path: Path) -> dict[str, str]:
    """The file as systemd's `EnvironmentFile=` reads it: `KEY=value` lines, `#` comments, a
    value in double or single quotes taken without them."""
    env = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            env[key.strip()] = value
    return env


def source_env_file(path: Path, env: dict[str, str]) -> dict[str, str]:
    """The environment after the runbook's `set -a; . croupier.env; set +a`, in bash."""
    done = subprocess.run(
        ["bash", "-c", SOURCE.format(file=shlex.quote(str(path))) + "; env -0"],
        env=env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0 and not done.stderr, f"sourcing {path}: {done.stderr}"
    return dict(item.split("=", 1) for item in done.stdout.split("\0") if "=" in item)


def edited_env_file(path: Path, edits: dict[str, str]) -> Path:
    """The shipped environment file with an operator's edits, each appended as a quoted line
    (a later line wins, in bash as in systemd)."""
    lines = [f'{key}="{value}"' for key, value in edits.items()]
    assert not any('"' in v or "$" in v or "\\" in v for v in edits.values())
    path.write_text((UNITS / "croupier.env").read_text() + "\n# edited\n" + "\n".join(lines) + "\n")
    path.chmod(0o600)
    return path


def read_unit(path: Path) -> dict[str, list[str]]:
    """`Key=value` lines of a unit file (keys may repeat, e.g. ExecStart of a oneshot)."""
    unit: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            unit.setdefault(key.strip(), []).append(value.strip())
    return unit


class Systemd:
    """Runs examples/systemd units the way systemd does the parts listed in the module doc."""

    def __init__(self, env: dict[str, str], logs: Path):
        self.env, self.logs = env, logs
        self.procs: dict[str, subprocess.Popen] = {}
        self.starts: dict[str, int] = {}

    def _unit(self, name: str) -> tuple[dict[str, list[str]], str]:
        base, _, instance = name.partition("@")
        file = UNITS / (f"{base}@.service" if instance else f"{name}.service")
        return read_unit(file), instance

    def expand(self, line: str, instance: str) -> list[str]:
        words: list[str] = []
        for token in shlex.split(line.replace("%i", instance)):
            whole = re.fullmatch(r"\$([A-Za-z_]\w*)", token)
            if whole:  # $VAR: split on whitespace, as systemd does
                words.extend(self.env.get(whole[1], "").split())
            else:
                words.append(re.sub(r"\$\{(\w+)\}", lambda m: self.env.get(m[1], ""), token))
        if words[0].endswith("/.venv/bin/croupier"):
            words[:1] = [sys.executable, "-m", "croupier"]
        elif words[0] == "/usr/bin/curl":
            words[0] = shutil.which("curl") or "curl"
        return words

    def unit_env(self, unit: dict[str, list[str]]) -> dict[str, str]:
        unset = {name for line in unit.get("UnsetEnvironment", []) for name in line.split()}
        return {k: v for k, v in self.env.items() if k not in unset}

    def start(self, name: str) -> None:
        unit, instance = self._unit(name)
        if unit.get("Type") == ["oneshot"]:  # each ExecStart in turn; all must succeed
            for line in unit["ExecStart"]:
                done = subprocess.run(
                    self.expand(line, instance), env=self.unit_env(unit), capture_output=True,
                    timeout=60,
                )  # fmt: skip
                assert done.returncode == 0, f"{name}: {line}: {done.stdout!r} {done.stderr!r}"
            return
        assert name not in self.procs or self.procs[name].poll() is not None, f"{name} runs"
        self.starts[name] = self.starts.get(name, 0) + 1
        log = open(self.logs / f"{name}.{self.starts[name]}.log", "wb")  # noqa: SIM115
        cwd = self.expand(unit["WorkingDirectory"][0], instance)[0]
        Path(cwd).mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen(
            self.expand(unit["ExecStart"][0], instance),
            cwd=cwd, env=self.unit_env(unit), stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.procs[name] = proc
        timeout = float(unit["TimeoutStartSec"][0])
        for post in unit.get("ExecStartPost", []):
            check = subprocess.run(
                self.expand(post, instance), env=self.env, timeout=timeout, capture_output=True
            )
            assert check.returncode == 0 and proc.poll() is None, (
                f"{name} did not become healthy: {check.stderr[-300:]!r}\n{self.log(name)[-3000:]}"
            )

    def stop(self, name: str) -> None:
        unit, _ = self._unit(name)
        proc = self.procs[name]
        if proc.poll() is None:
            proc.send_signal(getattr(signal, unit["KillSignal"][0]))
            try:
                proc.wait(float(unit["TimeoutStopSec"][0]))
            except subprocess.TimeoutExpired:
                proc.kill()  # what systemd does next; a failure of the unit here
                proc.wait(10)
                raise AssertionError(f"{name} ignored SIGTERM for TimeoutStopSec") from None

    def systemctl(self, line: str) -> None:
        verb, *names = shlex.split(line)[1:]
        if verb == "enable" and names[:1] == ["--now"]:
            # A timer enabled and started: its service runs now (OnBootSec has passed).
            assert all(n.endswith(".timer") for n in names[1:]), line
            for name in names[1:]:
                self.start(name.removesuffix(".timer"))
            return
        for name in names:
            if verb in ("stop", "restart"):
                self.stop(name)
            if verb in ("start", "restart"):
                self.start(name)
            assert verb in ("start", "stop", "restart"), line

    def log(self, name: str) -> str:
        files = sorted(self.logs.glob(f"{name}.*.log"))
        return "".join(f.read_text(errors="replace") for f in files)

    def kill_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


# ~110 s on a quiet 2-core machine (3 trainer and 6 server starts, each bounded by its unit's
# TimeoutStartSec); a loaded machine can take several times as long to import torch and RLlib.
@pytest.mark.timeout(600)
def test_the_runbook_runs_as_written(tmp_path):
    doc = (ROOT / "docs/operations.md").read_text()
    ports = [str(free_port()) for _ in DOC_PORTS]
    fleet = [f"http://127.0.0.1:{p}" for p in ports]
    engine_key, admin_key, read_key = (secrets.token_hex(8) for _ in range(3))
    bin_dir = tmp_path / "bin"  # `croupier` as the venv installs it, for this interpreter
    bin_dir.mkdir()
    (bin_dir / "croupier").write_text(f'#!/bin/sh\nexec {sys.executable} -m croupier "$@"\n')
    (bin_dir / "croupier").chmod(0o755)
    # The operator's edits of the shipped file: keys, token, the fleet (free ports here).
    env_file = edited_env_file(
        tmp_path / "croupier.env",
        {
            "CROUPIER_HOME": str(tmp_path / "home"),
            "CROUPIER_LINK_TOKEN": secrets.token_urlsafe(32),
            "CROUPIER_API_KEYS": engine_key,
            "CROUPIER_API_KEY": engine_key,
            "CROUPIER_ADMIN_KEYS": admin_key,
            "CROUPIER_ADMIN_KEY": admin_key,
            "CROUPIER_READ_KEYS": read_key,
            "CROUPIER_READ_KEY": read_key,
            "CROUPIER_TRAINER": f"127.0.0.1:{free_port()}",
            "CROUPIER_TRAINER_METRICS_PORT": str(free_port()),
            "CROUPIER_FLEET": ",".join(fleet),
            # Small and quick: versions within seconds on a 2-core machine.
            "CROUPIER_TRAIN_OPTS": "--algo ppo --train-batch-size 200 --minibatch-size 100 "
            "--num-epochs 1 --hiddens 32,32 --checkpoint-every 1 --max-version-lag 1000",
            "CROUPIER_SMOKE_HANDS": "300",
            "CROUPIER_ARENA_HANDS": "200",
        },
    )
    # The operator's shell before loading the file: nothing of croupier's set yet.
    shell_env = {k: v for k, v in os.environ.items() if not k.startswith("CROUPIER_")}
    shell_env["PATH"] = f"{bin_dir}:{os.environ['PATH']}"
    units_file = read_env_file(env_file)  # what the units get from EnvironmentFile=
    sourced = source_env_file(env_file, shell_env)  # what the runbook's shell gets
    for key in ("CROUPIER_TRAIN_OPTS", "CROUPIER_SERVE_OPTS", "CROUPIER_READ_KEY"):
        assert key in (UNITS / "croupier.env").read_text(), f"{key} not in croupier.env"
    assert {k: sourced.get(k) for k in units_file} == units_file, "bash and systemd disagree"
    env = {**shell_env, **units_file}
    logs = tmp_path / "logs"
    logs.mkdir()
    systemd = Systemd(env, logs)
    auth = {"Authorization": f"Bearer {admin_key}"}

    def get(url: str, path: str) -> dict:
        return httpx.get(url + path, headers=auth, timeout=10).json()

    def on_all(path: str, key: Callable[[dict], object]) -> list:
        return [key(get(url, path)) for url in fleet]

    def connected() -> bool:
        return all(on_all("/healthz", lambda h: (h["trainer_link"] or {}).get("connected")))

    def run(line: str) -> str:
        for doc_port, port in zip(DOC_PORTS, ports, strict=True):
            line = line.replace(f"@{doc_port}", f"@{port}")
        if line.startswith("systemctl "):
            systemd.systemctl(line)
            return ""
        done = subprocess.run(
            ["bash", "-c", SOURCE.format(file=shlex.quote(str(env_file))) + "\n" + line],
            env=shell_env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
        )  # fmt: skip
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def section(heading: str, after: dict[int, Callable[[], None]] | None = None) -> list[str]:
        lines = [c for block in bash_blocks(doc, heading) for c in commands(block)]
        assert lines, f"no commands under {heading!r}"
        outputs = []
        for i, line in enumerate(lines):
            outputs.append(run(line))
            if after and i in after:
                after[i]()
        return outputs

    try:
        # --- Start ------------------------------------------------------------------------
        out = section(SECTIONS[0])  # its last line ran the fleet check once (the timer)
        assert out[2].splitlines()[-1].startswith("ok")  # croupier status
        wait_for(connected, 60, 0.5, "every server connected to the trainer")
        systemd.start("croupier-fleet-check")  # passes on a healthy fleet, with a read key
        for _ in range(3):  # the smoke test's episodes train versions; more if not yet
            if (
                min(on_all("/v1/policies", lambda p: len(p["policies"]["learned"]["versions"])))
                >= 2
            ):
                break
            run(commands(bash_blocks(doc, SECTIONS[0])[0])[-1])
        loaded = on_all("/v1/policies", lambda p: p["policies"]["learned"]["versions"])
        common = sorted(set(loaded[0]).intersection(*loaded[1:]))
        assert len(common) >= 2, loaded
        first, second = common[-2], common[-1]

        # --- Promote twice (two releases), canary share ------------------------------------
        for version in (first, second):
            shell_env["VERSION"] = str(version)
            out = section(SECTIONS[1])
            assert "ok: all 2 servers hold the target" in out[1]
            assert on_all("/v1/policies/channels", lambda c: c["production"]) == [version] * 2
        assert on_all("/v1/policies/channels", lambda c: c["canary_share"]) == [0.05, 0.05]

        # --- Roll back --------------------------------------------------------------------
        section(SECTIONS[2])
        assert on_all("/v1/policies/channels", lambda c: c["production"]) == [first, first]

        # --- Restart a server: channel, share and events come back --------------------------
        events = get(fleet[0], "/v1/policies/channels")["events"]
        section(SECTIONS[3])
        channel = get(fleet[0], "/v1/policies/channels")
        assert (channel["production"], channel["canary_share"]) == (first, 0.05)
        assert channel["events"] == events and len(events) >= 4

        # --- Upgrade (rolling restarts) -----------------------------------------------------
        section(SECTIONS[4])
        wait_for(connected, 60, 0.5, "every server back on the restarted trainer")
        assert on_all("/v1/policies/channels", lambda c: c["production"]) == [first, first]

        # --- Outage: serving goes on, episodes spool, the backlog is delivered --------------
        def trainer_down() -> None:
            status = json.loads(run(f"croupier status --url {','.join(fleet)} --json"))
            for server in status["servers"].values():
                assert server["trainer_connected"] is False and server["spooled"] > 0, status
            with pytest.raises(AssertionError, match="healthz"):  # the check sees the outage
                systemd.start("croupier-fleet-check")

        section(SECTIONS[5], after={2: trainer_down})  # after the smoke test, trainer down
        wait_for(connected, 60, 0.5, "every server back on the trainer")
        trainer_health = f"http://127.0.0.1:{env['CROUPIER_TRAINER_METRICS_PORT']}/healthz"

        def delivered() -> bool:
            # Every episode sent; the servers keep only what the trainer holds untrained
            # (acknowledged means trained: the last partial batch waits for more games).
            spools = on_all("/healthz", lambda h: h["episodes"])
            unacked = httpx.get(trainer_health, timeout=10).json()["unacked_episodes"]
            return (
                all(s["pending"] == 0 for s in spools)
                and sum(s["spooled"] for s in spools) == unacked
            )

        wait_for(delivered, 90, 0.5, "the backlog delivered")

        # --- Stop ---------------------------------------------------------------------------
        section(SECTIONS[6])  # each process exited within its unit's TimeoutStopSec
        assert all(p.poll() is not None for p in systemd.procs.values())
        # The runbook also promises a checkpoint on SIGTERM (trainer-lifecycle.md).
        assert (Path(env["CROUPIER_HOME"]) / "trainer" / "checkpoint").is_dir()
    except BaseException:
        for name in systemd.procs:
            print(f"--- {name} ---\n{systemd.log(name)[-2500:]}")
        raise
    finally:
        with contextlib.suppress(Exception):
            systemd.kill_all()
