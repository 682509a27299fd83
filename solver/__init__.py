"""solver: self-consistency maths solving with tool-integrated repetitions on vLLM."""

__version__ = "0.1.0"
