//! Command-line grammar. Every command's help ends with worked examples.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use wo_interop::detect::Format;

#[derive(Parser, Debug)]
#[command(
    name = "wo",
    version,
    about = "WikiOracle: your conversations with any LLM, and what you learn from them, in one llm.json you own.",
    long_about = "WikiOracle keeps conversations and the knowledge distilled from them in one plain \
file you own, llm.json at the root of a project directory, and makes it the memory for every tool.\n\n\
The state file is ./llm.json, else the nearest llm.json in a parent directory, unless --state names one.",
    after_help = "Examples:\n  \
wo init                      create ./llm.json\n  \
wo memory add \"Deploys\" --content \"We deploy on Fridays\" --certainty 0.8\n  \
wo log --grep deploy         search the transcript\n  \
wo export                    write llm_YYYY.MM.DD.HHMM.json for another machine\n  \
wo merge                     merge llm_*.json exports found beside llm.json\n\n\
Exit codes: 0 ok, 1 usage or input error, 2 the state file could not be written (it is unchanged)."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalOpts,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args, Debug, Clone)]
pub struct GlobalOpts {
    /// The state file to use (default: ./llm.json, else the nearest one in a parent directory).
    #[arg(long, global = true, value_name = "PATH", env = "WO_STATE")]
    pub state: Option<PathBuf>,
    /// Accept a state file that is a symbolic link.
    #[arg(long, global = true)]
    pub allow_symlink: bool,
    /// Refuse state files larger than this many bytes.
    #[arg(long, global = true, value_name = "BYTES", default_value_t = 256 * 1024 * 1024)]
    pub max_state_bytes: u64,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Ask a model one question; the answer streams and the turn is saved in llm.json.
    #[command(after_help = "Examples:\n  \
wo ask \"What did we decide about deploys?\"\n  \
git diff | wo ask \"Review this change\"          piped text is sent after the prompt\n  \
wo ask -f src/main.rs -f Cargo.toml \"Why does this not build?\"   attach text files\n  \
wo ask --new \"Plan the garden\"                 start a new conversation\n  \
wo ask --conversation m_3f2a \"And the roses?\"  continue one (see wo log --conversations)\n  \
wo ask -m openai/gpt-4o-mini \"Summarise our notes\"   provider/model (wo models lists them)\n  \
wo ask --show-context \"Why?\"                  print what was sent, and what was left out and why\n  \
wo ask --save answer.md --no-stream \"Draft a README intro\"\n\n\
Without --new, --conversation or --parent, the question continues the conversation you last asked in\n\
from this machine (remembered outside llm.json), so messages merged in from another machine never\n\
take it over; the first time, the conversation of the newest message.\n\
Memory (entries, recalled messages, file chunks) adds at most 4000 tokens to a question, however\n\
large the model's window; recall_tokens under [memory] in the config changes it.\n\
The offline default is the local SmolLM2 model (scripts/install-model.sh puts it in place).\n\
Ctrl-C stops the answer and keeps what arrived, marked incomplete (usage.truncated.reason = stopped).\n\
Exit codes: 0 ok; 1 provider or usage error (nothing saved); 2 llm.json could not be written; 130 interrupted.")]
    Ask(AskArgs),
    /// Talk to a model interactively; every turn is saved in llm.json.
    #[command(after_help = "Examples:\n  \
wo chat                          continue the conversation you last used here\n  \
wo chat --new                    start a new one\n  \
wo chat --conversation m_3f2a    continue this one (wo log --conversations lists them)\n  \
wo chat -m anthropic/claude-sonnet-4-5\n\n\
In the chat: end a line with \\ to continue it; /sources shows what the last answer drew on;\n\
/context shows what was sent; /branch ID continues from an earlier message; /new starts a new\n\
conversation; /exit or Ctrl-D leaves. Ctrl-C stops an answer and keeps what arrived, marked incomplete.")]
    Chat(ChatArgs),
    /// List configured providers and whether each can answer now.
    #[command(after_help = "Examples:\n  \
wo providers               check each provider (a cheap request, or loading the local model)\n  \
wo providers --no-check    just list them\n  \
wo providers --json\n\n\
Providers are configured in ~/.config/wikioracle/config.toml (WO_CONFIG overrides the path).")]
    Providers(ProvidersArgs),
    /// Create llm.json with defaults in a directory.
    #[command(after_help = "Examples:\n  \
wo init                         create ./llm.json\n  \
wo init ~/notes --context \"Notes on the garden project\"\n  \
wo init --index                 index the directory and draft the context's synopsis from it\n  \
wo init --force                 back up an invalid llm.json to llm.json.bak-<UTC> and start fresh\n\n\
If the directory already has an index (wo index), the synopsis is drafted from it.")]
    Init(InitArgs),
    /// Check state files against the llm.json v1 rules; errors name the JSON pointer and rule.
    #[command(after_help = "Examples:\n  \
wo validate llm.json\n  \
wo validate llm_*.json --json     one JSON report per file, for tools\n\n\
Exit code 1 if any file is invalid.")]
    Validate(ValidateArgs),
    /// Merge exports (llm_*.json) into the state file.
    #[command(after_help = "Examples:\n  \
wo merge                           merge every llm_*.json beside llm.json, renaming each to *.merged\n  \
wo merge --dry-run                 show what would be added, updated and skipped\n  \
wo merge ~/Downloads/llm_2026.02.22.2241.json\n\n\
Messages and memory entries are unions by id; the later edit of an entry wins; deleted entries stay deleted.\n\
The context is kept from llm.json. Merging the same file twice changes nothing.")]
    Merge(MergeArgs),
    /// Write a copy of the state for another machine or tool.
    #[command(after_help = "Examples:\n  \
