"""Test helpers shipped with the package, so tests, benchmarks and offline demos share them: a fake OpenAI/Anthropic
HTTP server, random-answer games, and (`llama_server`, imported by name) a real llama.cpp server with a small open
model, built and run on this machine.

May import engine, agents, backends, play and record; in the package only the `fake-server` command imports it.
"""

from .fake_http_server import FakeModelServer, Fault
from .random_play import play_random, random_answer

__all__ = ["FakeModelServer", "Fault", "play_random", "random_answer"]
