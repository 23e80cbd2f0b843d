"""pydantic validation errors told as the user's key paths, with a fix for each."""

from __future__ import annotations

import difflib
import enum
import re
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pydantic
from pydantic import BaseModel, Secret, SecretBytes, SecretStr, Tag

from shared.settings._problems import ConfigError, ConfigProblem, KeySegment, format_key_path

_EXPECTED = {
    "string_type": "text",
    "string_unicode": "text",
    "bytes_type": "text",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "decimal_type": "a number",
    "decimal_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "list_type": "a list",
    "tuple_type": "a list",
    "set_type": "a list",
    "frozen_set_type": "a list",
    "none_required": "null",
    "url_type": "a URL",
    "url_parsing": "a URL",
    "url_scheme": "a URL",
    "path_type": "a path",
    "datetime_type": "a date and time",
    "datetime_parsing": "a date and time",
    "date_type": "a date",
    "date_parsing": "a date",
    "time_type": "a time of day",
    "time_parsing": "a time of day",
    "time_delta_type": "a duration",
    "time_delta_parsing": "a duration",
    "uuid_type": "a UUID",
    "uuid_parsing": "a UUID",
}
_QUOTED = re.compile(r"'([^']*)'")


@dataclass(frozen=True)
class _Located:
    """Where an error's `loc` points in the user's terms, and what type lives there."""

    path: list[KeySegment]
    annotation: Any  # None when the walk lost track of the type
    parent: Any


def _unwrap(annotation: Any) -> Any:
    """Strip Annotated and the None of an Optional: what remains is what the user writes."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif _is_union(annotation) and len(_members(annotation)) == 1:
            annotation = _members(annotation)[0]
        else:
            return annotation


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def _members(annotation: Any) -> list[Any]:
    return [member for member in get_args(annotation) if member is not type(None)]


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _key_of(name: str, info: pydantic.fields.FieldInfo) -> str:
    if isinstance(info.validation_alias, str):
        return info.validation_alias
    return info.alias or name


def model_keys(model: type[BaseModel]) -> list[str]:
    """The keys a user may write for `model`, as spelled in the file (aliases)."""
    return [_key_of(name, info) for name, info in model.model_fields.items()]


def _child(annotation: Any, segment: KeySegment) -> Any:
    if _is_model(annotation):
        for name, info in annotation.model_fields.items():
            if segment in (name, _key_of(name, info)):
                return info.annotation
        return None
    origin = get_origin(annotation)
    args = get_args(annotation)
    if isinstance(origin, type) and issubclass(origin, Mapping) and len(args) == 2:
        return args[1]
    if origin is tuple and args and args[-1] is not Ellipsis:
        return args[segment] if isinstance(segment, int) and segment < len(args) else None
    if isinstance(origin, type) and issubclass(origin, Sequence | set | frozenset) and args:
        return args[0]
    return None


def _type_name(annotation: Any) -> str | None:
    origin = get_origin(annotation)
    if origin is not None and isinstance(origin, type):
        inner = [_type_name(arg) for arg in get_args(annotation)]
        return f"{origin.__name__}[{','.join(name or '?' for name in inner)}]"
    return annotation.__name__ if isinstance(annotation, type) else None


def _literal_values(annotation: Any) -> list[Any]:
    annotation = _unwrap(annotation)
    if get_origin(annotation) is Literal:
        return list(get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [member.value for member in annotation]
    return []


def _member_for_tag(union: Any, tag: str) -> Any:
    """The union member a pydantic union tag (discriminator value or type name) stands for."""
    for member in _members(union):
        base = member
        metadata: tuple[Any, ...] = ()
        if get_origin(member) is Annotated:
            base, *rest = get_args(member)
            metadata = tuple(rest)
        if any(isinstance(item, Tag) and item.tag == tag for item in metadata):
            return base
        if _type_name(_unwrap(base)) == tag.replace(" ", ""):
            return base
        if _is_model(base) and any(
            tag in map(str, _literal_values(info.annotation)) for info in base.model_fields.values()
        ):
            return base
    return None


def locate(model: type[BaseModel] | None, loc: Sequence[KeySegment]) -> _Located:
    """Follow `loc` through the model's types, dropping the segments pydantic adds for union tags."""
    annotation: Any = model
    parent: Any = None
    path: list[KeySegment] = []
    for segment in loc:
        annotation = _unwrap(annotation)
        if annotation is not None and _is_union(annotation):
            annotation = _member_for_tag(annotation, str(segment))
            continue
        parent = annotation
        path.append(segment)
        annotation = None if annotation is None else _child(annotation, segment)
    return _Located(path, annotation, parent)


