"""How a typed, versioned document is read back from JSON and addressed by the state machines: the one reader
behind the pipeline's ``Plan`` (plan_model.py), the ``DeployPlan`` (deploy_plan.py) and the ``PromotePlan``
(promote_plan.py).

A ``Document`` names the document (``plan``, ``deploy``, ``promotion``: the first word of every error), its
schema version and its error class. ``Document.read`` accepts exactly the dataclass's fields with their types
(nested dataclasses, lists, string-keyed objects, optional values, ``Any`` for content that is an AWS request
or free-form) and refuses anything else with one line naming the field; ``Document.path`` is a field's JSONPath
in the state machine, refusing a name the dataclass does not have, so a renamed field breaks the synth and its
test, not an execution. ``Typed`` is what every such dataclass has of it: ``to_json``, ``from_json`` and ``path``,
once, for the document the class names where it is declared (``class Plan(Typed, document=DOCUMENT)``), and
it makes the class a frozen, keyword-only dataclass whose first field is ``schema_version``, the document's
version, so the version is written once, in the ``Document``.

Stdlib only: the Lambda bundle copies the core.
"""

from __future__ import annotations

import inspect
import types
from dataclasses import asdict, dataclass, fields, is_dataclass
from functools import cache
from typing import Any, ClassVar, Self, Union, dataclass_transform, get_args, get_origin, get_type_hints


@dataclass(frozen=True)
class Document:
    """One kind of typed document: its ``name`` (error prefix), the state machine's ``root`` path where the
    document is kept, its ``version`` and the ``error`` it raises (a ValueError subclass)."""

    name: str
    root: str
    version: int
    error: type[ValueError]

    @property
    def _schema(self) -> str:
        return f"{self.name} schema version {self.version}"

    def read(self, kind: type, doc: Any) -> Any:
        """``kind`` (a dataclass with a ``schema_version`` field) from ``doc``: the version first (a document
        of another version is refused as such, not for its first odd field), then every field."""
        if not isinstance(doc, dict):
            raise self.error(f"{self.name}: expected a JSON object, got {type(doc).__name__}")
        if "schema_version" not in doc:
            raise self.error(
                f"{self.name}.schema_version: missing; accepted: a {self.name} written with schema_version"
            )
        version = doc["schema_version"]
        if isinstance(version, bool) or version != self.version:
            raise self.error(
                f"{self.name}.schema_version: {shown(version)} is not accepted; accepted: {self.version} (the "
                f"version this hfpipe reads; a {self.name} of another version came from another release)"
            )
        return self._read(kind, doc, self.name)

    def path(self, kind: type, owner: str, parts: tuple[str, ...]) -> str:
        """The JSONPath of the field ``parts`` of ``kind`` under ``root``; ValueError naming ``owner`` (e.g.
        ``Plan.path``) for a name the document does not have."""
        hint: Any = kind
        for i, part in enumerate(parts):
            hints = hints_of(hint) if _is_dataclass_type(hint) else {}
            if part not in hints:
                raise ValueError(
                    f"{owner}: {'.'.join(parts[: i + 1])!r} is not a field of the {self.name} "
                    f"(schema version {self.version})"
                )
            hint = _optional_of(hints[part])
        return ".".join((self.root, *parts))

    def read_part(self, kind: type, doc: Any, where: str) -> Any:
        """A nested part of the document on its own (e.g. what a state hands back of it), named ``where``."""
        return self._read(kind, doc, where)

    def _read(self, kind: Any, doc: Any, where: str) -> Any:
        """A dataclass from its JSON object: every field present, none unknown, each of its type."""
        if not isinstance(doc, dict):
            raise self.error(f"{where}: {shown(doc)} is not accepted; accepted: an object")
        hints = hints_of(kind)
        unknown = sorted(set(doc) - set(hints))
        if unknown:
            raise self.error(f"{where}.{unknown[0]}: unknown field; accepted: the fields of {self._schema}")
        missing = [name for name in hints if name not in doc]
        if missing:
            raise self.error(f"{where}.{missing[0]}: missing; {self._schema} requires it")
        return kind(**{name: self._value(doc[name], hint, f"{where}.{name}") for name, hint in hints.items()})

    def _value(self, value: Any, hint: Any, where: str) -> Any:
        """``value`` checked against ``hint`` (nested dataclasses built), or the error naming ``where``."""
        if hint is Any:
            return value
        if get_origin(hint) in (Union, types.UnionType):
            return self._union(value, hint, where)
        if is_dataclass(hint):
            return self._read(hint, value, where)
        origin = get_origin(hint)
        if origin is list and isinstance(value, list):
            return [self._value(item, get_args(hint)[0], f"{where}[{i}]") for i, item in enumerate(value)]
        if origin is dict and isinstance(value, dict):
            for key in value:
                if not isinstance(key, str):  # JSON keys always are; a dict built in Python may not be
                    raise self.error(f"{where}: key {shown(key)} is not accepted; accepted: a string")
            return {
                key: self._value(item, get_args(hint)[1], f"{where}.{key}") for key, item in value.items()
            }
        ok = (
            (hint is bool and isinstance(value, bool))
            or (hint is int and isinstance(value, int) and not isinstance(value, bool))
            or (hint is float and isinstance(value, int | float) and not isinstance(value, bool))
            or (hint is str and isinstance(value, str))
        )
        if not ok:
            raise self.error(f"{where}: {shown(value)} is not accepted; accepted: {type_name(hint)}")
        return value

    def _union(self, value: Any, hint: Any, where: str) -> Any:
        options = get_args(hint)
        if value is None and type(None) in options:
            return None
        others = [option for option in options if option is not type(None)]
        if len(others) == 1 and others[0] not in (bool, int, float, str):
            # An optional object or list: its own error names the field inside it that is wrong.
            return self._value(value, others[0], where)
        for option in options:
            if option is not type(None):
                try:
                    return self._value(value, option, where)
                except self.error:
                    continue
        raise self.error(f"{where}: {shown(value)} is not accepted; accepted: {type_name(hint)}")


