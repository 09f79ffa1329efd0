"""Diagnose: say what limits a run, with evidence, and what to try next.

    evidence.py  facts from the result + views of the timeline (pure)
    spans.py     when a state held: its share of the run and its times, for a verdict to quote
    rules.py     one pure rule per limit: Evidence -> Verdict | None (gpu.py: the rules on NVML counters)
    host.py      the machine's CPUs: a saturated host, named only when it is the cause
    decide.py    run the rules, rank, list what was and was not checked
    verdict.py   Verdict, Diagnosis, the text block
    run.py       read a saved run (result JSON + timeline) from disk

    from servelab.diagnose.run import load_run, diagnose_run
    print(render(diagnose_run(load_run(Path("results/bench.json")))))
"""
