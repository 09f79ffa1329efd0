"""The quality half of optimize's keep rule: a candidate's answers against the best's.

Each configuration's repeats keep their answers when the workload does (``--save-detailed``,
``--temperature 0``). The best's repeats give the floor (its own agreement between them);
the candidate is judged by its least agreeing repeat (quality/agreement.py). A change that
can alter outputs (the knob table's ``alters_outputs``: kv-cache dtype, another checkpoint)
is kept only when its answers are the same within that floor — a real run without kept
answers cannot prove that, so it is not kept; the simulator runs no weights, so a simulated
step says "quality not judged" and never keeps such a change (``--simulate``, ``--simulate-first``:
only a real run's verdict can). A knob that should not change answers is kept on speed, and
a divergence beyond the floor is reported as a finding.
"""

from __future__ import annotations

from servelab.errors import InputError
from servelab.metrics.noise import BETTER
from servelab.quality.agreement import DIVERGES, SAME, agree, floor, verdict
from servelab.quality.responses import Responses

NOT_JUDGED = "quality not judged"
REJECTED, NOT_KEPT = "rejected (quality)", "not kept (quality not judged)"


def judge(best: tuple[dict, ...], cand: tuple[dict, ...], alters: bool, simulated: bool) -> dict:
    """The step's ``quality``: its verdict and figures, and whether it blocks keeping the change."""
    out = {"alters_outputs": alters}
    if simulated:
        return {**out, "verdict": f"{NOT_JUDGED}: simulated (no weights run)", "blocks": alters}
    if not best or not cand:
        return {**out, "verdict": f"{NOT_JUDGED}: the answers of one side are not at hand (a resumed record)",
                "blocks": alters}
    try:
        refs = [Responses.of_result(r, f"the best's repeat {i + 1}") for i, r in enumerate(best)]
        runs = [Responses.of_result(r, f"the candidate's repeat {i + 1}") for i, r in enumerate(cand)]
        f = floor(refs)
        judged = [(verdict(run, None if run.sampled else agree(refs[0], run), f), run) for run in runs]
    except InputError as exc:
        said = f"{NOT_JUDGED}: {exc}"
        return {**out, "verdict": said, "blocks": alters}
    said, worst = min(judged, key=lambda j: (j[0] == SAME, _share(refs[0], j[1])))
    out.update(verdict=said, floor=f.share, blocks=alters and said != SAME)
    if not worst.sampled:
        a = agree(refs[0], worst)
        out.update(identical=a.identical, paired=a.paired, share=round(a.share, 4),
                   prefix_share=round(a.prefix_share, 4))
    if said == DIVERGES and not alters:
        out["finding"] = "answers diverge beyond the floor though this knob should not change them"
    return out


def _share(ref: Responses, run: Responses) -> float:
    return 0.0 if run.sampled else agree(ref, run).share


def decision(step: dict) -> str:
    """The step's call, as its record and the report say it: ``kept``, ``reverted`` (on speed),
    ``rejected (quality)`` (faster, but its answers diverge beyond the floor), ``not kept (quality
    not judged)`` (faster, but nothing could judge its answers: simulated, or none kept),
    ``not measured`` (only ranked on the simulator)."""
    if step.get("kept"):
        return "kept"
    if step.get("simulated") and step.get("noise_verdict") is None:
        return "not measured"
    quality = step.get("quality") or {}
    if quality.get("blocks") and step.get("noise_verdict") == BETTER:
        return NOT_KEPT if quality["verdict"].startswith(NOT_JUDGED) else REJECTED
    return "reverted"


def why(quality: dict) -> str:
    """What the step's sentence says about quality (nothing for a knob that should not change
    the answers where they were not judged: a simulated run)."""
    said = quality["verdict"]
    if said.startswith(NOT_JUDGED) and not quality["alters_outputs"]:
        return ""
    if "share" in quality:
        said = f"answers {quality['share']:.1%} identical (floor {quality['floor']:.1%}): {said}"
    if quality.get("blocks") and said.startswith(NOT_JUDGED):
        return f"; not kept: {said}"
    if quality.get("blocks"):
        return f"; {said} — reverted for quality"
    return f"; {said}" + (f" — finding: {quality['finding']}" if "finding" in quality else "")
