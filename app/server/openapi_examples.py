"""An example for every operation of `/api/v1` in the published OpenAPI schema: what each
answers (and sends, where it takes a body), so that a client's author sees a real answer
and schemathesis starts from a valid request. Routes that declare their own example keep
it; the others get theirs here, added once when the schema is first built. The A1111
routes' examples (`/sdapi/v1`, `/controlnet`) are in `a1111_examples`."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

PREFIX = "/api/v1"
JSON = "application/json"

JOB: dict[str, Any] = {
    "id": 12, "status": "SUCCESS", "terminal": True, "prompt": "a red circle",
    "negative_prompt": "", "model": "easel-tiny", "scheduler": "Euler", "steps": 20,
    "cfg": 7.0, "width": 64, "height": 64, "seed": 7, "strength": 1.0, "init_image": "",
    "priority": 0, "attempt": 1, "max_attempts": 3, "given_up": False, "starred": False,
    "progress": {"step": 20, "total": 20, "live_step": None}, "eta_s": None, "error": None,
    "rerun_of": None, "created_at": 1765100000.0, "started_at": 1765100001.0,
    "finished_at": 1765100004.5,
    "links": {"self": "/api/v1/jobs/12", "image": "/api/v1/jobs/12/image",
              "preview": "/api/v1/jobs/12/preview", "events": "/api/v1/events?job=12"},
}  # fmt: skip
# An edit on Qwen-Image-Edit Plus of job 12's image with one further picture: its input
# images after the edited one (`init_image`) as the job stores them.
EDIT_JOB: dict[str, Any] = {
    **JOB, "id": 14, "prompt": "put the hat of picture 2 on the cat", "model": "qwen-edit-plus",
    "steps": 50, "cfg": 4.0, "init_image": "job:12", "kind": "edit",
    "edit_images": ["upload:" + "5e" * 32],
    "links": {**JOB["links"], "self": "/api/v1/jobs/14", "image": "/api/v1/jobs/14/image",
              "preview": "/api/v1/jobs/14/preview", "events": "/api/v1/events?job=14"},
}  # fmt: skip
TRANSITION = {
    "kind": "transition", "id": 31, "job_id": 12, "attempt": 1, "from": "PROCESSING",
    "to": "SUCCESS", "event": "COMPLETE", "source": "worker", "message": "", "at": 1765100004.5,
}  # fmt: skip
JOB_WITH_TIMELINE = {**JOB, "timeline": [TRANSITION],
                     "client": {"api": "easel", "name": "krita"}}  # fmt: skip
ACTED = {"changed": True, "job": {**JOB, "status": "CANCELLED"}}
# A cancelled cell of a batch re-run into its cell: the new job, which will run.
RETRIED = {"changed": True, "job": {
    **JOB, "id": 13, "status": "PENDING", "terminal": False, "rerun_of": 12,
    "progress": {"step": 0, "total": 20, "live_step": None}, "eta_s": 3.5,
    "started_at": None, "finished_at": None,
    "links": {**JOB["links"], "self": "/api/v1/jobs/13", "image": None,
              "preview": "/api/v1/jobs/13/preview", "events": "/api/v1/events?job=13"},
}}  # fmt: skip
EVENTS = f"id: 31\nevent: transition\ndata: {json.dumps(TRANSITION)}\n\n"

# (method, path) -> (media type, example of the 2xx answer)
ANSWERS: dict[tuple[str, str], tuple[str, Any]] = {
    ("get", "/events"): ("text/event-stream", EVENTS),
    ("post", "/jobs"): ("application/json", {"ids": [12], "replayed": False, "jobs": [JOB]}),
    ("get", "/jobs"): ("application/json", {"jobs": [EDIT_JOB, JOB], "next_before": None}),
    ("get", "/jobs/{job_id}"): ("application/json", JOB_WITH_TIMELINE),
    ("post", "/jobs/{job_id}/cancel"): ("application/json", ACTED),
    ("post", "/jobs/{job_id}/pause"): ("application/json", {**ACTED, "changed": False}),
    ("post", "/jobs/{job_id}/resume"): ("application/json", {**ACTED, "changed": False}),
    ("post", "/jobs/{job_id}/retry"): ("application/json", RETRIED),
    ("post", "/jobs/{job_id}/star"): ("application/json", {**JOB, "starred": True}),
    ("get", "/jobs/{job_id}/image"): ("image/png", "(the PNG's bytes)"),
    ("get", "/jobs/{job_id}/preview"): ("image/png", "(the PNG's bytes)"),
    ("get", "/models"): ("application/json", [{
        "name": "easel-tiny", "source": "bundled", "architecture": "sd15", "supported": True,
        "why_not": "",
    }]),
    ("get", "/loras"): ("application/json", [{"name": "ink", "prompt": "<lora:ink:1>"}]),
    ("get", "/queue"): ("application/json", {
        "counts": {"PENDING": 2, "PROCESSING": 1, "SUCCESS": 40}, "eta_s": 12.5,
        "workers": [{"id": "w-1", "machine": "studio", "state": "BUSY", "job": 12,
                     "device": "cuda:0", "model": "easel-tiny"}],
    }),
}  # fmt: skip
# Bodies with no example of their own.
BODIES: dict[tuple[str, str], Any] = {
    ("post", "/jobs/{job_id}/star"): {"starred": True},
}


def with_examples(app: FastAPI) -> None:
    """`app`'s schema, built once, with the examples above where a route has none."""
    build: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            _add_examples(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _add_examples(schema: dict[str, Any]) -> None:
    from app.server import a1111_examples

    paths = schema.get("paths", {})
    answers = {(method, PREFIX + path): answer for (method, path), answer in ANSWERS.items()}
    answers.update({key: (JSON, example) for key, example in a1111_examples.ANSWERS.items()})
    for (method, path), (media, example) in answers.items():
        operation = paths.get(path, {}).get(method)
        if operation is None:
            continue
        answer = _success(operation)
        content = answer.setdefault("content", {}).setdefault(media, {})
        if not has_example(content):
            content["example"] = example
    bodies = {(method, PREFIX + path): ("example", body) for (method, path), body in BODIES.items()}
    bodies.update({key: ("examples", named) for key, named in a1111_examples.BODIES.items()})
    for (method, path), (field, example) in bodies.items():
        operation = paths.get(path, {}).get(method)
        body = (operation or {}).get("requestBody", {}).get("content", {})
        for content in body.values():
            if not has_example(content):
                content[field] = example


def _success(operation: dict[str, Any]) -> dict[str, Any]:
    """The operation's 2xx answer (200, else 201): where its example goes."""
    responses: dict[str, Any] = operation.setdefault("responses", {})
    code = next((c for c in ("200", "201") if c in responses), "200")
    answer: dict[str, Any] = responses.setdefault(code, {"description": "Successful Response"})
    return answer


def has_example(content: dict[str, Any]) -> bool:
    return "example" in content or "examples" in content
