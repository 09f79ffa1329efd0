"""Quality beside speed: is a faster configuration still right?

``responses``: what a run keeps of its answers (the result's ``servelab.responses``:
prompt keys, prompts, sampling) and reads back. ``agreement``: answers paired with a
reference's by prompt key, judged against the reference's own run-to-run floor.
``tasks`` and ``graders``: prompts with checkable answers (a built-in seeded set, or a
user's JSONL). ``score``: a task score's Wilson interval and its paired comparison with
the reference (MLPerf's rule: ≥ 99 % of the reference's score). ``judge``: all of it
for one run, as lines and a result section. Everything here runs after the run, on its
result: nothing touches the client's hot path.
"""
