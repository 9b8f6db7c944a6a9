#!/usr/bin/env bash
# Create the two isolated virtualenvs used by the competitor baselines.
#
#   .venv-diffprivlib : diffprivlib 0.6.6 + scikit-learn 1.7.2 (diffprivlib 0.6.6 breaks on
#                       scikit-learn >= 1.8, so it cannot share our main environment)
#   .venv-opacus      : torch 2.13.0 (CPU) + opacus 1.6.0 installed with --no-deps + opt-einsum
#                       (--no-deps keeps pip from resolving some other, possibly CUDA, torch build)
#
# Idempotent: a venv is (re)built only when its import check fails.
# Usage: bash benchmarks/baselines/setup_envs.sh [--force]
# Environment: PYTHON (interpreter used to create the venvs, default python3).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PYTHON="${PYTHON:-python3}"
FORCE=0
[[ "${1:-}" == "--force" ]] && FORCE=1

DPL_VENV="$ROOT/.venv-diffprivlib"
OPA_VENV="$ROOT/.venv-opacus"

check_dpl() {
    [[ -x "$DPL_VENV/bin/python" ]] || return 1
    "$DPL_VENV/bin/python" - <<'PY' >/dev/null 2>&1
import diffprivlib, sklearn, numpy, scipy
from diffprivlib.models import LogisticRegression
assert diffprivlib.__version__ == "0.6.6", diffprivlib.__version__
assert sklearn.__version__ == "1.7.2", sklearn.__version__
assert tuple(int(v) for v in scipy.__version__.split(".")[:2]) < (1, 18), scipy.__version__
LogisticRegression(epsilon=1.0, data_norm=1.0)
PY
}

check_opa() {
    [[ -x "$OPA_VENV/bin/python" ]] || return 1
    "$OPA_VENV/bin/python" - <<'PY' >/dev/null 2>&1
import torch, opacus, opt_einsum, numpy, scipy
from opacus import PrivacyEngine
assert opacus.__version__ == "1.6.0", opacus.__version__
assert torch.__version__.split("+")[0] == "2.13.0", torch.__version__
assert not torch.version.cuda, "CUDA torch build installed; expected the CPU build"
PY
}

make_venv() {
    rm -rf "$1"
    "$PYTHON" -m venv "$1"
    "$1/bin/python" -m pip install --quiet --upgrade pip
}

if [[ $FORCE == 0 ]] && check_dpl; then
    echo "[setup_envs] $DPL_VENV OK, skipping"
else
    echo "[setup_envs] building $DPL_VENV"
    make_venv "$DPL_VENV"
    # scipy<1.18: diffprivlib 0.6.6 passes `iprint` to L-BFGS-B, deprecated in 1.17 and removed in 1.18.
    "$DPL_VENV/bin/python" -m pip install "scikit-learn==1.7.2" "diffprivlib==0.6.6" numpy "scipy<1.18"
    check_dpl || { echo "[setup_envs] diffprivlib env failed its import check" >&2; exit 1; }
fi

if [[ $FORCE == 0 ]] && check_opa; then
    echo "[setup_envs] $OPA_VENV OK, skipping"
else
    echo "[setup_envs] building $OPA_VENV"
    make_venv "$OPA_VENV"
    # torch first, pinned; on the project machines this resolves to the local CPU wheel.
    # Elsewhere, add --index-url https://download.pytorch.org/whl/cpu to avoid a CUDA build.
    "$OPA_VENV/bin/python" -m pip install "torch==2.13.0" numpy scipy opt-einsum
    "$OPA_VENV/bin/python" -m pip install --no-deps "opacus==1.6.0"
    check_opa || { echo "[setup_envs] opacus env failed its import check" >&2; exit 1; }
fi

echo "[setup_envs] done"
"$DPL_VENV/bin/python" -c "import diffprivlib, sklearn, numpy, scipy; print('  diffprivlib', diffprivlib.__version__, '| scikit-learn', sklearn.__version__, '| numpy', numpy.__version__, '| scipy', scipy.__version__)"
"$OPA_VENV/bin/python" -c "import torch, opacus, opt_einsum, numpy, scipy; print('  opacus', opacus.__version__, '| torch', torch.__version__, '| opt-einsum', opt_einsum.__version__, '| numpy', numpy.__version__, '| scipy', scipy.__version__)"