wo export                              ./llm_YYYY.MM.DD.HHMM.json (local time in the name)\n  \
wo export --dir ~/Sync\n  \
wo export --format markdown --out chats.md        every conversation in one document\n  \
wo export --format markdown --split --out notes/  one .md file per conversation (Obsidian, GitHub)\n  \
wo export --format jsonl > messages.jsonl          one message per line\n  \
wo export --format chatgpt --out conversations.json   ChatGPT's export shape, for other tools\n  \
wo export --format profiles --out chats/   the profiles/<P>/chats/<C>/messages.jsonl tree\n  \
wo export --format profiles --out chats/ --copy-files-from data/profiles   with the original images\n\n\
Without --out, markdown, jsonl and chatgpt go to standard output. An existing file is never\n\
written over without --overwrite.")]
    Export(ExportArgs),
    /// Bring in conversations from another llm.json or a chat app's export.
    #[command(after_help = "Examples:\n  \
wo import ~/Downloads/chatgpt-export.zip   ChatGPT (Settings → Data controls → Export data)\n  \
wo import claude-export.zip --assistant-name claude-sonnet-4   Claude (its export names no model)\n  \
wo import \"$(llm logs path)\"           simonw/llm's logs.db (opened read-only)\n  \
wo import ~/.config/aichat/sessions/   aichat sessions\n  \
wo import chat-export.json             Open WebUI or LibreChat, told apart by shape\n  \
wo import ~/jan/threads/               Jan threads\n  \
wo import other/llm.json               merge another state file\n  \
wo import export.zip --dry-run         show what would be added; write nothing\n\n\
The format is told from the file; --format names it. Importing the same file again adds nothing.\n\
A file that cannot be read changes nothing; the error names the file and where in it.")]
    Import(ImportArgs),
    /// Show the transcript, filtered by text, user and date.
    #[command(after_help = "Examples:\n  \
wo log                              every message, oldest first\n  \
wo log --grep \"rate limit\" --user alec\n  \
wo log --since 2026-02-01 --until 2026-03-01\n  \
wo log --since 2d                   the last two days (also 3h, 1w, yesterday, today)\n  \
wo log -n 5 --json                  the last five messages as JSON lines\n  \
wo log --conversations              one line per conversation, newest first: id, last update, messages, title\n  \
wo log --conversations --archived   the archived ones (wo archive hides a conversation; --restore shows it again)\n  \
wo log --usage --since 1w           tokens per model, as the providers reported them")]
    Log(LogArgs),
    /// Hide a conversation from lists (its messages stay in llm.json), or show it again with --restore.
    #[command(after_help = "Examples:\n  \
wo archive m_3f2a                 hide the conversation holding m_3f2a… (any of its message ids)\n  \
wo log --conversations --archived list the archived ones\n  \
wo archive --restore m_3f2a       list it again\n\n\
Archiving deletes nothing: the transcript stays append-only, and the web app's Archived list shows the same conversations.")]
    Archive(ArchiveArgs),
    /// List the models each configured provider offers (from its own model list where it has one).
    #[command(after_help = "Examples:\n  \
wo models                 every provider's models; the configured one is marked *\n  \
wo models -p openai       one provider\n  \
wo models --json\n\n\
Asked from each provider's model list (OpenAI-compatible and Anthropic GET /v1/models, Ollama /api/tags);\n\
a provider without one lists its configured model. A provider that cannot be reached says why and the\n\
others are still listed (exit 1 if any failed); one not set up (no API key) is noted. Use one with -m PROVIDER/MODEL.")]
    Models(ModelsArgs),
    /// Print a shell completion script.
    #[command(after_help = "Examples:\n  \
wo completions bash > ~/.local/share/bash-completion/completions/wo\n  \
wo completions zsh > \"${fpath[1]}/_wo\"\n  \
wo completions fish > ~/.config/fish/completions/wo.fish")]
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), or write one page per command into a directory.
    #[command(after_help = "Examples:\n  \
wo man | man -l -\n  \
wo man > ~/.local/share/man/man1/wo.1\n  \
wo man --out-dir ~/.local/share/man/man1     wo.1, wo-ask.1, wo-log.1, … (then: man wo-ask)")]
    Man {
        /// Write wo.1 and a wo-COMMAND.1 page per command here instead (existing pages are replaced).
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
    /// Git merge driver for llm.json: merges %A with %B (base %O) by wo's merge, into %A.
    #[command(after_help = "Examples:\n  \
wo git-setup        configure it (what it runs: wo merge-driver %O %A %B)\n\n\
Messages and memory entries from both sides are kept (the merge wo merge uses); the result is written\n\
to %A atomically. A side that is not a valid llm.json stops the merge (exit 1, %A unchanged),\n\
and git reports a conflict.")]
    MergeDriver(MergeDriverArgs),
    /// Let git merge llm.json with wo: writes the .gitattributes line and the merge driver config.
    #[command(after_help = "Examples:\n  \
wo git-setup               in a repository holding llm.json (run again: changes nothing)\n\n\
Writes `llm.json merge=wikioracle` to .gitattributes at the repository's top and sets\n\
merge.wikioracle.name and merge.wikioracle.driver in its .git/config. Then two machines can share\n\
llm.json through git: `git pull` merges both sides' messages.")]
    GitSetup,
    /// Alias of `wo memory` for list, add, edit and rm (memory's entries are
    /// kept under `truth` in llm.json).
    #[command(subcommand)]
    Truth(TruthCommand),
    /// Show or edit the context sent with every query.
    #[command(subcommand)]
    Context(ContextCommand),
    /// Memory: the entries kept in llm.json (facts, notes, efforts, events — made by hand, by the
    /// interpreter or by an MCP client), what each exchange taught, and the background interpreter.
    #[command(subcommand)]
    Memory(MemoryCommand),
    /// Show which prompt files are in effect; write a default out for editing.
    #[command(after_help = "Examples:\n  \
wo prompts                        each prompt and the file it comes from\n  \
wo prompts --write interpreter    copy the built-in prompt beside llm.json (prompts/interpreter.md)\n  \
wo prompts --write interpreter --user   into the user config directory instead")]
    Prompts(PromptsArgs),
    /// Index a directory's files for search and retrieval (a cache in DIR/.wo-index).
    #[command(after_help = "Examples:\n  \
wo index                    index the current directory (only changed files are re-read)\n  \
wo index ~/src/project --full\n  \
wo index . --max-total-bytes 500000000   lift the 50 MB total cap\n\n\
.gitignore rules are honoured; binary, oversized and malformed files are skipped with a warning.")]
    Index(IndexArgs),
    /// Search the directory index (BM25, identifier-aware), or read chunks, outlines and symbols.
    #[command(after_help = "Examples:\n  \
wo search \"parse config file\"\n  \
wo search retry --kind rust --path src/ -n 5\n  \
wo search --get c001a              print one chunk by ref or id\n  \
wo search --outline docs/          headings of Markdown/HTML files under docs/\n  \
wo search --symbols src/main.rs    declared functions, types and classes\n  \
wo search login --json             for tools")]
    Search(SearchArgs),
    /// Write LLM-ready exports of the index: llm.md, catalog, manifests, chunks, zips, llms.txt, AGENTS.md.
    #[command(after_help = "Examples:\n  \
