"""Unit tests of the integrity policy (assignment/checks/policy.py and guards.py), in process.

Each attack family of issue 19 is tried as a student would write it, inside a function of
``loss_scaler.py`` (Task 1's context) or ``amp_step.py`` that receives one of the harness's
own objects; each must be refused when the file is compiled or raise ``PolicyError`` when it
runs.  The honest habits beside them must run.  The same files graded end to end are in
tests/test_forgery.py (attacks) and the catalogue's HONEST_HABITS (honest code, 90 points).
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

from checks import guards, rules
from checks.guards import PolicyError
from checks.harness import Submission, SubmissionFault
from checks.optimizers import RecordingSGD


def load(tmp_path: Path, body: str, file: str = "loss_scaler.py") -> Any:
    """The module of a submission whose ``file`` defines ``run(target)`` with ``body`` (indented)."""
    (tmp_path / file).write_text("import torch\n\n\ndef run(target):\n" + textwrap.indent(textwrap.dedent(body), "    "))
    return Submission(tmp_path).module(file.removesuffix(".py"))


def optimizer() -> RecordingSGD:
    return RecordingSGD([torch.nn.Parameter(torch.ones(2))], lr=0.1)


def refusal(tmp_path: Path, body: str) -> str:
    """The compile-time refusal message for ``body`` (fails if the file compiles)."""
    with pytest.raises(SubmissionFault) as caught:
        load(tmp_path, body)
    assert "was not run" in str(caught.value), str(caught.value)
    return str(caught.value)


#: Attacks refused when they run: a PolicyError (or ImportError for a module) from the guards.
RUNTIME_REFUSED = {
    "attrgetter": "import operator\nreturn operator.attrgetter('_log')(target)",
    "attrgetter_dunder": "import operator\nreturn operator.attrgetter('__globals__')(target.step)",
    "getattr_alias": "g = getattr\nreturn g(target.step, '__glo' + 'bals__')",
    "partial_getattr": "import functools\nreturn functools.partial(getattr, target.step)('__globals__')",
    "reduce_getattr": "import functools\nreturn functools.reduce(getattr, ['step', '__globals__'], target)",
    "starred_getattr": "args = (target, '_log')\nreturn getattr(*args)",
    "type_hints_eval": "import typing\nreturn typing.get_type_hints",
    "self_named_variable": "self = target\nreturn self._log",
    "format_attribute": "return '{0.step.__globals__}'.format(target)",
    "format_private": "return str.format('{0._log}', target)",
    "traceback_by_name": "try:\n    1 / 0\nexcept ZeroDivisionError as error:\n    return getattr(error, '__trace' + 'back__')",
    "class_assignment": "class T(torch.Tensor):\n    pass\nsetattr(target.param_groups[0]['params'][0], '__class__', T)",
    "metaclass_by_type": "return type(torch.Tensor)('T', (torch.Tensor,), {})",
    "metaclass_by_attribute": "return getattr(torch.Tensor, '__class__')",
    "type_three_args": "return type('T', (), {'__getattr__': lambda self, name: 1})",
    "make_dataclass": "import dataclasses\nreturn dataclasses.make_dataclass('T', [], namespace={'__get__': print})",
    "module_gc": "import gc\nreturn gc.get_objects()",
    "module_sys": "import sys\nreturn sys.modules",
    "module_through_torch": "return torch.jit",
    "torch_ops": "return getattr(torch, 'op' + 's').aten",
    "torch_library": "from torch import library\nreturn library",
    "torch_private": "return torch._C",
    "generator_frame_by_name": "def gen():\n    yield 1\ng = gen()\nreturn getattr(g, 'gi_' + 'frame')",
    "open_file": "return open('/etc/passwd').read()",
    "write_module": "torch.amp.GradScaler = object",
    "write_harness_private": "target._log = []",
    "write_harness_public": "target.param_groups = []",
    "write_harness_class": "type(target).step = lambda self, closure=None: 1001.0",
    "deepcopy_private": "import copy\nreturn copy.deepcopy(target)._step_calls",
    "super_with_harness_object": "return super(type(target), target)._step_calls",
    "numpy_memory": "return target.param_groups[0]['params'][0].detach().numpy()",
}

#: Attacks refused when the file is compiled, with a word the message must contain.
COMPILE_REFUSED = {
    "match_class_attributes": ("match target:\n    case object(step=s):\n        return s", "class patterns"),
    "dunder_attribute": ("return target.step.__globals__", "__globals__"),
    "frame_attribute": ("def gen():\n    yield 1\nreturn gen().gi_frame", "gi_frame"),
    "traceback_attribute": ("try:\n    1 / 0\nexcept ZeroDivisionError as error:\n    return error.__traceback__",
                            "__traceback__"),
    "descriptor_class": ("class D:\n    def __get__(self, obj, owner):\n        return 1\nreturn D", "__get__"),
    "torch_function_class": ("class T(torch.Tensor):\n    @classmethod\n    def __torch_function__(cls, f, t, a=(), "
                             "k=None):\n        return 0.0\nreturn T", "__torch_function__"),
    "class_assignment_syntax": ("target.__class__ = object", "__class__"),
    "builtins_name": ("return __builtins__", "__builtins__"),
    "guard_name": ("return _getattr_", "_getattr_"),
    "metaclass_keyword": ("import abc\nclass A(metaclass=abc.ABCMeta):\n    pass\nreturn A", "metaclass"),
    "exec_call": ("exec('x = 1')", "Exec"),
    "relative_import": ("from . import harness\nreturn harness", "relative imports"),
    "async_function": ("async def f():\n    pass\nreturn f", "AsyncFunctionDef"),
}


@pytest.mark.parametrize("name", sorted(RUNTIME_REFUSED))
def test_attack_is_refused_when_it_runs(tmp_path: Path, name: str) -> None:
    module = load(tmp_path, RUNTIME_REFUSED[name])
    with pytest.raises((PolicyError, ImportError)) as caught:
        module.run(optimizer())
    assert "Rules for your code" in str(caught.value)


@pytest.mark.parametrize("name", sorted(COMPILE_REFUSED))
def test_attack_is_refused_when_the_file_is_compiled(tmp_path: Path, name: str) -> None:
    body, word = COMPILE_REFUSED[name]
    assert word in refusal(tmp_path, body)


def test_public_checks_and_grader_apply_one_rule_set(tmp_path: Path) -> None:
    """rules.check_source (what the grader's judge reads) lists exactly the policy's compile-time refusals."""
    for name, (body, _) in COMPILE_REFUSED.items():
        source = "import torch\n\n\ndef run(target):\n" + textwrap.indent(body, "    ")
        assert rules.check_source(source, "loss_scaler.py"), name
    for name, body in RUNTIME_REFUSED.items():
        source = "import torch\n\n\ndef run(target):\n" + textwrap.indent(body, "    ")
        assert rules.check_source(source, "loss_scaler.py") == [], name


HONEST = {
    "private_on_own_object": "class Box:\n    def __init__(self):\n        self._n = 1\n    def bump(self):\n"
                             "        self._n += 1\n        return self._n\nreturn Box().bump()",
    "items_augmented": "counts = {'a': 1}\ncounts['a'] += 2\nvalues = [1, 2]\nvalues[0] *= 5\nreturn counts['a'] + values[0]",
    "super_and_type_name": "class E(RuntimeError):\n    def __init__(self, message):\n        super().__init__(message)\n"
                           "return type(E('x')).__name__ + E('y').__class__.__name__",
    "format_and_fstring": "return '{} {:.1f}'.format('a', 2) + f'{target.param_groups[0][\"lr\"]!r}'",
    "foreach_kernel": "grads = [torch.ones(2)]\ntorch._foreach_mul_(grads, 2.0)\nreturn float(grads[0][0])",
    "grad_writes": "p = target.param_groups[0]['params'][0]\np.grad = torch.ones(2)\np.grad[0] = 3.0\np.grad *= 2\n"
                   "return p.grad.tolist()",
    "match_plain_values": "match [1, 2]:\n    case [1, x]:\n        return x\n    case _:\n        return 0",
    "dataclass_and_enum": "import dataclasses, enum\n@dataclasses.dataclass\nclass S:\n    scale: float = 2.0\n"
                          "class Stage(enum.Enum):\n    READY = 1\nreturn S().scale + Stage.READY.value",
    "sparse_values": "g = torch.sparse_coo_tensor([[0]], [float('inf')], (2,))\nreturn bool(torch.isfinite("
                     "g.coalesce().values()).all())",
    "hint_naming_gradscaler": "def f(s: torch.amp.GradScaler | None = None) -> str:\n    return 'GradScaler'\nreturn f()",
}
HONEST_RESULTS = {"private_on_own_object": 2, "items_augmented": 8, "super_and_type_name": "EE",
                  "format_and_fstring": "a 2.00.1", "foreach_kernel": 2.0, "grad_writes": [6.0, 2.0],
                  "match_plain_values": 2, "dataclass_and_enum": 3.0, "sparse_values": False,
                  "hint_naming_gradscaler": "GradScaler"}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_habit_runs(tmp_path: Path, name: str) -> None:
    assert load(tmp_path, HONEST[name]).run(optimizer()) == HONEST_RESULTS[name]


@pytest.fixture()
def counts() -> Any:
    guards.DELEGATION_CALLS.clear()
    yield guards.DELEGATION_CALLS
    guards.DELEGATION_CALLS.clear()


@pytest.mark.parametrize("body, what", [
    ("return torch.amp.GradScaler('cpu')", "torch.amp.GradScaler"),
    ("from torch.cuda.amp import GradScaler as G\nreturn G()", "torch.amp.GradScaler"),
    ("return getattr(torch, '_amp_' + 'update_scale_')(1)", "torch._amp_update_scale_"),
    ("return torch._amp_foreach_non_finite_check_and_unscale_([], None, None)",
     "torch._amp_foreach_non_finite_check_and_unscale_"),
    ("return type(target)('cpu')", "torch.amp.GradScaler"),  # a real scaler's class, reached from an instance
])
def test_task1_delegation_raises_and_is_counted(tmp_path: Path, counts: dict[str, int], body: str, what: str) -> None:
    module = load(tmp_path, body)
    with pytest.raises(RuntimeError, match="not allowed in Task 1"):
        module.run(torch.amp.GradScaler("cpu"))
    assert counts == {what: 1}


def test_subclassing_gradscaler_counts_when_defined(tmp_path: Path, counts: dict[str, int]) -> None:
    load(tmp_path, "class S(torch.amp.GradScaler):\n    pass\nreturn S").run(None)
    assert counts == {"torch.amp.GradScaler": 1}


def test_naming_gradscaler_counts_nothing(tmp_path: Path, counts: dict[str, int]) -> None:
    module = load(tmp_path, '"""Like torch.amp.GradScaler."""\nreference: torch.amp.GradScaler | None = None\n'
                            'kind = torch.amp.GradScaler\nreturn isinstance(target, kind), "GradScaler"')
    assert module.run(object()) == (False, "GradScaler")
    assert counts == {}


def test_amp_step_alone_may_use_torch_scaler(tmp_path: Path, counts: dict[str, int]) -> None:
    """Task 2's process (amp_step.py without loss_scaler.py) gets torch's real scaler."""
    module = load(tmp_path, "return torch.amp.GradScaler('cpu', init_scale=8.0).get_scale()", file="amp_step.py")
    assert module.run(None) == 8.0 and counts == {}


def test_the_refusal_cannot_be_undone(tmp_path: Path, counts: dict[str, int]) -> None:
    module = load(tmp_path, "for home in (torch.amp, torch.cuda.amp):\n    try:\n        home.GradScaler = None\n"
                            "    except PermissionError:\n        pass\nreturn torch.amp.GradScaler()")
    with pytest.raises(RuntimeError, match="not allowed in Task 1"):
        module.run(None)
    assert torch.amp.GradScaler is guards._REFERENCE_SCALER  # the real module was never written


def test_the_handout_lists_exactly_the_importable_modules() -> None:
    """The handout's "Imports" rule names every module the guards let a submission import, and no other."""
    handout = (Path(__file__).resolve().parent.parent / "assignment" / "README.md").read_text(encoding="utf-8")
    rule = handout.split("* **Imports** other than", 1)[1].split("\n* ", 1)[0]
    named = set(re.findall(r"`([a-z_][a-z_.]*)`", rule)) - {"loss_scaler", "amp_step"}
    unnamed_aliases = {"typing_extensions", "collections.abc", "torch.cuda.amp", "torch.cpu.amp"}
    assert named == set(guards.ALLOWED_MODULES) - unnamed_aliases


def test_a_read_allowed_before_does_not_open_others(tmp_path: Path) -> None:
    """The guards remember reads their rules allowed (per class and name): that memory never lets through a read
    the rules refuse: the same private name on an object the submission does not own, a module's private member
    after its public ones, a private name of a class the submission defines later."""
    module = load(tmp_path, """
        class Mine:
            def __init__(self):
                self._steps = 0
        mine = Mine()
        for _ in range(3):
            mine._steps = mine._steps + 1  # allowed, then remembered
            torch.ones(1)  # a module member: allowed, then remembered
        if target == "opt":
            return optimizer_probe._steps
        if target == "module":
            return torch._C
        class Later:
            pass
        return Later()._hidden
    """.replace("optimizer_probe", "target_opt"))
    module.target_opt = optimizer()
    module.target_opt._steps = 1  # a private attribute on the harness's own object
    for target in ("opt", "module"):
        with pytest.raises(PolicyError):
            module.run(target)
    with pytest.raises(AttributeError):  # allowed (its class is the submission's), and simply absent
        module.run("later")
