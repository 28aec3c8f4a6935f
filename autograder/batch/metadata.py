"""Gradescope's ``submission_metadata.yml``: who submitted each folder of an "Export Submissions" archive, and when.

:mod:`autograder.batch.inputs` reads it when it finds an export; the roster (:mod:`autograder.batch.roster`) names
GitHub Classroom's repositories with the same :class:`Submitter`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

METADATA = "submission_metadata.yml"


@dataclass(frozen=True)
class Submitter:
    name: str = ""
    sid: str = ""
    email: str = ""


def _plain(value: Any) -> Any:
    """Ruby-flavoured YAML (``:key:`` symbols) into plain dicts with bare keys."""
    if isinstance(value, dict):
        return {str(k).lstrip(":"): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def parse_metadata(text: str) -> dict[str, tuple[Submitter, ...]]:
    """Map submission folder -> submitters from a ``submission_metadata.yml`` text (:func:`read_metadata`)."""
    return {folder: people for folder, (people, _) in read_metadata(text).items()}


def read_metadata(text: str) -> dict[str, tuple[tuple[Submitter, ...], str]]:
    """Map submission folder -> (submitters, created_at) from a ``submission_metadata.yml`` text.

    The file looks like::

        submission_123456:
          :submitters:
          - :name: Jane Doe
            :sid: '1234'
            :email: jane@example.edu
          :created_at: 2024-01-01 12:00:00.000000000 -08:00
          :score: 90.0

    Unknown tags (Ruby objects such as ``!ruby/object:BigDecimal``) are read as plain
    values; nothing is ever constructed from them.

    Raises:
        ValueError: if the text is not YAML of that shape.
    """
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def any_tag(loader: yaml.SafeLoader, _suffix: str, node: yaml.Node) -> Any:
        if isinstance(node, yaml.MappingNode):
            return loader.construct_mapping(node, deep=True)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_scalar(node)  # type: ignore[arg-type]

    Loader.add_multi_constructor("!", any_tag)
    Loader.add_multi_constructor("tag:", any_tag)
    try:
        data = _plain(yaml.load(text, Loader=Loader))  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ValueError(f"{METADATA} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{METADATA} does not map submission folders to their data")
    found: dict[str, tuple[tuple[Submitter, ...], str]] = {}
    for folder, entry in data.items():
        people = entry.get("submitters") if isinstance(entry, dict) else None
        if not isinstance(people, list):
            continue
        found[str(folder)] = (tuple(
            Submitter(*(str(person.get(key) or "").strip() for key in ("name", "sid", "email")))
            for person in people if isinstance(person, dict)), str(entry.get("created_at") or "").strip())
    return found