wo pack                         into ./.wo-pack (small projects: llm.md, llms.txt, AGENTS.md and two zips;\n                                larger ones: the pointer files and compact chunks, no zips)\n  \
wo pack --out dist/llm --layout full\n  \
wo pack --no-zip --layout compact\n\n\
The same index always gives byte-identical output.")]
    Pack(PackArgs),
    /// Serve the web app and the JSON API: your llm.json in the browser (or, --stateless, a hosted server that keeps nothing).
    #[command(after_help = "Examples:\n  \
wo serve                          http://127.0.0.1:8787/?token=… serves ./llm.json; open the printed URL\n  \
wo serve --open                   and open it in the browser\n  \
wo serve --new-token              a new sign-in link; the old one and signed-in browsers stop working\n  \
wo serve --state ~/notes/llm.json --port 9000\n  \
wo serve --stateless --bind 0.0.0.0 --allow-host wo.example.org   the hosted mode: browsers keep their own state\n  \
wo serve --stateless --allow-provider openai --allow-model gpt-4o-mini --max-tokens 1024\n  \
WO_SERVE_TOKEN=$(openssl rand -hex 24) wo serve --mcp-allow-write   a fixed token for other tools\n\n\
Other tools (local mode, Authorization: Bearer <token>): an OpenAI-compatible API at /v1 (GET /v1/models,\n\
POST /v1/chat/completions; the model is a provider's name) answers with your memory and records the\n\
exchange; MCP over streamable HTTP at /mcp (writes only with --mcp-allow-write).\n\
Local mode owns exactly one llm.json (llm_*.json exports beside it are merged first), binds loopback only,\n\
and admits only the printed URL's token (then an HttpOnly cookie; programs send Authorization: Bearer).\n\
The token is kept per project (0600, in $XDG_DATA_HOME/wikioracle/serve-tokens/), so the link and
the browser's sign-in survive restarts; --new-token replaces it.\n\
Stateless mode writes nothing and logs no content; provider keys stay on the server. Anonymous clients\n\
may use only the default provider (or those named with --allow-provider), each provider's configured model\n\
(or those named with --allow-model), and at most --max-tokens (default 4096) per answer.\n\
The API is described at /api/openapi.json.")]
    Serve(ServeArgs),
    /// Serve your memory and the project index to other tools over MCP (stdio): Claude Code, Codex, Cursor, VS Code.
    #[command(after_help = "Examples:\n  \
wo mcp                              serve ./llm.json (read-only) on stdin/stdout; a client starts this\n  \
wo mcp --allow-write                also let clients remember, resolve efforts and log exchanges\n  \
wo mcp --print-config claude        the snippet for .mcp.json (also: codex, cursor, vscode)\n  \
wo mcp --print-config codex --install   add it to ~/.codex/config.toml, keeping everything else\n\n\
Tools: context, search, read, recent; with --allow-write: remember, resolve, log_exchange.\n\
Resources: wikioracle://context, wikioracle://llm.md, wikioracle://memory/{id}, wikioracle://message/{id}.\n\
Prompts: recall, open_efforts. Writes record the client's name in x_provenance.")]
    Mcp(McpArgs),
    /// Write or update the WikiOracle section of AGENTS.md (or CLAUDE.md) for coding agents.
    #[command(after_help = "Examples:\n  \
wo agents-md                 AGENTS.md in the current directory (created, or its section updated in place)\n  \
wo agents-md --file CLAUDE.md\n\n\
Only the text between the <!-- wikioracle:begin --> and <!-- wikioracle:end --> markers changes.")]
    AgentsMd(AgentsMdArgs),
}

#[derive(Args, Debug)]
pub struct ModelsArgs {
    /// Only this provider.
    #[arg(long, short = 'p')]
    pub provider: Option<String>,
    /// One JSON object per provider.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct MergeDriverArgs {
    /// The common ancestor's version (git's %O).
    pub base: PathBuf,
    /// Our version (git's %A): the merge result is written here.
    pub ours: PathBuf,
    /// Their version (git's %B).
    pub theirs: PathBuf,
}

