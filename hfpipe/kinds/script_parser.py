"""What a recipe's own training script's parser accepts, read from its text with `ast` (it is never imported
or run): `argparse` `add_argument("--name", type=..., choices=[...], action=...)` calls, and the dataclasses a
`HfArgumentParser(...)` is given (fields defined in the script, with their annotations; transformers'
`TrainingArguments` / `Seq2SeqTrainingArguments` by the fields hfpipe/kinds/arguments.json lists for them).

`read(text)` gives either the arguments, in hfpipe/kinds/arguments.py's spec shape (`{"type": "int"}`, ...,
and `{"type": "flag"}` for an argparse flag that takes no value), or the reason they cannot be known without
running the script: no parser found, `parse_known_args` or `return_remaining_strings` (it takes arguments it
does not declare), `**kwargs` or computed names, sub-commands, a dataclass defined outside the file. Stdlib.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from hfpipe.kinds import arguments

#: add_argument's actions that take no value on the command line.
_FLAGS = {"store_true", "store_false", "store_const", "count", "help", "version"}
_TYPES = {"int": "int", "float": "float", "str": "str", "bool": "bool"}
_TRAINERS = ("TrainingArguments", "Seq2SeqTrainingArguments")


@dataclass(frozen=True)
class Parser:
    """The arguments a script's parser accepts ({} and a reason when they cannot be read statically).

    `specs`: its `--name` options; `short`: its one-letter `-k` options (the toolkit passes a one-letter
    hyperparameter as `-k`: sagemaker_training's mapping.to_cmd_args); `required`: the names it exits without
    (`required=True`, a dataclass field without a default); `bool_typed`: argparse options with `type=bool`;
    `partial`: why it takes more arguments than the file shows (None: `specs` and `short` are all of them)."""

    specs: dict[str, dict[str, Any]] = field(default_factory=dict)
    reason: str | None = None  # why the arguments are not known; None: `specs` is all the parser takes
    abbrev: bool = True  # argparse's allow_abbrev: a unique prefix of an option is accepted too
    short: dict[str, dict[str, Any]] = field(default_factory=dict)
    required: frozenset[str] = frozenset()
    bool_typed: frozenset[str] = frozenset()
    partial: str | None = None


class _Unreadable(Exception):
    pass


def read(text: str) -> Parser:
    """The parser `text` (a script's source) builds, as far as it can be read without running it."""
    try:
        tree = ast.parse(text)
    except SyntaxError as err:
        return Parser(reason=f"it is not valid Python ({err.msg}, line {err.lineno})")
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    try:
        return _read(tree, calls)
    except _Unreadable as err:
        return Parser(reason=str(err))


def _name(node: ast.AST) -> str:
    """`f` of `f(...)`, `m.f(...)`: the called name."""
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _read(tree: ast.Module, calls: list[ast.Call]) -> Parser:
    names = [_name(c.func) for c in calls]
    if "parse_known_args" in names or "parse_known_intermixed_args" in names:
        raise _Unreadable("it parses with parse_known_args, which takes arguments it does not declare")
    if "add_subparsers" in names:
        raise _Unreadable("its parser has sub-commands")
    if any(k.arg == "return_remaining_strings" for c in calls for k in c.keywords):
        raise _Unreadable(
            "it parses with return_remaining_strings, which takes arguments it does not declare"
        )
    parsers = [c for c in calls if _name(c.func) in {"ArgumentParser", "HfArgumentParser"}]
    if not parsers:
        raise _Unreadable("no argparse.ArgumentParser or HfArgumentParser was found in it")
    if len(parsers) > 1:
        raise _Unreadable(f"it builds {len(parsers)} parsers")
    found = _Found()
    if _name(parsers[0].func) == "HfArgumentParser":
        found.specs.update(_dataclass_arguments(tree, parsers[0], found.required))
    for call in calls:
        if _name(call.func) == "add_argument":
            _add_argument(call, found)
    abbrev = not any(
        k.arg == "allow_abbrev" and isinstance(k.value, ast.Constant) and k.value.value is False
        for k in parsers[0].keywords
    )
    return Parser(
        specs=found.specs,
        abbrev=abbrev,
        short=found.short,
        required=frozenset(found.required),
        bool_typed=frozenset(found.bool_typed),
        partial=_partial(tree, parsers[0]),
    )


@dataclass
class _Found:
    specs: dict[str, dict[str, Any]] = field(default_factory=dict)
    short: dict[str, dict[str, Any]] = field(default_factory=dict)
    required: set[str] = field(default_factory=set)
    bool_typed: set[str] = field(default_factory=set)


#: What a script does with its parser that adds no argument.
_PARSER_METHODS = {"parse_args", "parse_intermixed_args", "print_help", "print_usage", "format_help", "error"}


def _partial(tree: ast.Module, parser: ast.Call) -> str | None:
    """Why the parser takes arguments the file does not show: `parents=[...]`, or the parser handed to a
    function the file does not define (a helper from another module adding its own)."""
    if any(k.arg == "parents" for k in parser.keywords):
        return "its parser also takes the arguments of its parents=[...], which this check does not read"
    names = {
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and n.value is parser
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        given = any(isinstance(a, ast.Name) and a.id in names for a in call.args)
        called = _name(call.func)
        if given and called not in defined and called not in _PARSER_METHODS:
            return (
                f"its parser is given to {called}() (line {call.lineno}), which is not defined in the script "
                "and may add arguments"
            )
    return None


def _constant(node: ast.AST, what: str) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise _Unreadable(f"{what} is computed ({ast.unparse(node)}), not written out") from None


def _add_argument(call: ast.Call, found: _Found) -> None:
    """The `--name` and one-letter `-k` option strings of one add_argument call (positionals: none), with
    whether it is required or reads its value with `type=bool`."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        raise _Unreadable(f"add_argument is called with *args or **kwargs (line {call.lineno})")
    options = [_constant(a, f"an argument name on line {call.lineno}") for a in call.args]
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    spec: dict[str, Any]
    action = keywords.get("action")
    converter = _name(keywords["type"]) if "type" in keywords else "str"
    if action is not None and _constant(action, "an action") in _FLAGS:
        spec = {"type": "flag"}
    elif "choices" in keywords:
        spec = {"type": "choice", "choices": [str(c) for c in _constant(keywords["choices"], "choices")]}
    else:
        spec = {"type": _TYPES.get(converter, "other")}
        if converter == "bool":  # type=bool: bool("False") is True, so any word passes
            spec = {"type": "str"}
    nargs = keywords.get("nargs")
    if nargs is not None and _constant(nargs, "nargs") in {"+", "*"}:
        spec["nargs"] = "+"
    strings = [o for o in options if isinstance(o, str)]
    long = [o[2:] for o in strings if o.startswith("--")]
    short = [o[1:] for o in strings if len(o) == 2 and o[0] == "-" and o[1] != "-"]
    found.specs.update(dict.fromkeys(long, spec))
    found.short.update(dict.fromkeys(short, spec))
    named = long or short
    required = keywords.get("required")
    if named and required is not None and _constant(required, "required") is True:
        found.required.add(named[0] if long else f"-{named[0]}")
    if converter == "bool" and "choices" not in keywords:
        found.bool_typed.update(long + short)


def _dataclass_arguments(tree: ast.Module, parser: ast.Call, required: set[str]) -> dict[str, dict[str, Any]]:
    """The fields of the dataclasses HfArgumentParser is given, as its arguments (`required`: those without a
    default, which HfArgumentParser makes required)."""
    if not parser.args:
        raise _Unreadable("HfArgumentParser is given no dataclasses that can be read")
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    assigned = {
        t.id: n.value
        for n in tree.body
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    given = parser.args[0]
    if isinstance(given, ast.Name) and given.id in assigned:
        given = assigned[given.id]
    items = given.elts if isinstance(given, ast.Tuple | ast.List) else [given]
    specs: dict[str, dict[str, Any]] = {}
    for item in items:
        specs.update(_class_fields(_name(item), classes, required))
    return specs


def _class_fields(
    name: str, classes: dict[str, ast.ClassDef], required: set[str]
) -> dict[str, dict[str, Any]]:
    """A dataclass's fields (its bases' first): one defined in the script, or transformers' trainer classes."""
    if name in _TRAINERS:
        found = arguments.trainer_arguments(name)
        assert found is not None, name  # both are in the manifest
        return found
    node = classes.get(name)
    if node is None:
        raise _Unreadable(f"its parser reads {name or 'a dataclass'}, which is not defined in the script")
    specs: dict[str, dict[str, Any]] = {}
    for base in node.bases:
        specs.update(_class_fields(_name(base), classes, required))
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and _init(stmt):
            spec = _annotation(stmt.annotation)
            if spec is not None:
                specs[stmt.target.id] = spec
                if _no_default(stmt):
                    required.add(stmt.target.id)
    return specs


def _no_default(stmt: ast.AnnAssign) -> bool:
    """A field without a default or default_factory: HfArgumentParser makes its option required."""
    value = stmt.value
    if value is None:
        return True
    return (
        isinstance(value, ast.Call)
        and _name(value.func) == "field"
        and not any(k.arg in {"default", "default_factory"} for k in value.keywords)
    )


def _init(stmt: ast.AnnAssign) -> bool:
    """False for `field(init=False)`, which the parser does not take."""
    value = stmt.value
    return not (
        isinstance(value, ast.Call)
        and _name(value.func) == "field"
        and any(
            k.arg == "init" and isinstance(k.value, ast.Constant) and not k.value.value
            for k in value.keywords
        )
    )


def _annotation(node: ast.AST) -> dict[str, Any] | None:
    """The spec HfArgumentParser gives a field of this annotation (None: a ClassVar, not an argument)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a string annotation
        node = ast.parse(node.value, mode="eval").body
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # X | None
        return _annotation(node.right if _is_none(node.left) else node.left)
    if isinstance(node, ast.Subscript):
        outer, inner = _name(node.value), node.slice
        if outer == "ClassVar":
            return None
        if outer == "Optional":
            return _annotation(inner)
        if outer == "Union":  # Union[X, None]
            kept = [e for e in (inner.elts if isinstance(inner, ast.Tuple) else [inner]) if not _is_none(e)]
            return _annotation(kept[0]) if len(kept) == 1 else {"type": "other", "python": "Union"}
        if outer == "Literal":
            values = inner.elts if isinstance(inner, ast.Tuple) else [inner]
            return {"type": "choice", "choices": [str(_constant(v, "a Literal value")) for v in values]}
        if outer in {"list", "List"}:
            return {**(_annotation(inner) or {"type": "other"}), "nargs": "+"}
        return {"type": "other", "python": outer}
    return {"type": _TYPES.get(_name(node), "other")}


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None
