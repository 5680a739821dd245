"""API requests name only the query parameters their operation has, and numbers in a query
are written as numbers are.

A misspelt parameter (``?alhpa=0.9``) would otherwise be ignored and the answer given for the
default, which reads as a wrong figure; the OpenAPI schema allows no other parameters either.
The pages stay lenient: a link is read as far as it goes, with notices for what was not used.
Every route refuses digits with underscores in a numeric parameter: Python's ``int()`` reads
``1_0`` as 10, which nobody who wrote it meant.
"""

from __future__ import annotations

import types
import typing

from fastapi import Request
from fastapi.exceptions import RequestValidationError

# Answers to machines (health checks) that take no parameters, held to the API's rule.
STRICT_PATHS = ("/healthz",)


def known_query_only(request: Request) -> None:
    """Refuse (422, naming each one) query parameters the matched API operation does not take,
    and underscored digits in any operation's numeric parameters."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    params = _query_params(dependant)
    underscored = [name for name, param in params.items() if _numeric(param)
                   and "_" in request.query_params.get(name, "")]
    if underscored:
        raise RequestValidationError([
            {"type": "int_parsing" if _integer(params[name]) else "float_parsing",
             "loc": ("query", name), "input": request.query_params[name],
             "msg": "is not a number (digits are written without underscores)"}
            for name in underscored])
    if not (request.url.path.startswith("/api/") or request.url.path in STRICT_PATHS):
        return
    unknown = [name for name in dict.fromkeys(request.query_params) if name not in params]
    if unknown:
        raise RequestValidationError([
            {"type": "extra_forbidden", "loc": ("query", name), "input": request.query_params[name],
             "msg": "is not a parameter of this operation"} for name in unknown])


def _query_params(dependant) -> dict[str, typing.Any]:
    """The query parameters of an operation and of every dependency it has, by name."""
    params, todo = {}, [dependant]
    while todo:
        current = todo.pop()
        params.update((param.alias, param) for param in current.query_params)
        todo.extend(current.dependencies)
    return params


def _types(param) -> set[type]:
    annotation = param.field_info.annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return set(typing.get_args(annotation))
    return {annotation}


def _numeric(param) -> bool:
    return bool(_types(param) & {int, float})


def _integer(param) -> bool:
    return int in _types(param)