#[derive(Args, Debug)]
pub struct McpArgs {
    /// Let clients write: remember, resolve and log_exchange (off by default).
    #[arg(long)]
    pub allow_write: bool,
    /// The directory index used for search, read and context (default: the nearest indexed directory above llm.json).
    #[arg(long, value_name = "DIR")]
    pub index: Option<PathBuf>,
    /// Print the configuration snippet for this client instead of serving.
    #[arg(long, value_name = "CLIENT")]
    pub print_config: Option<McpClient>,
    /// With --print-config: write the snippet into the client's own file instead (the project's
    /// .mcp.json or .vscode/mcp.json, ~/.codex/config.toml, ~/.cursor/mcp.json), keeping the rest.
    #[arg(long, requires = "print_config")]
    pub install: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum McpClient {
    Claude,
    Codex,
    Cursor,
    Vscode,
}

#[derive(Args, Debug)]
pub struct AgentsMdArgs {
    /// The file to write or update.
    #[arg(long, value_name = "PATH", default_value = "AGENTS.md")]
    pub file: PathBuf,
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Port to listen on (0: any free port).
    #[arg(long, default_value_t = 8787)]
    pub port: u16,
    /// Address to bind. Local mode accepts loopback addresses only.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: std::net::IpAddr,
    /// Keep no state: the browser holds llm.json and sends what each turn needs (the hosted mode).
    #[arg(long)]
    pub stateless: bool,
    /// Also accept this Host name (stateless mode behind a domain; `*` accepts any). Repeatable.
    #[arg(long = "allow-host", value_name = "NAME")]
    pub allow_hosts: Vec<String>,
    /// Open the launch URL in the default browser.
    #[arg(long)]
    pub open: bool,
    /// Also write the launch URL (with its token) to this file, readable only by you (for scripts).
    #[arg(long, value_name = "PATH")]
    pub print_url_file: Option<PathBuf>,
    /// API requests per minute per client (0: unlimited). Default: 600 local, 120 stateless.
    #[arg(long, value_name = "N")]
    pub rate_limit: Option<u32>,
    /// Largest JSON request body, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 4 << 20)]
    pub max_body_bytes: usize,
    /// Largest export accepted by the merge upload, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 256 << 20)]
    pub max_upload_bytes: usize,
    /// The directory index used for retrieval and search (default: the nearest indexed directory above llm.json).
    #[arg(long, value_name = "DIR")]
    pub index: Option<PathBuf>,
    /// Name on your messages (default: your login name).
    #[arg(long)]
    pub username: Option<String>,
    /// Stateless: a provider clients may choose (default: only the default provider). Repeatable.
    #[arg(long = "allow-provider", value_name = "NAME")]
    pub allow_providers: Vec<String>,
    /// Stateless: a model clients may name besides each allowed provider's configured one. Repeatable.
    #[arg(long = "allow-model", value_name = "NAME")]
    pub allow_models: Vec<String>,
    /// Stateless: largest max_tokens a client may ask for, and what is sent when it asks for none (default 4096).
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u32>,
    /// Seconds a client has to send a request's headers (also ends idle kept-alive connections).
    #[arg(long, value_name = "SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout: u64,
    /// Seconds a client has to send a whole request body (a merge upload: a second more per MiB).
    #[arg(long, value_name = "SECS", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub body_timeout: u64,
    /// Open connections at once; more wait.
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: u64,
    /// Open connections from one address; more are closed (0: no cap of its own). Default: 64 stateless, 0 local.
    #[arg(long, value_name = "N")]
    pub max_connections_per_ip: Option<usize>,
    /// Let MCP clients at /mcp write: remember, resolve and log_exchange (off by default; local mode).
    #[arg(long)]
    pub mcp_allow_write: bool,
    /// Replace this project's kept sign-in token: earlier links and browser sessions stop working (local mode).
    #[arg(long, conflicts_with = "stateless")]
    pub new_token: bool,
}

#[derive(Args, Debug)]
pub struct IndexArgs {
    /// Directory to index (default: the current directory).
    pub dir: Option<PathBuf>,
    /// Re-read every file instead of reusing unchanged ones.
    #[arg(long)]
    pub full: bool,
    /// Include hidden files and directories.
    #[arg(long)]
    pub hidden: bool,
    /// Follow symbolic links (loops are detected).
    #[arg(long)]
    pub follow_symlinks: bool,
    /// Skip files larger than this.
    #[arg(long, value_name = "BYTES")]
    pub max_file_bytes: Option<u64>,
    /// Stop adding files once this many bytes are indexed.
    #[arg(long, value_name = "BYTES")]
    pub max_total_bytes: Option<u64>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct SearchArgs {
    /// What to look for.
    #[arg(required_unless_present_any = ["get", "outline", "symbols"])]
    pub query: Option<String>,
    /// The indexed directory (default: the nearest one with an index, from here up).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Only paths starting with this.
    #[arg(long, value_name = "PREFIX")]
    pub path: Option<String>,
    /// Only this kind: markdown, json, javascript, typescript, rust, python, go, html, text, image.
    #[arg(long)]
    pub kind: Option<String>,
    /// Only chunks under a heading starting with this.
    #[arg(long, value_name = "PREFIX")]
    pub heading: Option<String>,
    /// Only chunks declaring a symbol starting with this.
    #[arg(long, value_name = "PREFIX")]
    pub symbol: Option<String>,
    /// How many results.
    #[arg(short = 'n', long, default_value_t = 10)]
    pub limit: usize,
    /// Print one chunk by ref (c0001) or id.
    #[arg(long, value_name = "REF", conflicts_with_all = ["outline", "symbols"])]
    pub get: Option<String>,
    /// List headings of files under a path ("" for all).
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = "")]
    pub outline: Option<String>,
    /// List symbols of files under a path ("" for all).
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = "", conflicts_with = "outline")]
    pub symbols: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PackLayout {
    /// Archive for small projects (under 500 chunks), compact without zips for larger ones.
    Auto,
    /// Every artifact loose.
    Full,
    /// What the pointer workflow needs, loose.
    Compact,
    /// Only llm.md, llms.txt, AGENTS.md and the zips.
    Archive,
}

