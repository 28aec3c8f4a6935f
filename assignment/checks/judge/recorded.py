"""The public Task-2 checks without a reference ``amp_step``: effects recorded from the grader's.

A Task-2 row is judged by comparing ``amp_step``'s effects with those of a correct one run on
the same inputs.  The grader replays its reference ``amp_step`` (kept in the grader's own files:
copied into a submission it would pass Task 2) and installs its judge here (:func:`install`).
A student's local run has no reference: it reads ``checks/amp_effects.json``, written by
``make student`` from the grader's judge, which holds for each public scenario

* ``correct``: the effects of a correct ``amp_step`` (what a failure is compared with);
* ``accepted``: the effects of every ``amp_step`` that gets the row right while getting one other
  behaviour wrong (one cause, one deduction: another row's mistake does not fail this row);
* ``masked``: the effects of those whose other mistake leaves this row's behaviour no effect, with
  the grader's words for it in every language.

So the verdict is the grader's for a correct ``amp_step`` and for one with a single mistake; effects
no recorded program left (several mistakes at once) are compared with the correct ones.  Tensors are
stored once each, as little-endian float32 in base64 (the probe's values are float32).

Row 2.10 replays every call of the underflow run with the reference too: the grader installs that
replay (:func:`install`'s ``underflow``); a local run judges the row by where training ended and by the first
call that raised an error of its own (:func:`checks.judge.effects.own_error`).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import struct
from pathlib import Path
from typing import Callable, Iterator

from checks.judge.effects import RETURNED_LOSS, Verdict, difference_items, differences
from checks.runners.harness import Json
from checks.words import language

RECORDED = Path(__file__).resolve().parents[1] / "amp_effects.json"
FORMAT = 1
TENSOR_KEYS = ("params", "grads", "backward_grads")
Judge = Callable[[str, dict[str, Json], dict[str, Json]], Verdict]
#: Why the underflow run's calls are not AMP steps, or None (row 2.10).
UnderflowJudge = Callable[[dict[str, Json], dict[str, Json]], "str | None"]

_installed: list[Judge] = []
_underflow: list[UnderflowJudge] = []


def install(judge: Judge, underflow: UnderflowJudge | None = None) -> None:
    """The grader's judges (they replay its reference) decide every row from now on in this process."""
    _installed[:] = [judge]
    _underflow[:] = [underflow] if underflow is not None else []


@contextlib.contextmanager
def installed(judge: Judge, underflow: UnderflowJudge | None = None) -> Iterator[None]:
    """``judge`` (and ``underflow``) decide the rows inside the block (recording the effects, tests)."""
    before = list(_installed), list(_underflow)
    install(judge, underflow)
    try:
        yield
    finally:
        _installed[:], _underflow[:] = before


def case_key(row: str, args: dict[str, Json]) -> str:
    return json.dumps([row, args], sort_keys=True)


def verdict(row: str, args: dict[str, Json], result: dict[str, Json]) -> Verdict:
    """Whether row ``row`` fails for the probe result ``result`` of the scenario ``args``, and why."""
    if _installed:
        return _installed[0](row, args, result)
    return recorded_verdict(row, args, result, load())


def underflow_verdict(args: dict[str, Json], result: dict[str, Json]) -> str | None:
    """Why the underflow run's calls are not AMP steps, where the grader's replay is installed; else None."""
    return _underflow[0](args, result) if _underflow else None


def recorded_verdict(row: str, args: dict[str, Json], result: dict[str, Json], table: dict[str, Json]) -> Verdict:
    """The grader's verdict as recorded in ``table`` (:func:`load`)."""
    case = table["cases"].get(case_key(row, args))
    if case is None:  # a programming error of the checks, never the student's: not an AssertionError
        raise RuntimeError(f"no recorded effects for row {row} with {args}: run `make student`")
    returned, effects = row == RETURNED_LOSS, table["effects"]
    if any(not differences(effects[index], result, returned=returned) for index in case["accepted"]):
        return Verdict([])
    spoken = language()
    for index, lines, masked_by in case["masked"]:
        if not differences(effects[index], result, returned=returned):
            return Verdict(lines[spoken], masked_by[spoken])
    return Verdict.of(difference_items(effects[case["correct"]], result, returned=returned))


@functools.lru_cache(maxsize=1)
def _load(path: Path, stamp: float) -> dict[str, Json]:
    return decode(json.loads(path.read_text(encoding="utf-8")))


def load(path: Path = RECORDED) -> dict[str, Json]:
    """The recorded table, decoded (read once per version of the file)."""
    return _load(path, path.stat().st_mtime)


# --------------------------------------------------------------------------- the file's encoding


def _float32(value: list[float]) -> bytes | None:
    """``value`` packed as little-endian float32, if that loses nothing."""
    packed = struct.pack(f"<{len(value)}f", *value)
    same = all(a == b or (a != a and b != b) for a, b in zip(value, struct.unpack(f"<{len(value)}f", packed)))
    return packed if same else None


def _encode_tensor(value: Json) -> Json:
    """A list of float32 values as base64; anything else (None for no gradient, a note) as it is."""
    if isinstance(value, list) and all(type(v) is float for v in value):
        packed = _float32(value)
        if packed is not None:
            return base64.b64encode(packed).decode("ascii")
    return {"value": value}


def _decode_tensor(entry: Json) -> Json:
    if isinstance(entry, str):
        raw = base64.b64decode(entry)
        return list(struct.unpack(f"<{len(raw) // 4}f", raw))
    return entry["value"]


def encode(cases: dict[str, dict[str, Json]], effects: list[list[dict[str, Json]]]) -> dict[str, Json]:
    """The file's data: ``cases`` refer to ``effects`` (lists of probe steps) by index; each tensor is stored once."""
    tensors: dict[str, int] = {}

    def tensor_id(value: Json) -> int:
        return tensors.setdefault(json.dumps(_encode_tensor(value)), len(tensors))

    steps = [[{**step, **{key: [tensor_id(v) for v in step[key]] for key in TENSOR_KEYS if key in step}}
              for step in record] for record in effects]
    return {"format": FORMAT, "cases": cases, "effects": steps, "tensors": [json.loads(t) for t in tensors]}


def decode(data: dict[str, Json]) -> dict[str, Json]:
    """The table :func:`recorded_verdict` reads: each recorded effects as a probe result (``{"steps": [...]}``)."""
    if data.get("format") != FORMAT:
        raise RuntimeError("checks/amp_effects.json has another format: run `make student`")
    tensors = [_decode_tensor(entry) for entry in data["tensors"]]
    effects = [{"steps": [{**step, **{key: [tensors[i] for i in step[key]] for key in TENSOR_KEYS if key in step}}
                          for step in record]} for record in data["effects"]]
    return {"cases": data["cases"], "effects": effects}
