//! `wo mcp`: the Model Context Protocol face (product §8's "every tool shares
//! the memory"). Owns the MCP tool and resource surface over one `llm.json`
//! and its directory index, served over stdio with the official Rust SDK
//! (`rmcp`; [`stdio`] answers the lines rmcp cannot take, so a malformed
//! line never ends the session), and over streamable HTTP at `wo serve`'s `/mcp` ([`http`];
//! the server in front checks the token and the `Host`). Thin: each tool parses its arguments, calls a library
//! (`wo_engine` retrieval and explain, `wo_store` writes, `wo_index` search)
//! and renders JSON. Writes go through [`write::apply`], the one function
//! that changes the file, and only with `--allow-write` (`wo serve
//! --mcp-allow-write` over HTTP).
//!
//! Also owns the text other tools are given: [`config::snippet`] (client
//! configuration for Claude Code, Codex, Cursor, VS Code) and
//! [`config::agents_md`] (the `AGENTS.md` / `CLAUDE.md` block).

pub mod config;
pub mod http;
mod server;
pub mod stdio;
pub mod write;

pub use server::{McpOptions, WikiOracleMcp, serve_stdio};
