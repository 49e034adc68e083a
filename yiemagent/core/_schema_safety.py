"""Validators for tool input schemas that may come from a hostile source (an MCP server).

A stock ``jsonschema`` validator fetches a remote ``$ref`` over the network, with no timeout,
while it checks arguments, and matches ``pattern`` with Python's backtracking ``re``. The
validator classes made here never fetch anything (their registry refuses every retrieval: only
the schema itself and the JSON Schema metaschemas can be referenced, ``$id``-named parts of the
schema included) and match ``pattern``, ``patternProperties`` and the property names that
``additionalProperties`` looks at with RE2 (``schema_patterns``), in time linear in the text.

``schema_problem`` walks every subschema a validator can reach, following each ``$ref`` and
``$dynamicRef``, when the tool is built: a reference that does not resolve within the schema is
reported then, not at a call. For a schema from an untrusted source it also reports patterns RE2
cannot run, and ``unevaluatedProperties`` used with ``patternProperties`` (which ``jsonschema``
checks with ``re`` inside a helper this module cannot replace). For your own tools such patterns
are matched with ``re``, as before: you chose them.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import jsonschema.validators
import jsonschema_specifications  # type: ignore[import-untyped]
import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema.exceptions import ValidationError

from yiemagent.core._json_safety import clip
from yiemagent.core._schema_patterns import PatternRefused, TextTooLong, linear_pattern

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

__all__ = ["NO_FETCH_REGISTRY", "safe_validator_class", "schema_problem"]

_QUOTE_CHARS = 120  # characters of a pattern or reference quoted in a refusal
_REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")

Keyword = Callable[[Any, Any, Any, Mapping[str, Any]], Iterator[ValidationError]]


# ``referencing``'s default ``retrieve`` refuses every URI (``NoSuchResource``): nothing outside
# the schema is ever fetched, whatever a ``$ref`` or ``$id`` says.
NO_FETCH_REGISTRY: referencing.Registry[Any] = referencing.Registry()
# What references resolve against: the schema itself (added per validator) and the metaschemas.
_LOCAL: referencing.Registry[Any] = jsonschema_specifications.REGISTRY.combine(NO_FETCH_REGISTRY)


class _Unchecked(ValueError):
    """A text that cannot be matched safely; the message says why."""


def _quote(value: Any) -> str:
    return clip(repr(value), _QUOTE_CHARS)


def _matcher(untrusted: bool) -> Callable[[str, str], bool]:
    """``matches(pattern, text)`` with RE2; a pattern RE2 refuses is matched with ``re`` for a
    trusted schema and raises ``_Unchecked`` for an untrusted one, as does a text too long."""

    def matches(pattern: str, text: str) -> bool:
        if not isinstance(pattern, str):
            raise _Unchecked(f"cannot be checked: the schema's pattern {_quote(pattern)} is not a string")
        try:
            compiled = linear_pattern(pattern)
        except PatternRefused as exc:
            if untrusted:
                raise _Unchecked(
                    f"cannot be checked: the pattern {_quote(pattern)} cannot be run in linear time ({exc})"
                ) from None
            return re.search(pattern, text) is not None
        try:
            return compiled.search(text)
        except TextTooLong as exc:
            raise _Unchecked(f"is too long to check against the pattern {_quote(pattern)} ({exc})") from None

    return matches


def _keywords(untrusted: bool) -> dict[str, Keyword]:
    """The keywords that match patterns, as ``jsonschema`` keyword functions using RE2; their
    messages are ``jsonschema``'s own."""
    matches = _matcher(untrusted)

    def pattern(
        validator: Any, patrn: Any, instance: Any, _schema: Mapping[str, Any]
    ) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "string"):
            return
        try:
            found = matches(patrn, instance)
        except _Unchecked as exc:
            yield ValidationError(f"{instance!r} {exc}")
            return
        if not found:
            yield ValidationError(f"{instance!r} does not match {patrn!r}")

    def pattern_properties(
        validator: Any, patterns: Any, instance: Any, _schema: Mapping[str, Any]
    ) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "object"):
            return
        for patrn, subschema in patterns.items():
            for key, value in instance.items():
                try:
                    found = matches(patrn, key)
                except _Unchecked as exc:
                    yield ValidationError(f"the property name {key!r} {exc}")
                    continue
                if found:
                    yield from validator.descend(value, subschema, path=key, schema_path=patrn)

    def additional_properties(
        validator: Any, extra: Any, instance: Any, schema: Mapping[str, Any]
    ) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "object"):
            return
        extras: list[Any] = []
        for key in instance:
            try:
                if not _declared(key, schema, matches):
                    extras.append(key)
            except _Unchecked as exc:
                yield ValidationError(f"the property name {key!r} {exc}")
        yield from _extras_errors(validator, extra, instance, schema, extras)

    return {
        "pattern": pattern,
        "patternProperties": pattern_properties,
        "additionalProperties": additional_properties,
    }


