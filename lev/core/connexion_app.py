"""`ConnexionApp`: Connexion 3.3's AsyncApp with the parts it rebuilt for every request built once per operation.

For each request Connexion 3.3 wraps the handler again (three decorators, `inspect.signature` of the handler),
builds a URI parser twice and a parameter validator, and Lev's validators compiled a JSON Schema validator for
every parameter and body. None of them depends on the request: here each is built on an operation's first
request and kept. What is checked is unchanged: the same validators, schemas and options run on every request.
"""

from __future__ import annotations

import functools
from typing import Any

from connexion import AsyncApp
from connexion.apps.abstract import AbstractApp
from connexion.apps.asynchronous import AsyncApi, AsyncASGIApp, AsyncOperation
from connexion.context import receive, scope
from connexion.decorators import StarletteDecorator
from connexion.middleware import ConnexionMiddleware
from connexion.middleware.request_validation import (
    RequestValidationAPI,
    RequestValidationMiddleware,
    RequestValidationOperation,
)
from connexion.operations import AbstractOperation
from starlette.types import Receive, Scope, Send


class _OnceDecorator(StarletteDecorator):
    """Connexion's handler decorator with the decorated handler and its URI parser made once (the wrappers read
    the routed operation from Connexion's context at each call, as before)."""

    def __call__(self, function: Any) -> Any:
        decorated = self.decorate(function)
        parser: list[Any] = []

        @functools.wraps(function)
        async def wrapper(*_args: Any, **_kwargs: Any) -> Any:
            if not parser:
                parser.append(self.uri_parser)
            request = self.framework.get_request(uri_parser=parser[0], scope=scope, receive=receive)
            return await decorated(request)

        return wrapper


class _OnceOperation(AsyncOperation):
    @functools.cached_property
    def fn(self) -> Any:  # type: ignore[override]
        return _OnceDecorator(pythonic_params=self.pythonic_params, jsonifier=self.jsonifier)(self._fn)


class _OnceApi(AsyncApi):
    def make_operation(self, operation: AbstractOperation) -> AsyncOperation:
        return _OnceOperation.from_operation(operation, pythonic_params=self.pythonic_params,
                                             jsonifier=self.jsonifier)


class _OnceASGIApp(AsyncASGIApp):
    api_cls = _OnceApi


class _OnceValidation(RequestValidationOperation):
    """Connexion's request validation with the operation's URI parser and parameter validator made once; the
    body validator is still made per request (it holds the request's parsing state)."""

    @functools.cached_property
    def _parameter_validator(self) -> Any:
        op = self._operation
        return self._validator_map["parameter"](
            op.parameters, uri_parser=op._uri_parser_class(op.parameters, op.body_definition()),
            strict_validation=self.strict_validation, security_query_params=self.security_query_params)

    @functools.cached_property
    def _body_parser(self) -> Any:
        op = self._operation
        return op.uri_parser_class(op.parameters, op.body_definition())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._parameter_validator.validate(scope)
        mime_type, encoding = self.extract_content_type(scope["headers"])
        self.validate_mime_type(mime_type)
        op = self._operation
        schema = op.body_schema(mime_type)
        if schema:
            try:
                body_validator = self._validator_map["body"][mime_type]
            except KeyError:
                pass  # Connexion skips validation for a content type it has no validator for
            else:
                validator = body_validator(
                    schema=schema, required=op.request_body.get("required", False),
                    nullable=_nullable(op.body_definition(mime_type)), encoding=encoding,
                    strict_validation=self.strict_validation, uri_parser=self._body_parser)
                receive, scope = await validator.wrap_receive(receive, scope=scope)
        await self.next_app(scope, receive, send)


def _nullable(definition: dict[str, Any]) -> bool:
    from connexion.utils import is_nullable

    return bool(is_nullable(definition))


class _OnceValidationAPI(RequestValidationAPI):
    def make_operation(self, operation: AbstractOperation) -> RequestValidationOperation:
        return _OnceValidation(self.next_app, operation=operation, strict_validation=self.strict_validation,
                               validator_map=self.validator_map)


class _OnceValidationMiddleware(RequestValidationMiddleware):
    api_cls = _OnceValidationAPI


MIDDLEWARES = [_OnceValidationMiddleware if m is RequestValidationMiddleware else m
               for m in ConnexionMiddleware.default_middlewares]


class ConnexionApp(AsyncApp):
    """AsyncApp (same arguments) whose operations are wrapped and validated by parts made once."""

    def __init__(self, import_name: str, **kwargs: Any) -> None:
        self._middleware_app = _OnceASGIApp()
        AbstractApp.__init__(self, import_name, middlewares=list(MIDDLEWARES), **kwargs)

