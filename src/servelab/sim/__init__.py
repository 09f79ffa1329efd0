"""A simulated vLLM V1 engine: its scheduler as a discrete-event model (layer 1, pure).

``scheduler.Scheduler`` is the engine, driven step by step by whoever owns the clock:
``simulate.simulate`` (the fast mode: no HTTP, no waiting) or the real-time ``sim``
server. Every number it produces is simulated, and is labelled so where it is shown.
"""