#[derive(Args, Debug)]
pub struct PackArgs {
    /// The indexed directory (default: the nearest one with an index, from here up).
    pub dir: Option<PathBuf>,
    /// Output directory (default: DIR/.wo-pack).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = PackLayout::Auto)]
    pub layout: PackLayout,
    /// Do not write export.zip and export.compact.zip.
    #[arg(long)]
    pub no_zip: bool,
}

#[derive(Args, Debug, Clone, Default)]
pub struct ModelOpts {
    /// Provider name from the config (default: the config's default, else `local`).
    #[arg(long, short = 'p')]
    pub provider: Option<String>,
    /// Model name (default: the provider's); PROVIDER/MODEL also picks the provider (`wo models` lists them).
    #[arg(long, short = 'm')]
    pub model: Option<String>,
    /// Sampling temperature.
    #[arg(long, short = 't')]
    pub temperature: Option<f32>,
    /// Longest answer, in tokens.
    #[arg(long)]
    pub max_tokens: Option<u32>,
    /// System instructions for this run (the stored context is still sent).
    #[arg(long)]
    pub system: Option<String>,
    /// Your name on saved messages (default: $USER).
    #[arg(long, short = 'u')]
    pub username: Option<String>,
    /// Leave memory entries out of the prompt (the rag tool off).
    #[arg(long)]
    pub no_rag: bool,
    /// Fetch the links in the memory entries sent (text only; loopback, private,
    /// link-local and multicast addresses are refused, also after redirects).
    #[arg(long)]
    pub url_fetch: bool,
    /// Also retrieve from the directory index of this folder (default: the nearest indexed one, if any).
    #[arg(long, value_name = "DIR")]
    pub index: Option<PathBuf>,
}

/// Which conversation a question goes to (ask and chat).
#[derive(Args, Debug, Clone, Default)]
pub struct ConversationOpts {
    /// Start a new conversation.
    #[arg(long, conflicts_with = "conversation")]
    pub new: bool,
    /// Continue this conversation (its id or a message's in it; a unique prefix is enough).
    #[arg(long, short = 'c', value_name = "ID")]
    pub conversation: Option<String>,
}

#[derive(Args, Debug)]
pub struct AskArgs {
    /// The question; text piped in is added after it (alone, it is the question).
    pub prompt: Option<String>,
    #[command(flatten)]
    pub model: ModelOpts,
    #[command(flatten)]
    pub conv: ConversationOpts,
    /// Attach a text file to the question (repeatable; at most 256 KiB each).
    #[arg(long = "file", short = 'f', value_name = "PATH")]
    pub files: Vec<PathBuf>,
    /// Print the answer only when it is complete.
    #[arg(long)]
    pub no_stream: bool,
    /// Also write the answer to this file (default: the config's save_path, if any).
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,
    /// Store --provider/--model/--temperature/--max-tokens/--save as the config's defaults.
    #[arg(long)]
    pub persist: bool,
    /// Print on stderr exactly what was sent, and what was dropped and why.
    #[arg(long)]
    pub show_context: bool,
    /// Continue from this message instead of the latest (branching).
    #[arg(long, value_name = "ID", conflicts_with_all = ["new", "conversation"])]
    pub parent: Option<String>,
    /// Ask a stored question again: another answer beside the earlier ones
    /// (the web app shows them as ‹1/2›). ID is the question or one of its
    /// answers (a unique prefix is enough); without ID, the latest answer of
    /// this machine's current conversation (or of --conversation's).
    #[arg(
        long,
        value_name = "ID",
        num_args = 0..=1,
        default_missing_value = "",
        conflicts_with_all = ["new", "parent", "prompt", "files"]
    )]
    pub regenerate: Option<String>,
}

#[derive(Args, Debug)]
pub struct ChatArgs {
    #[command(flatten)]
    pub model: ModelOpts,
    #[command(flatten)]
    pub conv: ConversationOpts,
}