def _declared(key: Any, schema: Mapping[str, Any], matches: Callable[[str, str], bool]) -> bool:
    """Whether ``properties`` or ``patternProperties`` of ``schema`` cover the property ``key``."""
    if key in schema.get("properties", {}):
        return True
    return any(matches(patrn, key) for patrn in schema.get("patternProperties", {}))


def _extras_errors(
    validator: Any, extra: Any, instance: Any, schema: Mapping[str, Any], extras: list[Any]
) -> Iterator[ValidationError]:
    """``jsonschema``'s ``additionalProperties`` once the undeclared properties are known."""
    if validator.is_type(extra, "object"):
        for key in extras:
            yield from validator.descend(instance[key], extra, path=key)
    elif not extra and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            names = sorted(extras, key=str)
            verb = "was" if len(names) == 1 else "were"
            listed = ", ".join(repr(each) for each in names)
            yield ValidationError(f"Additional properties are not allowed ({listed} {verb} unexpected)")


_classes: dict[tuple[type[Any], bool], type[Validator]] = {}
_classes_lock = threading.Lock()


def safe_validator_class(base: type[Validator], *, untrusted: bool) -> type[Validator]:
    """``base`` (a ``jsonschema`` validator class) with the pattern keywords matched by RE2, and
    an ``evolve`` that keeps to these classes when a subschema names another dialect in
    ``$schema`` (``jsonschema`` would switch to its stock class there). Made once per class."""
    if getattr(base, "_yiem_untrusted", None) is untrusted:
        return base
    stock = getattr(base, "_yiem_base", base)
    with _classes_lock:
        made = _classes.get((stock, untrusted))
        if made is None:
            made = _classes[(stock, untrusted)] = _extend(stock, untrusted)
    return made


def _extend(stock: type[Validator], untrusted: bool) -> type[Validator]:
    keywords = {k: f for k, f in _keywords(untrusted).items() if k in stock.VALIDATORS}
    made: Any = jsonschema.validators.extend(stock, keywords)  # type: ignore[no-untyped-call]
    # Plain class attributes: ``_evolve`` reads them on every subschema it descends into.
    made._yiem_untrusted = untrusted
    made._yiem_base = stock
    made._yiem_fields = tuple((f.name, f.alias) for f in attrs.fields(made) if f.init)
    made.evolve = _evolve
    result: type[Validator] = made
    return result


def _evolve(self: Any, **changes: Any) -> Any:
    """``jsonschema``'s ``evolve``, choosing the subschema's dialect among the safe classes."""
    own = type(self)
    chosen = jsonschema.validators.validator_for(changes.setdefault("schema", self.schema), default=own)
    if chosen is not own:
        chosen = safe_validator_class(chosen, untrusted=own._yiem_untrusted)
    for name, alias in own._yiem_fields:
        if alias not in changes:
            changes[alias] = getattr(self, name)
    return chosen(**changes)


def schema_problem(cls: type[Validator], schema: Mapping[str, Any], *, untrusted: bool) -> str | None:
    """Why a validator of class ``cls`` cannot use ``schema``, or ``None``: a ``$ref``,
    ``$dynamicRef`` or ``$recursiveRef`` reachable from the root that does not resolve within
    the schema (nothing is fetched to find out), and, when ``untrusted``, a reachable pattern
    RE2 refuses or ``unevaluatedProperties`` used with ``patternProperties``. Never raises."""
    try:
        return _walk(cls, schema, untrusted)
    except (ValueError, TypeError, LookupError) as exc:  # e.g. an $id that is not a URI
        return f"cannot be resolved: {clip(str(exc), _QUOTE_CHARS)}"


def _walk(cls: type[Validator], schema: Mapping[str, Any], untrusted: bool) -> str | None:
    """``schema_problem``'s walk: depth first over subschemas and the targets of references."""
    dialect = cls.META_SCHEMA.get("$schema")
    specification = referencing.jsonschema.specification_with(
        dialect if isinstance(dialect, str) else "urn:unknown-dialect",
        default=referencing.Specification.OPAQUE,
    )
    root = specification.create_resource(schema)
    finished: set[int] = set()
    seen: set[int] = set()
    uses = {"unevaluatedProperties": False, "patternProperties": False}
    stack = [(root, _LOCAL.resolver_with_root(root), "")]
    while stack:
        resource, resolver, where = stack.pop()
        contents = resource.contents
        if not isinstance(contents, Mapping) or id(contents) in seen:
            continue
        seen.add(id(contents))
        problem = _endless_reference(specification, contents, resolver, where, finished)
        if problem is None and untrusted:
            problem = _pattern_problem(contents, where)
        for keyword in uses:
            uses[keyword] = uses[keyword] or keyword in contents
        for keyword in _REF_KEYWORDS:
            ref = contents.get(keyword)
            if problem is None and isinstance(ref, str):
                try:
                    resolved = resolver.lookup(ref)
                except referencing.exceptions.Unresolvable:
                    problem = (
                        f"has a {keyword} {_quote(ref)} (at {_at(where, keyword)}) that does "
                        "not resolve within the schema; references to other documents are "
                        "never fetched, so put what it names under $defs"
                    )
                else:
                    target = referencing.Resource.from_contents(
                        resolved.contents, default_specification=specification
                    )
                    stack.append((target, resolved.resolver, ref))
        if problem is not None:
            return problem
        paths = _child_paths(contents)
        for sub in resource.subresources():
            stack.append((sub, resolver.in_subresource(sub), _at(where, paths.get(id(sub.contents), "?"))))
    if untrusted and all(uses.values()):
        return (
            "uses unevaluatedProperties together with patternProperties, which cannot be "
            "checked in bounded time; yiemagent does not accept that from an untrusted source"
        )
    return None


