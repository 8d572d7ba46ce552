"""Server-streaming handlers wrapped by the mesh's interceptors, whichever
way they send: an async generator that yields its messages (our servicers)
or a coroutine that sends with ``await context.write(...)`` (grpcio's
health ``Watch``). An interceptor that iterated every handler with
``async for`` failed the second kind (INTERNAL on every service's Watch).
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import grpc

#: ``around(request, context)``: what an interceptor does around the call (an async context manager).
Around = Callable[[Any, grpc.aio.ServicerContext], AbstractAsyncContextManager]


def wrap_stream(inner: Callable, around: Around) -> Callable:
    """A unary-stream handler that runs ``inner`` inside ``around(request,
    context)``: an async generator when ``inner`` is one, else a coroutine
    (so that grpc writes what ``inner`` writes, and the next interceptor
    sees the same kind)."""
    if inspect.isasyncgenfunction(inner):
        async def generator(request: Any, context: grpc.aio.ServicerContext) -> Any:
            async with around(request, context):
                async for item in inner(request, context):
                    yield item
        return generator

    async def coroutine(request: Any, context: grpc.aio.ServicerContext) -> None:
        async with around(request, context):
            await inner(request, context)
    return coroutine