#[derive(Args, Debug)]
pub struct ProvidersArgs {
    /// Only list; do not contact providers.
    #[arg(long)]
    pub no_check: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct InitArgs {
    /// Directory to create llm.json in (default: the current directory).
    pub dir: Option<PathBuf>,
    /// Initial context: instructions and a synopsis of the directory (plain text).
    #[arg(long)]
    pub context: Option<String>,
    /// If the existing file is invalid, back it up and start fresh.
    #[arg(long)]
    pub force: bool,
    /// Index the directory first, and draft the context's synopsis from it.
    #[arg(long)]
    pub index: bool,
}

#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// Files to check.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Print one JSON object per file.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// Export files to merge (default: every llm_*.json beside the state file).
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Report what would change; write and rename nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not rename merged files to *.merged.
    #[arg(long)]
    pub keep: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExportLayout {
    /// A complete llm.json named llm_YYYY.MM.DD.HHMM.json.
    Llm,
    /// profiles/<P>/chats/<C>/meta.json + messages.jsonl.
    Profiles,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// A complete llm.json named llm_YYYY.MM.DD.HHMM.json.
    Llm,
    /// Markdown: one document (or one per conversation with --split).
    Markdown,
    /// JSON Lines: one stored message per line, with its conversation and Markdown text.
    Jsonl,
    /// ChatGPT's conversations.json shape.
    Chatgpt,
    /// profiles/<P>/chats/<C>/meta.json + messages.jsonl.
    Profiles,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// Directory for the export file (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// What to write (default: llm).
    #[arg(long, value_enum, conflicts_with = "layout")]
    pub format: Option<ExportFormat>,
    /// Older name of --format for llm and profiles.
    #[arg(long, value_enum)]
    pub layout: Option<ExportLayout>,
    /// The file to write (markdown, jsonl, chatgpt; default: standard output), or the
    /// directory (profiles, markdown --split).
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
    /// With --format markdown: one file per conversation in the --out directory.
    #[arg(long)]
    pub split: bool,
    /// Write over existing files (profiles: into a non-empty directory).
    #[arg(long)]
    pub overwrite: bool,
    /// With --layout profiles: the tree the messages were imported from, to
    /// copy its images and other side files too.
    #[arg(long, value_name = "DIR")]
    pub copy_files_from: Option<PathBuf>,
}

/// `wo import --format`: `auto` (decide from the input's shape) or one of
/// the formats wo-interop reads, by [`Format::name`] — the one list of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ImportFormat(pub Option<Format>);

impl ValueEnum for ImportFormat {
    fn value_variants<'a>() -> &'a [Self] {
        static ALL: std::sync::LazyLock<Vec<ImportFormat>> = std::sync::LazyLock::new(|| {
            std::iter::once(None)
                .chain(Format::ALL.map(Some))
                .map(ImportFormat)
                .collect()
        });
        &ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(match self.0 {
            None => clap::builder::PossibleValue::new("auto").help("decide from the input's shape"),
            Some(f) => clap::builder::PossibleValue::new(f.name()).help(f.describe()),
        })
    }
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// File or directory to import.
    pub source: PathBuf,
    #[arg(long, value_enum, default_value_t = ImportFormat::default())]
    pub format: ImportFormat,
    /// Report what would be added; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Username for imported user messages (default: your login name).
    #[arg(long)]
    pub username: Option<String>,
    /// Name for answers whose source names no model (Claude's export, for one).
    #[arg(long, value_name = "NAME")]
    pub assistant_name: Option<String>,
}

#[derive(Args, Debug)]
pub struct ArchiveArgs {
    /// The conversation: its id (as `wo log --conversations` lists it), or any of its messages' ids; a unique prefix is enough.
    pub conversation: String,
    /// Show the conversation in lists again.
    #[arg(long)]
    pub restore: bool,
}

#[derive(Args, Debug)]
pub struct LogArgs {
    /// Only messages whose title or text contains this (case-insensitive).
    #[arg(long, short = 'g')]
    pub grep: Option<String>,
    /// Only messages by this username.
    #[arg(long, short = 'u')]
    pub user: Option<String>,
    /// Only messages at or after this time: YYYY-MM-DD, a UTC timestamp, 2d, 3h, 1w, yesterday, today.
    #[arg(long)]
    pub since: Option<String>,
    /// Only messages before this time (same forms as --since).
    #[arg(long)]
    pub until: Option<String>,
    /// Show only the last N matching messages (or the newest N conversations).
    #[arg(long, short = 'n')]
    pub limit: Option<usize>,
    /// List conversations instead of messages, newest first: id, last update, message count, title.
    #[arg(long, conflicts_with = "usage")]
    pub conversations: bool,
    /// With --conversations: list the archived conversations (hidden by `wo archive`) instead.
    #[arg(long, requires = "conversations")]
    pub archived: bool,
    /// Token totals per model from what providers reported (answers without counts are counted apart).
    #[arg(long)]
    pub usage: bool,
    /// What one answer's prompt was made of and what was left out, as recorded when it was written: the answer's id or its question's (a unique prefix is enough).
    #[arg(long, value_name = "ID", conflicts_with_all = ["conversations", "usage"])]
    pub context: Option<String>,
    /// One JSON object per line (the stored message, plus `text`).
    #[arg(long)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub enum TruthCommand {
    /// List memory entries, most certain first (alias; see `wo memory list`).
    #[command(
        after_help = "Examples:\n  wo truth list\n  wo truth list --min-certainty 0.5 --json"
    )]
    List {
        /// Hide entries below this certainty.
        #[arg(long)]
        min_certainty: Option<f64>,
        /// Print one JSON array of the entries (`[]` when there are none).
        #[arg(long)]
        json: bool,
    },
    /// Add an entry.
    #[command(after_help = "Examples:\n  \
wo truth add \"Deploy day\" --content \"We deploy on Fridays\" --certainty 0.8\n  \
wo truth add \"API notes\" --file notes.md --format markdown --kind fact\n  \
echo \"<p>from <a href='https://example.org'>a page</a></p>\" | wo truth add \"Source\" --format html")]
    Add(TruthAddArgs),
    /// Change an entry's title, content or certainty (its id stays; `updated` is set).
    #[command(after_help = "Examples:\n  \
wo truth edit t_2c1d --certainty 0.95\n  \
wo truth edit t_2c1d --content \"Deploys moved to Thursdays\"")]
    Edit(TruthEditArgs),
    /// Delete an entry; a tombstone keeps older exports from bringing it back.
    #[command(after_help = "Examples:\n  wo truth rm t_2c1d7a9f")]
    Rm {
        /// The entry's id (a unique prefix is enough).
        id: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum MemoryCommand {
    /// Every memory entry, newest first, however it was made (by hand, by the interpreter, by an
    /// MCP client); archived ones with --archived.
    #[command(
        after_help = "Examples:\n  wo memory list\n  wo memory list --kind effort --status open\n  wo memory list --tag release --json\n  wo memory list --archived"
    )]
    List {
        /// Only entries of this kind.
        #[arg(long, value_enum)]
        kind: Option<KindArg>,
        /// open or resolved (efforts).
        #[arg(long, value_enum)]
        status: Option<StatusArg>,
        /// Only entries carrying this tag.
        #[arg(long)]
        tag: Option<String>,
        /// List archived entries instead (any entry with `expires` that went
        /// unused for `[memory] archive_after_days`: kept, but no longer
        /// sent to models).
        #[arg(long)]
        archived: bool,
        /// Print one JSON array of the entries (`[]` when there are none).
        #[arg(long)]
        json: bool,
    },
    /// Add an entry by hand.
    #[command(after_help = "Examples:\n  \