def _is_secret(annotation: Any) -> bool:
    annotation = _unwrap(annotation)
    origin = get_origin(annotation) or annotation
    return isinstance(origin, type) and issubclass(origin, SecretStr | SecretBytes | Secret)


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


def _got(value: Any) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple | set | frozenset):
        return "a list"
    if value is None or isinstance(value, bool | int | float):
        return _shown(value)
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


@dataclass(frozen=True)
class _Problem:
    key_path: str
    message: str
    fix: str
    expected: str | None = None  # set for type errors, which union members may add one per member
    got: str | None = None


def _problem(error: Mapping[str, Any], model: type[BaseModel] | None, *, env_key: str | None) -> _Problem:
    """One problem; `env_key` set means the key path is that environment variable."""
    kind: str = error["type"]
    located = locate(model, error["loc"])
    path = located.path
    ctx: Mapping[str, Any] = error.get("ctx") or {}
    key_path = env_key or format_key_path(path)
    last = path[-1] if path else ""
    secret = _is_secret(located.annotation)
    value = error.get("input")
    if kind == "extra_forbidden":
        allowed = model_keys(located.parent) if _is_model(located.parent) else []
        close = difflib.get_close_matches(str(last), allowed, n=1)
        hint = f" (did you mean `{close[0]}`?)" if close else ""
        fix = "remove it or check the spelling"
        if allowed:
            fix += f"; allowed keys here: {', '.join(sorted(allowed))}"
        return _Problem(key_path, f"unknown key `{last}`{hint}", fix)
    if kind == "missing":
        if env_key:
            return _Problem(key_path, "required setting is missing", f"set {env_key}")
        return _Problem(key_path, f"required key `{last}` is missing", f"add `{last}: ...`")
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        return _union_tag_problem(kind, ctx, located, env_key)
    if kind in ("literal_error", "enum"):
        choices = [_shown(choice) for choice in _literal_values(located.annotation)]
        choices = choices or _QUOTED.findall(str(ctx.get("expected", "")))
        fix = f"use one of {', '.join(choices)}" if choices else f"use {ctx.get('expected')}"
        message = "value is not one of the choices" if secret else f"{_got(value)} is not one of the choices"
        return _Problem(key_path, message, fix)
    if kind in _EXPECTED:
        expected = _EXPECTED[kind]
        got = None if secret else _got(value)
        return _Problem(key_path, error["msg"], _expected_fix(expected, got), expected, got)
    message = str(error["msg"]).removeprefix("Value error, ")
    return _Problem(key_path, message, "change the value so that it satisfies this")


def _union_tag_problem(kind: str, ctx: Mapping[str, Any], located: _Located, env_key: str | None) -> _Problem:
    """The key that picks the union member is missing or names no member."""
    discriminator = str(ctx.get("discriminator", "")).strip("'")
    # A callable discriminator (shown as `name()`) reads the entry's shape, not a key the user writes.
    keyed = discriminator.isidentifier()
    tags = _QUOTED.findall(str(ctx.get("expected_tags", "")))
    if keyed:
        tags = tags or _union_tags(located.annotation, discriminator)
        key_path = env_key or format_key_path([*located.path, discriminator])
        use_one_of = f"use one of {', '.join(tags)}"
        if kind == "union_tag_invalid":
            return _Problem(key_path, f"unknown {discriminator} {ctx.get('tag')!r}", use_one_of)
        return _Problem(
            key_path,
            f"required key `{discriminator}` is missing",
            f"add `{discriminator}: ...`; {use_one_of}",
        )
    key_path = env_key or format_key_path(located.path)
    return _Problem(
        key_path, "the entry matches none of the allowed forms", "write it in one of the documented forms"
    )


