// Drives WikiOracle's MCP server with the official MCP TypeScript SDK.
//
// usage: node client.mjs WO STATE_DIR SCENARIO      `wo mcp` over stdio
//        node client.mjs URL TOKEN SCENARIO         `wo serve`'s /mcp over streamable HTTP
// Scenarios: write (the server allows writing: stdio starts it with
// --allow-write), readonly. Prints one JSON object for the Rust test to check.
// The SDK itself validates each structured result against the tool's
// outputSchema (callTool throws on a mismatch).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [target, where, scenario] = process.argv.slice(2);
const transport = target.startsWith("http")
  ? new StreamableHTTPClientTransport(new URL(target), {
      requestInit: { headers: { Authorization: `Bearer ${where}` } },
    })
  : new StdioClientTransport({
      command: target,
      args: ["mcp", ...(scenario === "write" ? ["--allow-write"] : [])],
      cwd: where,
      stderr: "inherit",
    });

const client = new Client({ name: "node-agent", version: "1.0.0" });
await client.connect(transport);
const out = {
  server: client.getServerVersion()?.name,
  protocol: transport.protocolVersion ?? null,
};

const { tools } = await client.listTools();
out.tools = tools.map((t) => ({
  name: t.name,
  annotations: t.annotations ?? null,
  hasOutputSchema: t.outputSchema?.type === "object",
}));

// Valid calls of every listed tool: structured content, validated by the SDK.
const valid = {
  context: { query: "kangaroo habitat", budget: 1000 },
  search: { query: "kangaroo" },
  recent: { limit: 3 },
  remember: { content: "The build server is called numbat. It runs nightly." },
  log_exchange: { question: "Who builds?", answer: "numbat does." },
};
out.calls = {};
for (const t of tools) {
  if (t.name === "resolve" || t.name === "read") continue; // need an id: below
  let args = valid[t.name];
  try {
    const r = await client.callTool({ name: t.name, arguments: args });
    out.calls[t.name] = {
      ok: !r.isError,
      structured: r.structuredContent ?? null,
      text: r.content?.find((c) => c.type === "text")?.text ?? "",
    };
  } catch (e) {
    out.calls[t.name] = { ok: false, text: `threw: ${e.message}` };
  }
}
{
  const id = out.calls.search?.structured?.items?.[0]?.id ?? "t_none";
  const r = await client.callTool({ name: "read", arguments: { id } });
  out.calls.read = { ok: !r.isError, structured: r.structuredContent ?? null };
}
if (tools.some((t) => t.name === "resolve")) {
  const e = await client.callTool({
    name: "remember",
    arguments: { content: "Rotate the signing key", kind: "effort" },
  });
  const r = await client.callTool({
    name: "resolve",
    arguments: { id: e.structuredContent.added, resolution: "rotated" },
  });
  out.calls.resolve = { ok: !r.isError, structured: r.structuredContent ?? null };
}

// Bad arguments: tool errors the model can read, nothing written.
out.bad = {};
for (const [name, args] of [
  ["remember", { content: "x", certainty: 2 }],
  ["remember", { title: "no content" }],
  ["search", { query: "x", limit: 0 }],
]) {
  try {
    const r = await client.callTool({ name, arguments: args });
    out.bad[`${name} ${JSON.stringify(args)}`] = {
      ok: !r.isError,
      text: r.content?.find((c) => c.type === "text")?.text ?? "",
    };
  } catch (e) {
    out.bad[`${name} ${JSON.stringify(args)}`] = { ok: false, text: `threw: ${e.message}` };
  }
}

const templates = await client.listResourceTemplates();
out.templates = templates.resourceTemplates.map((t) => t.uriTemplate);
const prompts = await client.listPrompts();
out.prompts = prompts.prompts.map((p) => p.name);
await client.close();
console.log(JSON.stringify(out));
