"""mafiabench: measure how language models deceive, detect deception and disclose, by playing Mafia."""

__version__ = "0.1.0"
