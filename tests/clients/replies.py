"""Render the stand-in's ``Answer`` as each API's response: streamed (SSE) or one JSON object.

The event sequences are the ones measured to be enough for the real clients (platform-notes §5):
Claude Code reads the Messages events, Codex the Responses events, Qwen Code the Chat Completions
chunks and Gemini CLI the ``generateContent`` candidates. A whole reply goes out in one write with
a Content-Length; none of the clients needed it to trickle.

Pure functions: ids are built from the request's serial number, which the server passes in.
"""

from __future__ import annotations

import json

import attrs

from tests.clients.script import Answer

SSE = "text/event-stream"
JSON = "application/json"
_ANTHROPIC_USAGE = {"input_tokens": 10, "output_tokens": 5,
                    "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


@attrs.frozen
class Payload:
    """A response body and its content type."""

    content_type: str
    body: bytes


def sse(events: list[tuple[str | None, object]]) -> Payload:
    """Encode ``(event name or None, data)`` pairs as one SSE body."""
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name is not None else ""
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
        out.append(f"{head}data: {text}\n\n")
    return Payload(SSE, "".join(out).encode())


def as_json(data: object) -> Payload:
    """One JSON document."""
    return Payload(JSON, json.dumps(data, ensure_ascii=False).encode())


def not_found(message: str) -> Payload:
    """The 404 body for an endpoint the stand-in does not serve (Anthropic's error shape)."""
    return as_json({"type": "error", "error": {"type": "not_found_error", "message": message}})


def anthropic(answer: Answer, model: str, stream: bool, serial: int) -> Payload:
    """A Messages API reply: one text or ``tool_use`` content block."""
    if answer.call is not None:
        block: dict[str, object] = {"type": "tool_use", "id": answer.call_id,
                                    "name": answer.call.name, "input": dict(answer.arguments)}
        stop = "tool_use"
        start: dict[str, object] = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(dict(answer.arguments))}
    else:
        block = {"type": "text", "text": answer.text}
        stop = "end_turn"
        start = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": answer.text or ""}
    message = {"id": f"msg_standin_{serial}", "type": "message", "role": "assistant",
               "model": model, "content": [block], "stop_reason": stop, "stop_sequence": None,
               "usage": _ANTHROPIC_USAGE}
    if not stream:
        return as_json(message)
    opening = {**message, "content": [], "stop_reason": None}
    return sse([
        ("message_start", {"type": "message_start", "message": opening}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": start}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": stop, "stop_sequence": None},
                           "usage": {"output_tokens": 5}}),
        ("message_stop", {"type": "message_stop"}),
    ])


def count_tokens(body_size: int) -> Payload:
    """``/v1/messages/count_tokens``: a rough count, a token per four bytes of request."""
    return as_json({"input_tokens": max(1, body_size // 4)})


def responses(answer: Answer, model: str, stream: bool, serial: int) -> Payload:
    """A Responses API reply: one ``message`` or ``function_call`` output item."""
    item, pending = _responses_item(answer, serial)
    response: dict[str, object] = {
        "id": f"resp_standin_{serial}", "object": "response", "created_at": 0, "model": model,
        "status": "completed", "output": [item],
        "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": 15}}
    if not stream:
        return as_json(response)
    events: list[dict[str, object]] = [
        {"type": "response.created",
         "response": {**response, "status": "in_progress", "output": [], "usage": None}},
        {"type": "response.output_item.added", "output_index": 0, "item": pending}]
    if answer.call is None:
        events.append({"type": "response.output_text.delta", "item_id": item["id"],
                       "output_index": 0, "content_index": 0, "delta": answer.text})
    events.append({"type": "response.output_item.done", "output_index": 0, "item": item})
    events.append({"type": "response.completed", "response": response})
    return sse([(str(event["type"]), {**event, "sequence_number": number})
                for number, event in enumerate(events)])


def _responses_item(answer: Answer, serial: int) -> tuple[dict[str, object], dict[str, object]]:
    """The finished output item, and the same item as first announced (nothing in it yet)."""
    if answer.call is None:
        item: dict[str, object] = {
            "id": f"msg_standin_{serial}", "type": "message", "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": answer.text, "annotations": []}]}
        return item, {**item, "status": "in_progress", "content": []}
    item = {"id": f"fc_standin_{serial}", "type": "function_call", "status": "completed",
            "call_id": answer.call_id, "name": answer.call.name,
            "arguments": json.dumps(dict(answer.arguments))}
    if answer.call.namespace is not None:
        item["namespace"] = answer.call.namespace
    return item, {**item, "status": "in_progress", "arguments": ""}


def chat(answer: Answer, model: str, stream: bool, serial: int) -> Payload:
    """A Chat Completions reply: text content or one entry in ``tool_calls``."""
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    base = {"id": f"chatcmpl-standin-{serial}", "created": 0, "model": model}
    if answer.call is not None:
        calls = [{"index": 0, "id": answer.call_id, "type": "function",
                  "function": {"name": answer.call.name,
                               "arguments": json.dumps(dict(answer.arguments))}}]
        message: dict[str, object] = {"role": "assistant", "content": None, "tool_calls": calls}
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": answer.text}
        finish = "stop"
    if not stream:
        return as_json({**base, "object": "chat.completion", "usage": usage, "choices": [
            {"index": 0, "message": message, "finish_reason": finish}]})
    chunk = {**base, "object": "chat.completion.chunk"}
    return sse([
        (None, {**chunk, "choices": [{"index": 0, "delta": message, "finish_reason": None}]}),
        (None, {**chunk, "usage": usage,
                "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
        (None, "[DONE]"),
    ])


def gemini(answer: Answer, model: str, mode: str, serial: int) -> Payload:
    """A Gemini reply; ``mode`` is ``json`` (generateContent), ``sse`` or ``array`` (stream)."""
    if answer.call is not None:
        part: dict[str, object] = {"functionCall": {
            "name": answer.call.name, "args": dict(answer.arguments), "id": answer.call_id}}
    else:
        part = {"text": answer.text}
    response = {
        "candidates": [{"content": {"role": "model", "parts": [part]},
                        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                          "totalTokenCount": 15},
        "modelVersion": model, "responseId": f"standin-{serial}"}
    if mode == "sse":
        return sse([(None, response)])
    return as_json([response] if mode == "array" else response)
