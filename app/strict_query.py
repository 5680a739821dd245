"""API requests name only the query parameters their operation has.

A misspelt parameter (``?alhpa=0.9``) would otherwise be ignored and the answer given for the
default, which reads as a wrong figure; the OpenAPI schema allows no other parameters either.
The pages stay lenient: a link is read as far as it goes, with notices for what was not used.
"""

from __future__ import annotations

from fastapi import Request
from fastapi.exceptions import RequestValidationError


def known_query_only(request: Request) -> None:
    """Refuse (422, naming each one) query parameters the matched API operation does not take."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None or not request.url.path.startswith("/api/"):
        return
    known = _query_names(dependant)
    unknown = [name for name in dict.fromkeys(request.query_params) if name not in known]
    if unknown:
        raise RequestValidationError([
            {"type": "extra_forbidden", "loc": ("query", name), "input": request.query_params[name],
             "msg": "is not a parameter of this operation"} for name in unknown])


def _query_names(dependant) -> set[str]:
    """The query parameters of an operation and of every dependency it has."""
    names, todo = set(), [dependant]
    while todo:
        current = todo.pop()
        names.update(param.alias for param in current.query_params)
        todo.extend(current.dependencies)
    return names
