"""The field's real kernels, judged: one adapter per peer that runs the peer's OWN code (never a
re-implementation) on a harness Batch and returns a Result the judge takes, and the conventions
each peer keeps, declared as data so the conformance run asks of it only what it claims.

    from logprobs_harness import peers
    peer = peers.PEERS["max"]
    kernel = peers.load("max")          # PeerUnavailable, naming the package to install
    result = kernel(batch, 7)           # the real kernel's Result
    report = judge(batch, 7, result, **peer.conventions.judge_options())

`python3 -m logprobs_harness.peers` runs the conformance (docs/peers.md); each peer lives in a
virtual environment of its own (`ci/install-deps --peers`), since their pins conflict.
"""
import dataclasses
import importlib
from typing import Callable, Dict, Optional, Tuple

from ..result import Result

# Rank conventions a peer may keep: SPEC §2.9's (count of x_j >= x_s, from 1), the count of
# x_j > x_s from 0, or no rank reported.
RANK_CONVENTIONS = ("ge_from_1", "gt_from_0", None)
# Where the evaluated token goes: always its own last slot (SPEC, MAX), or only when it is
# outside the top K (vLLM's OpenAI layer).
EVALUATED_SLOTS = ("always", "outside_top_k")


class PeerUnavailable(RuntimeError):
    """The peer's package is not importable in this interpreter; the message says what to install."""


class PeerRaised(RuntimeError):
    """The peer's own code raised on a valid batch: a finding about the peer, not an adapter bug."""


@dataclasses.dataclass(frozen=True)
class Conventions:
    """What a peer computes, where it differs from SPEC.md or takes only part of it."""
    ks: Tuple[int, ...]                    # the K it takes (MAX: 2^L - 1 for the levels it builds)
    evaluated_slot: str = "always"
    ranks: Optional[str] = None            # one of RANK_CONVENTIONS
    dtypes: Tuple[str, ...] = ("f32",)     # logits dtypes it takes
    temperatures: bool = False             # whether it applies per-item temperatures (x / T)
    sum_rule: str = "calibrated"           # the judge's sum rule: "linear" for one f32 chain (SPEC §5)
    special_values: str = ""               # its NaN / infinity policy, as documented or read in its code

    def __post_init__(self):
        if self.ranks not in RANK_CONVENTIONS or self.evaluated_slot not in EVALUATED_SLOTS:
            raise ValueError(f"unknown convention in {self}")

    @property
    def max_k(self) -> int:
        return max(self.ks)

    def judge_options(self) -> Dict[str, str]:
        """The options of `judge` that this peer's declared conventions call for (SPEC §5 names
        each); nothing else is loosened."""
        return {"sum_rule": self.sum_rule}


@dataclasses.dataclass(frozen=True)
class Peer:
    name: str
    package: str          # the PyPI distribution whose code runs (ci/peers/<name>.txt pins it)
    module: str           # the adapter, in this package
    runs: str             # which of the peer's functions the adapter calls
    conventions: Conventions


PEERS: Dict[str, Peer] = {peer.name: peer for peer in (
    Peer("max", "max", "modular_max",
         "max.pipelines.lib.log_probabilities.log_probabilities_ragged_graph (the Mojo kernel "
         "compute_log_probabilities_ragged) on the CPU, one model per levels value",
         Conventions(ks=tuple(2**levels - 1 for levels in range(0, 9)), sum_rule="linear",
                     special_values="not documented; the kernel's arithmetic decides")),
    Peer("llama-cpp", "llama-cpp-python", "llama_cpp_python",
         "llama_cpp.Llama.logits_to_logprobs (the log-softmax of its completion path's logprobs); the "
         "top-logprob selection sorts inside _create_completion, which needs a model, so K = 0 only",
         Conventions(ks=(0,), dtypes=("f32", "f16"),
                     special_values="scipy's log_softmax: a non-finite row maximum is replaced by 0")),
    Peer("transformers", "transformers", "hf_transformers",
         "transformers' TemperatureLogitsWarper, then GenerationMixin.compute_transition_scores("
         "normalize_logits=True): the evaluated token's log-probability (no top-K in transformers)",
         Conventions(ks=(0,), dtypes=("f32", "bf16", "f16"), temperatures=True,
                     special_values="torch's log_softmax")),
)}


def load(name: str) -> Callable[..., Result]:
    """The adapter of peer `name`: a callable kernel(batch, k) -> Result with a `version` attribute.
    PeerUnavailable when the peer's package is not importable here."""
    if name not in PEERS:
        raise KeyError(f"unknown peer {name!r} (known: {', '.join(PEERS)})")
    module = importlib.import_module(f".{PEERS[name].module}", __name__)
    return module.Kernel(PEERS[name])


__all__ = ["Conventions", "EVALUATED_SLOTS", "PEERS", "Peer", "PeerRaised", "PeerUnavailable", "RANK_CONVENTIONS",
           "load"]
