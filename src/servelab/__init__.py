"""servelab: measure, explain and tune LLM serving."""

__version__ = "0.1.0"
