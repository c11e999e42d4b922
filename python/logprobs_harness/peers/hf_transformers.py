"""Hugging Face transformers, as generate() hands logprobs to its users: each batch item's scores
through TemperatureLogitsWarper (when it has a temperature), then
GenerationMixin.compute_transition_scores(normalize_logits=True), the evaluated token's
log-probability. Scores keep the logits' dtype, as generate() of this series keeps the model's
(no upcast before the warpers). transformers reports no top-K: K = 0."""
import importlib.metadata
import types

from . import PeerRaised, PeerUnavailable
from ..result import Result

try:
    import torch
    from transformers.generation.logits_process import TemperatureLogitsWarper
    from transformers.generation.utils import GenerationMixin
except ImportError as e:
    raise PeerUnavailable(f"transformers is not importable here ({e}): pip install transformers "
                          "(ci/install-deps --peers)") from e


class Kernel:
    """kernel(batch, 0): one generation step per output row, its evaluated token the sequence."""

    def __init__(self, peer):
        self.peer = peer
        self.version = importlib.metadata.version("transformers")

    def __call__(self, batch, k):
        if k != 0:
            raise ValueError("transformers reports no top-K: it is judged at K = 0")
        plan = batch.plan()
        logits = batch.torch_logits()
        scores = logits[torch.tensor(plan.logit_rows, dtype=torch.long)] if len(plan) else logits[:0]
        sequences = torch.tensor(plan.tokens, dtype=torch.long).reshape(-1, 1)
        # compute_transition_scores reads only config.vocab_size of its model.
        model = types.SimpleNamespace(config=types.SimpleNamespace(vocab_size=batch.vocab))
        try:
            if batch.temperatures is not None:
                items = torch.tensor(plan.batch_items, dtype=torch.long)
                for item, temperature in enumerate(batch.temperatures):
                    rows = (items == item).nonzero().flatten()
                    if len(rows):
                        scores[rows] = TemperatureLogitsWarper(float(temperature))(sequences[rows], scores[rows])
            values = (GenerationMixin.compute_transition_scores(model, sequences, (scores,), normalize_logits=True)
                      if len(plan) else torch.empty((0, 1)))
        except Exception as e:
            raise PeerRaised(f"{type(e).__name__}: {e}") from e
        return Result.packed(values.float().numpy(), sequences.numpy().astype("uint32"), k=0)
