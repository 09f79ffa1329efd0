"""After an engine stops, its GPU memory must come back before the next one starts."""

from servelab.study import gpu_memory


def readings(*values):
    seq = list(values)
    return lambda: seq.pop(0) if len(seq) > 1 else seq[0]


def test_memory_that_comes_back_within_the_wait_says_nothing():
    read = readings([30.0, 0.9], [10.0, 0.9], [1.2, 0.8])  # GPU 0 drains over two seconds
    assert gpu_memory.not_returned([1.0, 0.9], read, wait_s=5, step_s=0.001) == []


def test_memory_still_held_names_the_gpu_and_how_much():
    lines = gpu_memory.not_returned([1.0, 0.9], readings([1.2, 40.9]), wait_s=0.01, step_s=0.001)
    assert lines == ["GPU 1 still holds 40.0 GiB more than before the engine started (0 s after its stop): "
                     "the next engine starts with less memory"]


def test_no_gpu_no_check(monkeypatch):
    assert gpu_memory.not_returned(None, readings([99.0])) == []
    monkeypatch.setattr(gpu_memory, "open_gpus", lambda: (None, "NVML unavailable (no driver)"))
    assert gpu_memory.used_gib() is None


def test_used_memory_per_gpu_from_nvml(monkeypatch):
    class Fake:
        closed = False

        def sample(self):
            return [{"mem_used_gib": 127.0}, {"mem_used_gib": None}]

        def close(self):
            Fake.closed = True
    monkeypatch.setattr(gpu_memory, "open_gpus", lambda: (Fake(), "ok"))
    assert gpu_memory.used_gib() == [127.0, None] and Fake.closed  # a GPU that did not answer: unknown


def test_a_gpu_that_did_not_answer_is_not_called_full():
    assert gpu_memory.not_returned([None, 1.0], readings([80.0, 1.0]), wait_s=0.01, step_s=0.001) == []
    assert gpu_memory.not_returned([1.0, 1.0], readings([None, 1.0]), wait_s=0.01, step_s=0.001) == []
