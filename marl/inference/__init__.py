"""Acting with a trained policy outside a run (`Policy`; `marl.load_policy` builds one from a checkpoint)."""

from marl.inference.policy import Acted, FlatObservations, Policy

__all__ = ["Acted", "FlatObservations", "Policy"]