wo memory add \"Deploy day\" --content \"We deploy on Fridays\" --certainty 0.8\n  \
wo memory add \"Ship v2\" --kind effort --content \"by the end of May\"\n  \
wo memory add \"API notes\" --file notes.md --format markdown --kind fact")]
    Add(TruthAddArgs),
    /// Change an entry's title, content or certainty (its id stays; `updated` is set).
    #[command(after_help = "Examples:\n  \
wo memory edit t_2c1d --certainty 0.95\n  \
wo memory edit t_2c1d --content \"Deploys moved to Thursdays\"")]
    Edit(TruthEditArgs),
    /// Delete an entry; a tombstone keeps older exports from bringing it back.
    #[command(after_help = "Examples:\n  wo memory rm t_2c1d7a9f")]
    Rm {
        /// The entry's id (a unique prefix is enough).
        id: String,
    },
    /// Search memory entries (BM25 over title and text), best
    /// first; archived entries only with --archived.
    #[command(
        after_help = "Examples:\n  wo memory search kiln schedule\n  wo memory search \"technician visit\" --archived\n  wo memory search glaze --json --limit 5"
    )]
    Search {
        /// Words to look for.
        #[arg(required = true, num_args = 1..)]
        query: Vec<String>,
        /// Search the archived entries (which retrieval no longer sends).
        #[arg(long)]
        archived: bool,
        /// Show at most this many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print one JSON array of {score, entry} (`[]` when nothing matches).
        #[arg(long)]
        json: bool,
    },
    /// The operations one exchange applied (by its answer's message id; a unique prefix is enough).
    Show {
        /// The exchange: its answer's message id, or a unique prefix of it.
        exchange: String,
        /// Print one JSON array of the journal records.
        #[arg(long)]
        json: bool,
    },
    /// Undo an exchange's operations (default: the newest not yet undone); entries edited
    /// since are kept.
    Undo {
        /// The exchange: its answer's message id, or a unique prefix of it.
        exchange: Option<String>,
    },
    /// The background interpreter's queue: pending, running, done, failed (with the reason) and
    /// cancelled exchanges, and whether the interpreter is on.
    #[command(after_help = "Examples:\n  wo memory status\n  wo memory status --json")]
    Status {
        /// Print one JSON object {interpreter, jobs}.
        #[arg(long)]
        json: bool,
    },
    /// Cancel the interpreter's queued or running work (default: all of it); nothing is
    /// remembered from a cancelled exchange.
    #[command(after_help = "Examples:\n  wo memory cancel\n  wo memory cancel m_3f2a")]
    Cancel {
        /// Only this exchange (its answer's message id, or a prefix).
        exchange: Option<String>,
    },
    /// Run the interpreter's queue now, in the foreground, until nothing is pending (`wo ask`
    /// starts this in the background after each answer).
    #[command(after_help = "Examples:\n  wo memory run\n  wo memory run --timeout 120")]
    Run {
        /// The longest one exchange may take, in seconds (the call and its one retry).
        #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=3600))]
        timeout: u64,
        /// Print nothing (how `wo ask` starts it).
        #[arg(long, short = 'q')]
        quiet: bool,
    },
    /// Accept a suggestion memory made to replace one of your own entries
    /// (`wo memory list` marks them): until then your entry stays in use.
    #[command(after_help = "Examples:\n  wo memory accept t_3f2a")]
    Accept {
        /// The suggestion's id (a unique prefix is enough).
        id: String,
    },
    /// Interpret past exchanges the interpreter has no record of (e.g. from
    /// before memory existed, or imported): prints the cost first, then one
    /// call per exchange with a progress bar. Each exchange is saved as it is
    /// done, so a stopped rebuild resumes where it was; undone exchanges stay
    /// forgotten.
    #[command(
        after_help = "Examples:\n  wo memory rebuild --dry-run\n  wo memory rebuild --since 2026-01-01 --yes\n  wo memory rebuild -p claude --yes"
    )]
    Rebuild {
        /// Only answers given at or after this time: YYYY-MM-DD, a UTC timestamp, 2d, 3h, 1w, yesterday.
        #[arg(long)]
        since: Option<String>,
        /// Print what would be interpreted and the estimated cost, and stop.
        #[arg(long)]
        dry_run: bool,
        /// Start without asking (needed when stdin is not a terminal).
        #[arg(long, short = 'y')]
        yes: bool,
        /// The provider that interprets (default: `[interpreter] provider`,
        /// else the default provider).
        #[arg(long, short = 'p')]
        provider: Option<String>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StatusArg {
    Open,
    Resolved,
}

#[derive(Args, Debug)]
pub struct PromptsArgs {
    /// Write this prompt's built-in text out for editing (refuses to overwrite).
    #[arg(long, value_name = "NAME")]
    pub write: Option<String>,
    /// With --write: into the user config directory, not beside llm.json.
    #[arg(long, requires = "write")]
    pub user: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum InputFormat {
    Text,
    Markdown,
    Html,
}

#[derive(Args, Debug)]
pub struct ContentInput {
    /// The content (default: read standard input).
    #[arg(long, conflicts_with = "file")]
    pub content: Option<String>,
    /// Read the content from a file.
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// How the content is written; it is stored as sanitised XHTML.
    #[arg(long, value_enum, default_value_t = InputFormat::Text)]
    pub format: InputFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KindArg {
    Fact,
    Effort,
    Event,
    Note,
}

#[derive(Args, Debug)]
pub struct TruthAddArgs {
    /// A short title. At a terminal, without --content or --file, the title is the whole entry:
    /// `wo memory add "The build server is named hopper"`.
    pub title: String,
    #[command(flatten)]
    pub input: ContentInput,
    /// How sure you are, from 0 to 1.
    #[arg(long, default_value_t = 0.7)]
    pub certainty: f64,
    /// What the entry is (an effort starts open).
    #[arg(long, value_enum)]
    pub kind: Option<KindArg>,
    /// A tag (repeatable).
    #[arg(long = "tag")]
    pub tags: Vec<String>,
}

#[derive(Args, Debug)]
pub struct TruthEditArgs {
    /// The entry's id (a unique prefix is enough).
    pub id: String,
    /// New title.
    #[arg(long)]
    pub title: Option<String>,
    /// New content.
    #[arg(long, conflicts_with = "file")]
    pub content: Option<String>,
    /// Read new content from a file.
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// How the new content is written; it is stored as sanitised XHTML.
    #[arg(long, value_enum, default_value_t = InputFormat::Text)]
    pub format: InputFormat,
    /// New certainty, from 0 to 1.
    #[arg(long)]
    pub certainty: Option<f64>,
}

#[derive(Subcommand, Debug)]
pub enum ContextCommand {
    /// Print the context as it was written (text, or Markdown), its plain text with --text, or its stored XHTML with --xhtml.
    #[command(
        after_help = "Examples:\n  wo context show\n  wo context show --text\n  wo context show --xhtml"
    )]
    Show {
        /// Only the plain text (no Markdown marks).
        #[arg(long, conflicts_with = "xhtml")]
        text: bool,
        /// The XHTML exactly as llm.json stores it.
        #[arg(long)]
        xhtml: bool,
    },
    /// Replace the context: from --set, --file, or your $EDITOR.
    #[command(after_help = "Examples:\n  \
wo context edit                                 opens $VISUAL or $EDITOR on the XHTML\n  \
wo context edit --set \"Answer briefly. This repo is a Rust CLI.\"\n  \
wo context edit --file context.md --format markdown")]
    Edit {
        /// The new context.
        #[arg(long, conflicts_with = "file")]
        set: Option<String>,
        /// Read the new context from a file.
        #[arg(long, value_name = "PATH")]
        file: Option<PathBuf>,
        /// How --set/--file are written (the editor always edits XHTML).
        #[arg(long, value_enum, default_value_t = InputFormat::Text)]
        format: InputFormat,
    },
    /// Embed the messages recall's embedding model has not seen yet (`wo ask` starts it in the background when many are new).
    Embed {
        /// Print nothing.
        #[arg(long)]
        quiet: bool,
    },
    /// Show exactly what would be sent for a question: each part with its kind, ids, referenced ids and tokens.
    #[command(after_help = "Examples:\n  \
