"""Drives `wo serve`'s OpenAI-compatible endpoint with the official `openai` SDK.

usage: client.py BASE_URL TOKEN MODEL QUESTION
Prints one JSON object with what each call returned, for the Rust test to check.
"""
import json
import sys

import openai
from openai import OpenAI


def main():
    base, token, model, question = sys.argv[1:5]
    client = OpenAI(base_url=base, api_key=token, max_retries=0, timeout=120)
    out = {}
    out["models"] = [m.id for m in client.models.list().data]

    r = client.chat.completions.create(
        model=model,
        messages=[
            {"role": "system", "content": "You answer in one short sentence."},
            {"role": "user", "content": question},
        ],
        max_tokens=24,
        temperature=0,
    )
    out["plain"] = {
        "object": r.object,
        "id": r.id,
        "model": r.model,
        "content": r.choices[0].message.content,
        "role": r.choices[0].message.role,
        "finish_reason": r.choices[0].finish_reason,
        "usage": r.usage.model_dump() if r.usage else None,
    }

    stream = client.chat.completions.create(
        model=model,
        messages=[
            {"role": "user", "content": "Hello!"},
            {"role": "assistant", "content": "Hello! How can I help?"},
            {"role": "user", "content": question + " Say it again."},
        ],
        max_completion_tokens=24,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = []
    for c in stream:
        chunks.append({
            "id": c.id,
            "object": c.object,
            "model": c.model,
            "role": c.choices[0].delta.role if c.choices else None,
            "content": c.choices[0].delta.content if c.choices else None,
            "finish_reason": c.choices[0].finish_reason if c.choices else None,
            "usage": c.usage.model_dump() if c.usage else None,
        })
    out["stream"] = chunks

    def refused(call):
        try:
            call()
            return {"refused": False}
        except openai.APIStatusError as e:
            body = e.body if isinstance(e.body, dict) else {}
            return {"refused": True, "status": e.status_code, "body": body}

    wrong = OpenAI(base_url=base, api_key="not-the-token-at-all-0000", max_retries=0)
    out["wrong_token"] = refused(lambda: wrong.models.list())
    out["wrong_token_chat"] = refused(lambda: wrong.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hi"}]))
    out["unknown_model"] = refused(lambda: client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}]))
    out["bad_temperature"] = refused(lambda: client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hi"}], temperature=7))
    print(json.dumps(out))


main()
