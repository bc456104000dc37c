"""Drives WikiOracle's MCP server with the official Python MCP SDK.

usage: client.py WO STATE_DIR SCENARIO [ARGS...]     `wo mcp` over stdio
       client.py URL TOKEN SCENARIO [ARGS...]        `wo serve`'s /mcp over streamable HTTP
Prints one JSON object: what every call returned, for the Rust test to check.
Scenarios: full (allow-write), readonly, bad, writer N (N remember calls).
Over HTTP the server decides whether writes are allowed (--mcp-allow-write).
"""
import asyncio
import contextlib
import json
import sys

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client


def text_of(result):
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def call(session, name, args):
    """A tool call as {"ok": bool, "text": str} (protocol errors are ok=False too)."""
    try:
        r = await session.call_tool(name, args)
        return {"ok": not r.is_error, "text": text_of(r)}
    except Exception as e:  # the SDK raises McpError for JSON-RPC errors
        return {"ok": False, "text": f"protocol error: {e}"}


@contextlib.asynccontextmanager
async def http_transport(url, token):
    """The SDK's streamable HTTP client, sending the bearer token."""
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, streamable_http_client(url, http_client=http) as streams:
        yield streams[0], streams[1]


async def main():
    target, where, scenario = sys.argv[1], sys.argv[2], sys.argv[3]
    if target.startswith("http"):
        transport = http_transport(target, where)
    else:
        args = ["mcp"] + (["--allow-write"] if scenario in ("full", "bad", "writer") else [])
        transport = stdio_client(StdioServerParameters(command=target, args=args, cwd=where))
    out = {}
    async with transport as (read, write):
        async with ClientSession(
            read, write, client_info=types.Implementation(name="pytest-agent", version="1.0")
        ) as session:
            init = await session.initialize()
            out["server"] = init.server_info.name
            if scenario == "writer":
                n = int(sys.argv[4])
                ids = []
                for i in range(n):
                    r = await call(session, "remember", {
                        "title": f"mcp fact {i}", "content": f"mcp writer fact number {i}",
                        "kind": "fact", "certainty": 0.5})
                    ids.append(r)
                out["writes"] = ids
                print(json.dumps(out))
                return
            tools = await session.list_tools()
            out["tools"] = {t.name: {"description": t.description, "schema": t.input_schema}
                            for t in tools.tools}
            if scenario == "index":
                s = await call(session, "search", {"query": "wombat burrow", "scopes": ["chunks"], "path_prefix": "docs"})
                out["search"] = s
                hit = json.loads(s["text"])["chunks"][0] if s["ok"] else {}
                out["read_chunk"] = await call(session, "read", {"id": hit.get("read_id", "chunk:none")})
                out["read_ref"] = await call(session, "read", {"id": hit.get("ref", "c9999")})
                out["bad_chunk_kind"] = await call(session, "search", {"query": "x", "chunk_kind": "spreadsheet"})
                res = await session.list_resources()
                out["resources"] = [str(r.uri) for r in res.resources]
                md = await session.read_resource("wikioracle://llm.md")
                out["llm_md"] = md.contents[0].text
                print(json.dumps(out))
                return
            if scenario == "bad":
                out["bad"] = {
                    "certainty": await call(session, "remember", {"title": "x", "content": "y", "kind": "fact", "certainty": 1.5}),
                    "kind": await call(session, "remember", {"title": "x", "content": "y", "kind": "rumour", "certainty": 0.5}),
                    "missing": await call(session, "remember", {"title": "x"}),
                    "empty_title": await call(session, "remember", {"title": "  ", "content": "y", "kind": "note", "certainty": 0.5}),
                    "unknown_field": await call(session, "search", {"query": "x", "colour": "red"}),
                    "limit": await call(session, "search", {"query": "x", "limit": 0}),
                    "read_missing": await call(session, "read", {"id": "t_ffffffffffffffff"}),
                    "resolve_not_effort": await call(session, "resolve", {"id": sys.argv[4]}),
                    "log_empty": await call(session, "log_exchange", {"question": "", "answer": "a"}),
                }
                print(json.dumps(out))
                return
            out["search"] = await call(session, "search", {"query": "kangaroo"})
            out["search_truth_only"] = await call(session, "search", {"query": "kangaroo", "scopes": ["truth"], "min_certainty": 0.9})
            out["context"] = await call(session, "context", {"query": "kangaroo habitat", "budget": 2000})
            out["recent"] = await call(session, "recent", {"limit": 5})
            out["remember"] = await call(session, "remember", {
                "title": "Deploys happen on Fridays", "content": "The team deploys **on Fridays**.",
                "kind": "effort", "certainty": 0.9, "tags": ["ops"]})
            effort = None
            if out["remember"]["ok"]:
                effort = json.loads(out["remember"]["text"])["added"]
            out["resolve"] = await call(session, "resolve", {"id": effort or "t_0000", "resolution": "moved to Mondays"})
            out["log_exchange"] = await call(session, "log_exchange", {
                "question": "What is the wombat's diet?", "answer": "Grasses and roots.", "model": "agent-model"})
            mid = None
            if out["log_exchange"]["ok"]:
                mid = json.loads(out["log_exchange"]["text"])["question"]
            out["read_message"] = await call(session, "read", {"id": mid or sys.argv[4]})
            out["read_truth"] = await call(session, "read", {"id": (effort or sys.argv[5])[:8]})
            res = await session.list_resources()
            out["resources"] = [str(r.uri) for r in res.resources]
            ctx = await session.read_resource("wikioracle://context")
            out["resource_context"] = ctx.contents[0].text
    print(json.dumps(out))


asyncio.run(main())
