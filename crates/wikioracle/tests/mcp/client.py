"""Drives WikiOracle's MCP server with the official Python MCP SDK.

usage: client.py WO STATE_DIR SCENARIO [ARGS...]     `wo mcp` over stdio
       client.py URL TOKEN SCENARIO [ARGS...]        `wo serve`'s /mcp over streamable HTTP
The environment's MCP_MODE picks the protocol: `legacy` (the initialize
handshake, 2025-11-25; the default) or `auto` (server/discover, then
2026-07-28's self-contained requests when the server offers it).
Prints one JSON object: what every call returned, for the Rust test to check.
Scenarios: full (allow-write), readonly, bad, writer N (N remember calls), index.
Over HTTP the server decides whether writes are allowed (--mcp-allow-write).
"""
import asyncio
import contextlib
import json
import os
import sys

from jsonschema import Draft202012Validator
from mcp import Client, StdioServerParameters, types


def text_of(result):
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


OUTPUT_SCHEMAS = {}


async def call(client, name, args):
    """A tool call as {"ok", "text", "structured", "links"} (protocol errors are ok=False too).
    A successful call's structured content is checked against the tool's outputSchema here."""
    try:
        r = await client.call_tool(name, args)
    except Exception as e:  # the SDK raises for JSON-RPC errors
        return {"ok": False, "text": f"protocol error: {e}"}
    out = {"ok": not r.is_error, "text": text_of(r), "structured": r.structured_content,
           "links": [str(c.uri) for c in r.content if getattr(c, "type", "") == "resource_link"]}
    if out["ok"]:
        schema = OUTPUT_SCHEMAS.get(name)
        if schema is None or r.structured_content is None:
            out["schema_error"] = "no outputSchema or no structuredContent"
        else:
            errors = [e.message for e in Draft202012Validator(schema).iter_errors(r.structured_content)]
            if errors:
                out["schema_error"] = "; ".join(errors)
    return out


@contextlib.asynccontextmanager
async def http_transport(url, token):
    """The SDK's streamable HTTP client, sending the bearer token."""
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, streamable_http_client(url, http_client=http) as streams:
        yield streams[0], streams[1]


