"""``--simulate-first``: rank a verdict's candidate changes on the simulated engine before
spending real runs on them.

For each change the knob table offers, the simulator's fast mode runs the best
configuration and the change at each value of its schedule (a doubling: ×2, ×4, ×8 …
up to the ceiling), one run each (it is deterministic). Then the real loop measures, in
order of simulated gain, only the changes the model calls better beyond the noise
floor, each at the value the model liked best — so a knob with no effect costs no real
run, and a ladder of doublings is one real step. Changes the model cannot see (memory
fractions, dtypes, environment) keep their table order after the ranked ones and are
measured as usual. Every simulated run is a step marked ``simulated`` and counted apart
(``budget.simulated_runs``); none is ever kept: only measured steps are.

The model is servelab's vLLM V1 scheduler with its default step costs, not calibrated to
the real engine: it ranks, the real runs decide.
"""

from __future__ import annotations

from servelab.diagnose.changes import CLIENT, FLAG
from servelab.metrics.noise import NOISE_FLOOR
from servelab.optimize.config import Config, Move, apply, next_value
from servelab.optimize.measure import SimMeasurer
from servelab.optimize.steps import OBJECTIVES, Seen, seen, step_dict
from servelab.sim import options as sim_options

LADDER = 4  # values of a doubling tried in the model: ×2 … ×16


class Prerank:
    def __init__(self, sim: SimMeasurer) -> None:
        self.sim = sim
        self.base_cache: dict[tuple, Seen] = {}

    def __call__(self, state, best: Seen, moves: list[Move]) -> list[Move]:
        self.convert = _as_is if state.plan.kind == "sim" else to_sim
        base = self._seen(state, self.convert(best.config, best.evidence))
        ranked, unseen = [], []
        for move in moves:
            if not simulable(move):
                unseen.append(move)
                continue
            found = self._best_value(state, best, base, move)
            if found is not None:
                ranked.append(found)
        ranked.sort(key=lambda x: -x[0])
        return [m for _, m in ranked] + unseen

    def _best_value(self, state, best: Seen, base: Seen, move: Move) -> tuple[float, Move] | None:
        """The value of this change the model likes best, if it beats the floor; each value a simulated step."""
        key, higher, _ = OBJECTIVES[state.record["objective"]["kind"]]
        top, value = None, move.new
        for _ in range(LADDER):
            cand_move = Move(move.change, move.old, value, move.source)
            config = apply(best.config, cand_move, best.evidence)
            cand = self._seen(state, self.convert(config, best.evidence), record=(best, cand_move, base))
            score = _ratio(base.spread(key).mean, cand.spread(key).mean, higher)
            if top is None or score > top[0] * (1 + NOISE_FLOOR / 2):
                top = (score, cand_move)
            value = next_value(move.change, value) if move.change.step == "double" else None
            if value is None or int(float(value)) > _limit(state, move):
                break
        if top is not None and top[0] > 1 + NOISE_FLOOR:
            return top
        # No gain, but the model's run names another limit: measure it anyway (last), since the
        # loop pairs such a change with the next limit's (two limits that give way only together).
        first = self.base_cache.get(self._key(self.convert(apply(best.config, move, best.evidence), best.evidence)))
        return (0.0, move) if first is not None and first.verdict not in (base.verdict, "no-limit-found") else None

    @staticmethod
    def _key(config: Config) -> tuple:
        return (config.engine_args, tuple(sorted(config.env.items())), config.max_concurrency)

    def _seen(self, state, config: Config, record=None) -> Seen:
        key = self._key(config)
        if key not in self.base_cache:
            m = self.sim.measure(config, 1)
            state.record["budget"]["simulated_runs"] += 1
            self.base_cache[key] = seen(config, m)
            if record is not None:
                _record(state, record, self.base_cache[key], m)
        return self.base_cache[key]


def _record(state, record, cand: Seen, m) -> None:
    best, move, base = record
    key, higher, name = OBJECTIVES[state.record["objective"]["kind"]]
    ratio = _ratio(base.spread(key).mean, cand.spread(key).mean, higher)
    steps = state.record["steps"]
    step = step_dict(len(steps) + 1, best, move, cand, m, None,
                     f"{move.label}: SIMULATED {name} {ratio:.2f}× the simulated best — a ranking, not a result",
                     simulated=True)
    step["gain"] = round(ratio, 4)
    step["tried"] = ["simulated", move.change.name, move.new]
    step["result"]["runs"] = [f"presim/{r}" for r in step["result"]["runs"]]
    steps.append(step)
    state.save()


def _ratio(base: float, cand: float, higher: bool) -> float:
    if not base or not cand:
        return 0.0
    return cand / base if higher else base / cand


def _limit(state, move: Move) -> float:
    if move.change.name == "max_concurrency":
        return state.plan.spec.dataset.num_prompts
    return move.change.ceiling or float("inf")


def simulable(move: Move) -> bool:
    c = move.change
    return (c.kind == CLIENT and c.name == "max_concurrency") or (c.kind == FLAG and sim_options.simulable(c.name))


def _as_is(config: Config, evidence: dict) -> Config:
    """A sim engine's own flags are the model's: only the client processes go (the model has none)."""
    return Config(config.engine_args, {}, config.max_concurrency, None)


def to_sim(config: Config, evidence: dict) -> Config:
    """The configuration as the simulated engine takes it: its scheduler flags (the engine's
    values from the evidence where not given), the KV size the engine reported."""
    args, it = [], iter(config.engine_args)
    for a in it:
        if sim_options.simulable(a):
            args += [a] if sim_options.knob(a) in sim_options.SWITCHES else [a, next(it, "")]
    for flag, key in (("--max-num-seqs", "max_num_seqs"), ("--max-num-batched-tokens", "max_num_batched_tokens")):
        if flag not in args and evidence.get(key):
            args += [flag, str(evidence[key])]
    return Config(tuple(args), {}, config.max_concurrency, None)
