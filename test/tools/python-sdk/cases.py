"""The official Python SDK (`anthropic`) used as a user would, unchanged, against {base_url}/api/agents/{agent}.

Run as `python cases.py <case> <base_url>`; prints one JSON object with what the SDK gave back, which
test/tools/python-sdk.test.ts judges. The service reads `metadata.conversation_id`: the SDK's metadata type
names only `user_id`, but a dict with more keys is sent as it is.
"""

import json
import sys
import time

import anthropic
import httpx

ADMIN_KEY = "demo-admin-key"
MODEL = "demo-large"


def client(base_url, agent="demo-agent", key=ADMIN_KEY, **options):
    return anthropic.Anthropic(base_url=f"{base_url}/api/agents/{agent}", api_key=key, **options)


def user(text):
    return [{"role": "user", "content": text}]


def wait_for_session(base_url, conversation_id):
    """The API's client guidance: poll the conversation until agent_session_id is recorded (bounded)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        body = httpx.get(
            f"{base_url}/api/agents/demo-agent/conversations/{conversation_id}",
            headers={"X-Api-Key": ADMIN_KEY},
        ).json()
        if body.get("conversation", {}).get("agent_session_id"):
            return True
        time.sleep(0.25)
    return False


def stream_helper(base_url):
    """messages.stream(): text as it arrives, the final message, and the response's X-Conversation-Id."""
    with client(base_url).messages.stream(
        model=MODEL, max_tokens=256, messages=user("What is the capital of France?")
    ) as stream:
        texts = list(stream.text_stream)
        final = stream.get_final_message()
        return {
            "conversation_id": stream.response.headers.get("x-conversation-id"),
            "text": "".join(texts),
            "final_text": "".join(b.text for b in final.content if b.type == "text"),
            "stop_reason": final.stop_reason,
            "output_tokens": final.usage.output_tokens,
        }


def raw_events(base_url):
    """messages.with_raw_response.create(stream=True): the status, headers and every event's type."""
    raw = client(base_url).messages.with_raw_response.create(
        model=MODEL, max_tokens=256, stream=True, messages=user("What is the capital of France?")
    )
    events = [event.type for event in raw.parse()]
    return {
        "status": raw.status_code,
        "content_type": raw.headers.get("content-type"),
        "conversation_id": raw.headers.get("x-conversation-id"),
        "events": events,
    }


def resume(base_url):
    """Two calls sharing metadata.conversation_id: the second remembers the first (state is server-side)."""
    conversation_id = f"py-memory-{time.time_ns()}"
    word = f"kiwi-{time.time_ns() % 1000000}"
    sdk = client(base_url)
    with sdk.messages.stream(
        model=MODEL,
        max_tokens=256,
        messages=user(f"Remember this code word: {word}. Reply with just OK."),
        metadata={"conversation_id": conversation_id},
    ) as stream:
        first = stream.get_final_message()
        header = stream.response.headers.get("x-conversation-id")
    recorded = wait_for_session(base_url, conversation_id)
    with sdk.messages.stream(
        model=MODEL,
        max_tokens=256,
        messages=user("What code word did I ask you to remember? Reply with just the word."),
        metadata={"conversation_id": conversation_id},
    ) as stream:
        second = stream.get_final_message()
    return {
        "sent_id": conversation_id,
        "header": header,
        "recorded": recorded,
        "word": word,
        "first": "".join(b.text for b in first.content if b.type == "text"),
        "second": "".join(b.text for b in second.content if b.type == "text"),
    }


def error_of(call):
    try:
        call()
    except anthropic.APIStatusError as error:
        return {"class": type(error).__name__, "status": error.status_code, "message": error.message}
    return None


def errors(base_url):
    """The SDK's error classes for the API's statuses, each raised after its default retries."""

    def send(sdk, **extra):
        return lambda: sdk.messages.create(model=MODEL, max_tokens=16, messages=user("hi"), **extra)

    return {
        "unknown_agent": error_of(send(client(base_url, agent="no-such-agent"))),
        "unknown_key": error_of(send(client(base_url, key="not-a-key"))),
        "viewer": error_of(send(client(base_url, key="demo-viewer-key"))),
        "bad_model": error_of(
            lambda: client(base_url).messages.create(model="claude-made-up", max_tokens=16, messages=user("hi"))
        ),
    }


def async_delivery(base_url):
    """metadata.delivery "async": a 501, raised with the SDK's default retry count (2) left as it is."""
    sdk = client(base_url)
    return {
        "max_retries": sdk.max_retries,
        "error": error_of(
            lambda: sdk.messages.create(
                model=MODEL, max_tokens=16, messages=user("hi"), metadata={"delivery": "async"}
            )
        ),
    }


def models(base_url):
    """models.list(): the entries, default first, with created_at parsed as a date-time."""
    page = client(base_url).models.list()
    return {
        "entries": [
            {"id": m.id, "display_name": m.display_name, "created_at": m.created_at.isoformat()} for m in page.data
        ]
    }


CASES = {f.__name__: f for f in (stream_helper, raw_events, resume, errors, async_delivery, models)}

if __name__ == "__main__":
    print(json.dumps(CASES[sys.argv[1]](sys.argv[2])))