async def main():
    target, where, scenario = sys.argv[1], sys.argv[2], sys.argv[3]
    mode = os.environ.get("MCP_MODE", "legacy")
    if target.startswith("http"):
        server = http_transport(target, where)
    else:
        args = ["mcp"] + (["--allow-write"] if scenario in ("full", "bad", "writer") else [])
        server = StdioServerParameters(command=target, args=args, cwd=where)
    out = {}
    async with Client(server, mode=mode, cache=None,
                      client_info=types.Implementation(name="pytest-agent", version="1.0")) as client:
        out["server"] = client.server_info.name if client.server_info else None
        out["protocol"] = client.protocol_version
        tools = await client.list_tools()
        out["tool_order"] = [t.name for t in tools.tools]
        out["tools"] = {}
        for t in tools.tools:
            OUTPUT_SCHEMAS[t.name] = t.output_schema
            out["tools"][t.name] = {
                "description": t.description, "schema": t.input_schema,
                "output_schema": t.output_schema,
                "annotations": t.annotations.model_dump(by_alias=True, exclude_none=True) if t.annotations else None,
            }
        if scenario == "writer":
            n = int(sys.argv[4])
            ids = []
            for i in range(n):
                r = await call(client, "remember", {
                    "title": f"mcp fact {i}", "content": f"mcp writer fact number {i}",
                    "kind": "fact", "certainty": 0.5})
                ids.append(r)
            out["writes"] = ids
            print(json.dumps(out))
            return
        if scenario == "index":
            s = await call(client, "search", {"query": "wombat burrow", "scopes": ["chunks"], "path_prefix": "docs"})
            out["search"] = s
            hit = (s.get("structured") or {}).get("items", [{}])[0] if s["ok"] else {}
            out["read_chunk"] = await call(client, "read", {"id": hit.get("id", "chunk:none")})
            out["read_ref"] = await call(client, "read", {"id": "c0001"})
            out["bad_chunk_kind"] = await call(client, "search", {"query": "x", "chunk_kind": "spreadsheet"})
            res = await client.list_resources()
            out["resources"] = [str(r.uri) for r in res.resources]
            md = await client.read_resource("wikioracle://llm.md")
            out["llm_md"] = md.contents[0].text
            print(json.dumps(out))
            return
        if scenario == "bad":
            out["bad"] = {
                "certainty": await call(client, "remember", {"content": "y", "certainty": 1.5}),
                "kind": await call(client, "remember", {"content": "y", "kind": "rumour"}),
                "missing": await call(client, "remember", {"title": "x"}),
                "empty_title": await call(client, "remember", {"title": "  ", "content": "y"}),
                "empty_content": await call(client, "remember", {"content": " \n "}),
                "unknown_field": await call(client, "search", {"query": "x", "colour": "red"}),
                "limit": await call(client, "search", {"query": "x", "limit": 0}),
                "budget": await call(client, "context", {"query": "x", "budget": 5}),
                "cursor": await call(client, "recent", {"cursor": "not-a-cursor"}),
                "read_missing": await call(client, "read", {"id": "t_ffffffffffffffff"}),
                "resolve_not_effort": await call(client, "resolve", {"id": sys.argv[4]}),
                "log_empty": await call(client, "log_exchange", {"question": "", "answer": "a"}),
            }
            print(json.dumps(out))
            return
        out["search"] = await call(client, "search", {"query": "kangaroo"})
        out["search_truth_only"] = await call(client, "search", {"query": "kangaroo", "scopes": ["truth"], "min_certainty": 0.9})
        out["context"] = await call(client, "context", {"query": "kangaroo habitat", "budget": 2000})
        out["recent"] = await call(client, "recent", {"limit": 5})
        out["remember"] = await call(client, "remember", {
            "title": "Deploys happen on Fridays", "content": "The team deploys **on Fridays**.",
            "kind": "effort", "certainty": 0.9, "tags": ["ops"]})
        out["remember_minimal"] = await call(client, "remember", {
            "content": "The staging server is called tuatara. It runs Debian."})
        effort = (out["remember"].get("structured") or {}).get("added")
        out["resolve"] = await call(client, "resolve", {"id": effort or "t_0000", "resolution": "moved to Mondays"})
        out["log_exchange"] = await call(client, "log_exchange", {
            "question": "What is the wombat's diet?", "answer": "Grasses and roots.", "model": "agent-model"})
        mid = (out["log_exchange"].get("structured") or {}).get("question")
        out["recent_page1"] = await call(client, "recent", {"limit": 1})
        cursor = (out["recent_page1"].get("structured") or {}).get("next_cursor")
        out["recent_page2"] = await call(client, "recent", {"limit": 1, "cursor": cursor}) if cursor else {"ok": False, "text": "no cursor"}
        out["read_message"] = await call(client, "read", {"id": mid or sys.argv[4]})
        out["read_truth"] = await call(client, "read", {"id": (effort or sys.argv[5])[:8]})
        res = await client.list_resources()
        out["resources"] = [str(r.uri) for r in res.resources]
        templates = await client.list_resource_templates()
        out["templates"] = [t.uri_template for t in templates.resource_templates]
        ctx = await client.read_resource("wikioracle://context")
        out["resource_context"] = ctx.contents[0].text
        fact = await client.read_resource(f"wikioracle://memory/{sys.argv[5]}")
        out["resource_memory"] = fact.contents[0].text
        prompts = await client.list_prompts()
        out["prompts"] = [p.name for p in prompts.prompts]
        recall = await client.get_prompt("recall", {"topic": "kangaroo"})
        out["prompt_recall"] = recall.messages[0].content.text
        efforts = await client.get_prompt("open_efforts", {})
        out["prompt_efforts"] = efforts.messages[0].content.text
    print(json.dumps(out))


asyncio.run(main())
