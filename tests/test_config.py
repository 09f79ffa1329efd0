"""config.BenchSpec: the frozen spec's own rewrites."""

from pathlib import Path

from servelab.config import BenchSpec, OutputSpec


def test_into_writes_the_result_alone_in_the_folder_and_keeps_the_rest():
    spec = BenchSpec(output=OutputSpec(label="mine", append_result=True, result_dir="/elsewhere", progress=True,
                                       gpu_hour_cost=2.5))
    out = spec.into(Path("/r/s/e/w/1"), "result.json", "e", progress=False).output
    assert (out.save_result, out.append_result, out.result_dir, out.result_filename, out.label) == \
        (True, False, "/r/s/e/w/1", "result.json", "e")
    assert (out.progress, out.gpu_hour_cost) == (False, 2.5)
    assert spec.into("/r", "result.json", "e").output.progress is True  # unset: as it was
