"""Modular MAX's own compute_log_probabilities_ragged (the Mojo kernel the seed describes), built
by MAX's graph builder and run by MAX's engine on the CPU: the graph takes SPEC §1's arrays as
they are and returns the packed layout of §7, so the adapter only copies arrays in and out."""
import importlib.metadata

from . import PeerRaised, PeerUnavailable
from ..result import Result

try:
    import numpy
    from max.driver import CPU, Buffer
    from max.engine import InferenceSession
    from max.graph import DeviceRef
    from max.pipelines.lib.log_probabilities import log_probabilities_ragged_graph
except ImportError as e:
    raise PeerUnavailable(f"max is not importable here ({e}): pip install max (ci/install-deps --peers)") from e


class Kernel:
    """kernel(batch, k) for K = 2^levels - 1; one compiled model per levels value (MAX compiles
    the kernel for a fixed heap height), kept for the session's life. MAX's default threads: its
    num_threads aborts on the CPU (docs/peers.md)."""

    def __init__(self, peer):
        self.peer = peer
        self.version = importlib.metadata.version("max")
        self._session = InferenceSession(devices=[CPU()])
        self._models = {}

    def model(self, k):
        levels = (k + 1).bit_length() - 1
        if k < 0 or 2**levels - 1 != k or levels > 16:
            raise ValueError(f"MAX's kernel takes K = 2^levels - 1 (levels 0..16), not K = {k}")
        if levels not in self._models:
            self._models[levels] = self._session.load(log_probabilities_ragged_graph(DeviceRef.CPU(), levels=levels))
        return self._models[levels]

    def __call__(self, batch, k):
        if batch.dtype != "f32" or batch.temperatures is not None:
            raise ValueError("MAX's kernel takes f32 logits without temperatures")
        model = self.model(k)
        logits = numpy.ascontiguousarray(batch.numpy_logits())  # MAX's graph has no row stride

        def u32(values):
            return Buffer.from_numpy(numpy.asarray(values, dtype=numpy.uint32))

        inputs = [Buffer.from_numpy(logits)] + [u32(a) for a in (
            batch.tokens, batch.sampled_tokens, batch.logit_row_offsets, batch.token_row_offsets,
            batch.lp_output_offsets, batch.lp_output_offsets)]  # the last: the output offsets for the host
        try:
            lp_logits, lp_tokens = model.execute(*inputs)
            values, tokens = lp_logits.to_numpy(), lp_tokens.to_numpy()
        except Exception as e:  # the engine's own error on a valid batch is a finding
            raise PeerRaised(f"{type(e).__name__}: {e}") from e
        return Result.packed(values, tokens, k=k)
