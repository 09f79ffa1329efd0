"""The offline research pipeline: published vLLM runs, replayed through the planner and fitted.

Nothing here runs when a user runs a command (tests/planner/test_corpus_offline.py walks every
import reachable from ``cli.main`` and finds none of it); it is importable so that the tools, the
measurements and the tests can use it. The wheel ships only what the pipeline writes and ``plan``
reads, ``planner/data/fitted.json`` and ``planner/data/bands.json``, not the corpus itself.

- ``rows``: the corpus (``memory.toml``, ``speed.toml``), its row types and the fit / held-out split;
- ``replay``: a row replayed through the planner: predicted against measured;
- ``fit``: the planner's constants fitted on the fit rows only.

``tools/plan_accuracy.py`` runs the pipeline: ``--fit`` refits ``data/fitted.json``, a plain run
rewrites ``data/bands.json`` and docs/planner_accuracy.md, ``--check`` (a CI step) fails when either
differs from what the corpus gives.
"""
