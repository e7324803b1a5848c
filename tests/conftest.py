"""Shared test setup. Prefect reads its settings at import, so its home and quiet settings are set here, before any
test module imports it; each test session gets a fresh temporary PREFECT_HOME."""

from __future__ import annotations

import atexit
import os

from mafiabench import scratch

# Temporary folders named after this process (mafiabench.scratch): removed when the session ends, interrupted
# included, and swept by the next session if it was killed.
if "PREFECT_HOME" not in os.environ:
    os.environ["PREFECT_HOME"] = str(scratch.make("prefect"))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_TASKS_DEFAULT_NO_CACHE", "true")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.pop("PREFECT_API_URL", None)
# dbt's parsed manifests are cached between processes (transform.build.dbt_runner): tests keep theirs in the
# session's folder.
if "MAFIABENCH_CACHE_DIR" not in os.environ:
    os.environ["MAFIABENCH_CACHE_DIR"] = str(scratch.make("cache"))
# The local Prefect server the session's runs share stops soon after the last one (and before its home is removed).
os.environ.setdefault("MAFIABENCH_PREFECT_IDLE_S", "20")

# The fake provider draws its injected faults afresh in every run unless told a seed: tests pin it, so a test's
# faults are the same on every machine (tests about re-runs set their own).
os.environ.setdefault("MAFIABENCH_FAULT_SEED", "tests")
# The latent mart samples the Mini-Mafia study's model by NUTS by default (JAX's start and compilation cost each
# process ~6 s of CPU, every build ~1 s): builds in tests hold the labelled point-estimate fallback instead, and the
# tests of the NUTS fit (test_marts_latent.py, test_mini_mafia_published.py) select it themselves.
os.environ.setdefault("MAFIABENCH_LATENT_METHOD", "map")


@atexit.register  # registered after the folders: runs before they are removed
def _stop_prefect_server() -> None:
    from mafiabench.prefect_server import stop_server

    stop_server()
