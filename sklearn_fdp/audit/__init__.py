"""Privacy you can check: attack bounds, attacks and empirical audits.

Feature DP (FDP paper, Def. 5/6) does not hide whether a record is in the
data; what it limits is *attribute inference*: guessing a record's protected
attributes from the model when its public part Ψ(x) is known. Thm. 4 of the
paper turns the privacy parameters into a bound on any such attack
(:func:`attribute_inference_bound`).
"""

from ._attack import AttributeInferenceAttack, AttributeInferenceResult
from ._bounds import attribute_inference_bound
from ._canary import (
    CanaryAuditResult,
    OneRunAuditResult,
    canary_audit,
    canary_audit_one_run,
)

__all__ = [
    "AttributeInferenceAttack",
    "AttributeInferenceResult",
    "CanaryAuditResult",
    "OneRunAuditResult",
    "attribute_inference_bound",
    "canary_audit",
    "canary_audit_one_run",
]
