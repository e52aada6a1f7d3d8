"""What the gRPC layer itself would get wrong on bad input, for every service the agent serves.

* A request whose bytes do not parse (corrupt wire format, a string field of invalid UTF-8)
  fails inside grpcio's own deserialization, which answers UNKNOWN ("Unexpected DecodeError")
  and logs a traceback: a client's bad request reported as a server fault. The interceptor here
  parses leniently and answers INVALID_ARGUMENT instead, before any servicer runs.
* Status details travel in a trailer; past the peer's metadata limit (16 KiB by default) the
  client receives RESOURCE_EXHAUSTED ("received metadata size exceeds hard limit") instead of
  the real code, and RESOURCE_EXHAUSTED means "retry later". :func:`clip_details` keeps a
  message that echoes client input (an operator id, a request id) well under that limit.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

DETAILS_LIMIT_BYTES = 1500  # percent-encoded in the trailer: at most 3x this on the wire


def clip_details(text: str, limit: int = DETAILS_LIMIT_BYTES) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes (on a character boundary), marked when cut."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", errors="ignore") + f"... ({len(data)} bytes in all)"


class _Undecodable:
    """Stands in for a request whose bytes did not parse."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def details(self) -> str:
        return clip_details(f"the request does not parse as protobuf: {self.error}", 500)


def _lenient(parse: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if parse is None:
        return None

    def parse_or_mark(data: bytes) -> Any:
        try:
            return parse(data)
        except Exception as exc:  # noqa: BLE001 - DecodeError, or whatever a parser raises
            return _Undecodable(exc)

    return parse_or_mark


async def _refuse(context: grpc.aio.ServicerContext, bad: _Undecodable) -> None:
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, bad.details())


async def _checked(requests: AsyncIterator[Any],
                   context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
    async for request in requests:
        if isinstance(request, _Undecodable):
            await _refuse(context, request)
        yield request


def _guarded(handler: Any) -> Any:
    """``handler`` with a lenient deserializer and a behaviour that refuses what did not parse."""
    parse = _lenient(handler.request_deserializer)
    serialize = handler.response_serializer
    if handler.unary_unary is not None:
        inner_uu: Callable[..., Awaitable[Any]] = handler.unary_unary

        async def unary_unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            if isinstance(request, _Undecodable):
                await _refuse(context, request)
            return await inner_uu(request, context)

        return grpc.unary_unary_rpc_method_handler(unary_unary, parse, serialize)
    if handler.unary_stream is not None:
        inner_us = handler.unary_stream
        if inspect.isasyncgenfunction(inner_us):
            async def unary_stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
                if isinstance(request, _Undecodable):
                    await _refuse(context, request)
                async for response in inner_us(request, context):
                    yield response
        else:  # a coroutine that writes its responses with context.write
            async def unary_stream(request: Any, context: grpc.aio.ServicerContext) -> Any:  # type: ignore[misc]
                if isinstance(request, _Undecodable):
                    await _refuse(context, request)
                return await inner_us(request, context)
        return grpc.unary_stream_rpc_method_handler(unary_stream, parse, serialize)
    inner = handler.stream_unary or handler.stream_stream
    if handler.stream_unary is not None or not inspect.isasyncgenfunction(inner):
        async def streamed_in(requests: Any, context: grpc.aio.ServicerContext) -> Any:
            return await inner(_checked(requests, context), context)

        make = (grpc.stream_unary_rpc_method_handler if handler.stream_unary is not None
                else grpc.stream_stream_rpc_method_handler)
        return make(streamed_in, parse, serialize)

    async def stream_stream(requests: Any, context: grpc.aio.ServicerContext) -> Any:
        async for response in inner(_checked(requests, context), context):
            yield response

    return grpc.stream_stream_rpc_method_handler(stream_stream, parse, serialize)


class UndecodableRequests(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Answer INVALID_ARGUMENT, on every service, to request bytes that do not parse."""

    async def intercept_service(
            self, continuation: Callable[[Any], Awaitable[Any]],
            handler_call_details: grpc.HandlerCallDetails) -> Any:
        handler = await continuation(handler_call_details)
        return None if handler is None else _guarded(handler)
