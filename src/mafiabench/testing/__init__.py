"""Test helpers shipped with the package, so tests, benchmarks and offline demos share them: a fake OpenAI/Anthropic
HTTP server, random-answer games, and (`llama_server`, imported by name) a real llama.cpp server with a small open
model, built and run on this machine.

May import engine, agents, backends, play and record; in the package only the `fake-server` command imports it, and
the backends name `fake_model` (the game-aware fake answers) as the module registering the `fake` and `scripted`
provider kinds, loaded on first use.
"""

from .fake_http_server import FakeModelServer, Fault
from .fake_model import FakeBrain
from .random_play import play_random, random_answer

__all__ = ["FakeBrain", "FakeModelServer", "Fault", "play_random", "random_answer"]
