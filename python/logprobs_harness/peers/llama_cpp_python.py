"""llama-cpp-python's Llama.logits_to_logprobs: the log-softmax its completion path reports
logprobs from (a static method of numpy code; the llama.cpp library it wraps is loaded but never
called). Its top-logprob selection sorts inside Llama._create_completion, which needs a loaded
model, so only the evaluated token's value is judged (K = 0)."""
import importlib.metadata

from . import PeerRaised, PeerUnavailable
from ..result import Result

try:
    import numpy
    from llama_cpp import Llama
except ImportError as e:
    raise PeerUnavailable(f"llama_cpp is not importable here ({e}): pip install llama-cpp-python "
                          "(ci/install-deps --peers)") from e


class Kernel:
    """kernel(batch, 0): each output row's evaluated token's value from logits_to_logprobs over
    the row, as its completion path calls it (one row of f32 scores, or f16 as numpy holds them)."""

    def __init__(self, peer):
        self.peer = peer
        self.version = importlib.metadata.version("llama-cpp-python")

    def __call__(self, batch, k):
        if k != 0 or batch.dtype not in self.peer.conventions.dtypes or batch.temperatures is not None:
            raise ValueError("llama-cpp-python is judged at K = 0 on f32 and f16 logits without temperatures")
        plan = batch.plan()
        logits = batch.numpy_logits()
        values = numpy.empty((len(plan), 1), dtype=numpy.float32)
        try:
            for o, (row, token) in enumerate(zip(plan.logit_rows, plan.tokens)):
                values[o, 0] = Llama.logits_to_logprobs(logits[row])[token]
        except Exception as e:
            raise PeerRaised(f"{type(e).__name__}: {e}") from e
        tokens = numpy.asarray(plan.tokens, dtype=numpy.uint32).reshape(-1, 1)
        return Result.packed(values, tokens, k=0)
