"""Policies and the mapping of agents onto them."""

from marl.policies.mapping import (
    DEFAULT_POLICY_ID,
    MappingError,
    PolicyMapping,
    PolicySpec,
    resolve_policies,
)

__all__ = ["DEFAULT_POLICY_ID", "MappingError", "PolicyMapping", "PolicySpec", "resolve_policies"]