wo context explain \"What did we decide about deploys?\"\n  \
wo context explain \"kiln temperature\" --budget 2000 --json\n  \
wo context explain --queries q.txt --json       one JSON line per line of q.txt\n\n\
Parts: instruction, context, memory (an entry), recalled message, recent turn, chunk, query;\n\
recalled messages and memory entries say the order the budget chose them in (`rank`,\n\
`chosen #n`); what did not fit is listed with the reason. Nothing is sent; llm.json is not changed.\n\
Tokens are estimated at 4 characters each; `wo ask --show-context` lists the same parts,\n\
counted with the model's tokenizer within its window.")]
    Explain(ExplainArgs),
}

#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// The question (or use --queries).
    #[arg(required_unless_present = "queries", conflicts_with = "queries")]
    pub query: Option<String>,
    /// Explain each line of this file (empty lines skipped), reading llm.json once.
    #[arg(long, value_name = "FILE")]
    pub queries: Option<PathBuf>,
    /// Prompt tokens available (the model's context window minus the answer's reserve).
    #[arg(long, default_value_t = 2000, value_name = "N")]
    pub budget: usize,
    /// The most tokens memory may add: memory entries, recalled messages and file chunks
    /// together (default: `recall_tokens` under `[memory]` in the config, else 4000).
    #[arg(long, value_name = "N")]
    pub recall_tokens: Option<usize>,
    /// Print JSON (with --queries: one object per line).
    #[arg(long)]
    pub json: bool,
    /// Leave out memory entries and file chunks, as `wo ask --no-rag` does.
    #[arg(long)]
    pub no_rag: bool,
    /// The message the question would follow (default: the latest).
    #[arg(long, value_name = "ID")]
    pub parent: Option<String>,
    /// The directory index to draw file chunks from (default: the nearest indexed directory above llm.json).
    #[arg(long, value_name = "DIR")]
    pub index: Option<PathBuf>,
    /// The share of the question (0 to 1) a message or entry must match to be sent
    /// (default: the measured floor `wo ask` uses; 0 sends whatever shares a word). For measurement.
    #[arg(long, value_name = "SHARE", value_parser = parse_share)]
    pub relevance_floor: Option<f64>,
    /// The share the best match must reach for the question to recall anything at all
    /// (default: the measured one `wo ask` uses). For measurement.
    #[arg(long, value_name = "SHARE", value_parser = parse_share)]
    pub relevance_gate: Option<f64>,
}

/// A share in [0, 1], for `--relevance-floor`.
fn parse_share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a number between 0 and 1")),
    }
}
