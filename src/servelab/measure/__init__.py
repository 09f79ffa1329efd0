"""One measured run: a BenchSpec in; vLLM's console block, the result files and a BenchOutcome out.
The body of ``servelab bench`` and of every run inside a study, sweep, tune or scale (layer 4)."""