@dataclass_transform(kw_only_default=True, frozen_default=True)
class Typed:
    """A typed document's dataclass: ``to_json`` writes it, ``from_json`` reads it back through its ``Document``
    (every field, each of its type, or the document's error naming the field), ``path`` addresses a field in
    the state machine. The subclass names its document, ``class Plan(Typed, document=DOCUMENT)``, and is made a
    frozen, keyword-only dataclass whose first field is ``schema_version``, the document's version."""

    #: The document this class is (set from the class statement's ``document``).
    _document: ClassVar[Document]
    #: What ``dataclasses.asdict`` needs of the subclass (each one is a dataclass).
    __dataclass_fields__: ClassVar[dict[str, Any]]
    #: The first field of every document: its ``Document``'s version, written once there.
    schema_version: int

    def __init_subclass__(cls, *, document: Document, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._document = document
        cls.__annotations__ = {"schema_version": "int", **inspect.get_annotations(cls)}
        cls.schema_version = document.version
        dataclass(frozen=True, kw_only=True)(cls)

    def to_json(self) -> dict[str, Any]:
        """The document as a JSON-able dict (what its step returns and the state machine keeps)."""
        return asdict(self)

    @classmethod
    def from_json(cls, doc: Any) -> Self:
        """The document in ``doc``, or the document's error for another schema version, a missing, unknown
        or wrongly typed field."""
        read = cls._document.read(cls, doc)
        assert isinstance(read, cls)
        return read

    @classmethod
    def path(cls, *parts: str) -> str:
        """The state machine's JSONPath of a field under the document's root (``Plan.path("gate", "enabled")``
        is ``$.plan.gate.enabled``); ValueError naming ``<Class>.path`` for a name the document does not have."""
        return cls._document.path(cls, f"{cls.__name__}.path", parts)


def _is_dataclass_type(hint: Any) -> bool:
    return isinstance(hint, type) and is_dataclass(hint)


def _optional_of(hint: Any) -> Any:
    """``X`` of ``X | None`` (a path goes on into an optional nested document), else ``hint``."""
    if get_origin(hint) in (Union, types.UnionType):
        options = [a for a in get_args(hint) if a is not type(None)]
        if len(options) == 1:
            return options[0]
    return hint


@cache
def hints_of(kind: Any) -> dict[str, Any]:
    """A dataclass's field types, resolved (the annotations are strings under ``from __future__``)."""
    names = {f.name for f in fields(kind)}
    return {k: v for k, v in get_type_hints(kind).items() if k in names}


def shown(value: Any) -> str:
    """``value`` as an error quotes it: its repr, cut at 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def type_name(hint: Any) -> str:
    """What an error says a field accepts."""
    if hint is Any:
        return "any JSON value"
    if get_origin(hint) in (Union, types.UnionType):
        return " or ".join(type_name(a) for a in get_args(hint))
    if hint is type(None):
        return "null"
    if is_dataclass(hint):
        return "an object"
    if get_origin(hint) is list:
        return f"a list of {type_name(get_args(hint)[0])}"
    if get_origin(hint) is dict:
        return f"an object of {type_name(get_args(hint)[1])}"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}[hint]