def _union_tags(annotation: Any, discriminator: str) -> list[str]:
    """The values the discriminator key may take, read from the union members' Literal fields."""
    union = _unwrap(annotation)
    values: list[str] = []
    for member in _members(union) if _is_union(union) else []:
        base = _unwrap(member)
        fields = base.model_fields if _is_model(base) else {}
        for name, info in fields.items():
            if discriminator in (name, _key_of(name, info)):
                values += [_shown(value) for value in _literal_values(info.annotation)]
    return values


def _expected_fix(expected: str, got: str | None) -> str:
    return f"expected {expected}" if got is None else f"expected {expected}, got {got}"


def _merge(problems: list[_Problem]) -> list[_Problem]:
    """One problem per key path for the type errors a plain union reports once per member."""
    merged: list[_Problem] = []
    for problem in problems:
        previous = merged[-1] if merged else None
        if previous and previous.expected and problem.expected and previous.key_path == problem.key_path:
            expected = f"{previous.expected} or {problem.expected}"
            merged[-1] = _Problem(
                problem.key_path,
                "value matches none of the allowed types",
                _expected_fix(expected, problem.got),
                expected,
                problem.got,
            )
        else:
            merged.append(problem)
    return merged


def validation_problems(
    exc: pydantic.ValidationError,
    model: type[BaseModel] | None,
    *,
    file: str,
    origins: Mapping[str, str] | None = None,
) -> list[ConfigProblem]:
    """The problems of a configuration file; `origins` maps key paths to the variables that set them."""
    problems = _merge([_problem(error, model, env_key=None) for error in exc.errors(include_url=False)])
    result: list[ConfigProblem] = []
    for problem in problems:
        message = problem.message
        for key_path, variable in (origins or {}).items():
            if problem.key_path == key_path or problem.key_path.startswith((f"{key_path}.", f"{key_path}[")):
                message += f" (set by {variable})"
                break
        result.append(ConfigProblem(file, problem.key_path, message, problem.fix))
    return result


def settings_error(exc: pydantic.ValidationError, *, env_prefix: str) -> ConfigError:
    """ConfigError for a per-server pydantic-settings class; key paths are the variable names.

    Raise it `from None`: the ValidationError's own text shows the inputs, which may be secrets.
    """
    problems: list[_Problem] = []
    for error in exc.errors(include_url=False):
        segments = [str(segment) for segment in error["loc"]]
        name = "__".join(segments).upper()
        env_key = name if name.startswith(env_prefix.upper()) else f"{env_prefix}{name}"
        problem = _problem(error, None, env_key=env_key)
        if error["type"] == "extra_forbidden":
            problem = _Problem(env_key, "unknown setting", "unset it or check the spelling")
        elif problem.expected is not None and error["type"] not in _ECHO_SAFE:
            # Without the class the field type is unknown: it may be a secret, so no value is shown.
            problem = _Problem(
                env_key, problem.message, _expected_fix(problem.expected, None), problem.expected
            )
        problems.append(problem)
    return ConfigError(
        [
            ConfigProblem("environment", problem.key_path, problem.message, problem.fix)
            for problem in _merge(problems)
        ]
    )


# Errors only numbers, booleans and the like can raise: a secret (text) never fails this way.
_ECHO_SAFE = frozenset({"int_parsing", "int_from_float", "float_parsing", "decimal_parsing", "bool_parsing"})