_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE_ONES = ("not", "if", "then", "else")
Step = tuple[Any, Any, str]  # a subschema's contents, its resolver, where it is


def _in_place(specification: Any, contents: Mapping[str, Any], resolver: Any, where: str) -> Iterator[Step]:
    """The subschemas that apply to the same value as ``contents`` (its references' targets,
    ``allOf``/``anyOf``/``oneOf`` items, ``not``/``if``/``then``/``else``, ``dependentSchemas``):
    following only these never moves into a part of the value."""
    for keyword in _REF_KEYWORDS:
        ref = contents.get(keyword)
        if isinstance(ref, str):
            try:
                resolved = resolver.lookup(ref)
            except referencing.exceptions.Unresolvable:
                continue  # the main walk names it
            yield resolved.contents, resolved.resolver, _at(where, keyword)
    subs: list[tuple[Any, str]] = [(contents.get(k), _at(where, k)) for k in _IN_PLACE_ONES]
    for key in _IN_PLACE_LISTS:
        items = contents.get(key)
        if isinstance(items, list):
            subs += [(item, _at(where, f"{key}/{n}")) for n, item in enumerate(items)]
    dependent = contents.get("dependentSchemas")
    if isinstance(dependent, Mapping):
        subs += [(item, _at(where, f"dependentSchemas/{name}")) for name, item in dependent.items()]
    for item, at in subs:
        if isinstance(item, Mapping):
            resource = specification.create_resource(item)
            yield item, resolver.in_subresource(resource), at


def _endless_reference(
    specification: Any, first: Mapping[str, Any], resolver: Any, where: str, done: set[int]
) -> str | None:
    """A reference reachable from ``first`` that leads back to a subschema it came from without
    moving into a part of the value (``{"$ref": "#"}`` at the root, two definitions naming each
    other): checking a value against it would recurse without end. Depth first, without
    recursion; ``done`` holds the subschemas already cleared, shared by the calls of one walk so
    that the whole walk stays linear."""
    if id(first) in done:
        return None
    open_now = {id(first)}
    stack: list[tuple[Mapping[str, Any], Iterator[Step]]] = [
        (first, _in_place(specification, first, resolver, where))
    ]
    while stack:
        contents, steps = stack[-1]
        step = next(steps, None)
        if step is None:
            stack.pop()
            open_now.discard(id(contents))
            done.add(id(contents))
            continue
        target, target_resolver, at = step
        if not isinstance(target, Mapping) or id(target) in done:
            continue
        if id(target) in open_now:
            return (
                f"refers to itself without end (at {at}): the reference leads back to where it "
                "started without moving into a part of the value, so no value could ever be "
                "checked against it"
            )
        open_now.add(id(target))
        stack.append((target, _in_place(specification, target, target_resolver, at)))
    return None


def _pattern_problem(contents: Mapping[str, Any], where: str) -> str | None:
    """A pattern of this subschema (``pattern`` or a ``patternProperties`` name) RE2 refuses."""
    patterns: list[tuple[Any, str]] = [(contents.get("pattern"), _at(where, "pattern"))]
    named = contents.get("patternProperties")
    if isinstance(named, Mapping):
        patterns += [(name, _at(where, "patternProperties")) for name in named]
    for patrn, at in patterns:
        if not isinstance(patrn, str):
            continue
        try:
            linear_pattern(patrn)
        except PatternRefused as exc:
            return (
                f"has a pattern {_quote(patrn)} (at {at}) that cannot be matched in linear "
                f"time: RE2 refuses it ({clip(str(exc), _QUOTE_CHARS)}); patterns from an "
                "untrusted source must be ones RE2 accepts (no lookaround or backreferences)"
            )
    return None


def _at(where: str, key: str) -> str:
    return f"{where}/{key}" if where else key


def _child_paths(contents: Mapping[str, Any]) -> dict[int, str]:
    """Where each object directly or one level under ``contents`` sits (``"properties/q"``), by
    identity: subschemas come back from ``referencing`` without their keys."""
    paths: dict[int, str] = {}
    for key, value in contents.items():
        if isinstance(value, Mapping):
            paths.setdefault(id(value), str(key))
            inner = value.items()
        elif isinstance(value, list):
            inner = enumerate(value)  # type: ignore[assignment]
        else:
            continue
        for sub_key, sub in inner:
            if isinstance(sub, Mapping):
                paths.setdefault(id(sub), f"{key}/{sub_key}")
    return paths
