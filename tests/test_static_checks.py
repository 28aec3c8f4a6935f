"""The AST check that keeps submissions from delegating to torch's GradScaler."""

from __future__ import annotations

import pytest

from autograder.engine.static_checks import forbidden_delegation
from conftest import ROOT


@pytest.mark.parametrize("source", [
    "import torch\nclass ToyLossScaler(torch.amp.GradScaler):\n    pass\n",
    "from torch.amp import GradScaler as G\n",
    "import torch.cuda.amp\nx = torch.cuda.amp.GradScaler()\n",
    "import torch\ntorch._amp_update_scale_(a, b, c, 2.0, 0.5, 10)\n",
    "import torch\nf = getattr(torch, '_amp_foreach_non_finite_check_and_unscale_')\n",
    "import torch\nf = getattr(torch.amp, 'Grad' 'Scaler')\n",
    "from torch.amp.grad_scaler import OptState\n",
])
def test_delegation_is_detected(source: str) -> None:
    assert forbidden_delegation(source)


@pytest.mark.parametrize("source", [
    '"""Behaves like torch.amp.GradScaler (but is written by hand)."""\nimport torch\n',
    "# unlike GradScaler we keep a float\nx = 1\n",
    "def f(:\n",  # a syntax error is reported by the import check, not here
])
def test_mentions_in_docs_and_comments_are_fine(source: str) -> None:
    assert forbidden_delegation(source) == []


def test_reference_and_skeleton_are_clean() -> None:
    for folder in ("solutions", "assignment"):
        assert forbidden_delegation((ROOT / folder / "loss_scaler.py").read_text()) == []
