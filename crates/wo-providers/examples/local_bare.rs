//! The reference for `bench/local_speed.py`: a bare `llama-cpp-2` loop with
//! no provider around it — same GGUF, same prompt (built with the model's
//! chat template, as the `local` provider does), same thread count, greedy.
//!
//! `cargo run --release -p wo-providers --features local --example local_bare
//! [PROMPT_WORDS] [MAX_TOKENS] [--threads N] [--flash-attn auto|on|off] [--n-ctx N]`
//!
//! Each round prints two generation figures: llama.cpp's own decode counter
//! (`llama_perf_context`: `t_eval_ms` / `n_eval`, the single-token decodes
//! only — the figure llama-cpp-python's reference reports) and the wall
//! time per token from the first sampled token to the last (decode plus the
//! greedy pick, the same span `local_speed` measures through the stream).
//! It also prints how long creating the context took (the provider makes
//! one per answer, and its time to first token includes it).
//! The flags exist to try context settings against each other; by default
//! the context is set up like llama.cpp's defaults with the provider's
//! context size (prompt plus answer).

use std::num::NonZeroU32;
use std::time::Instant;

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use wo_providers::config::{Env, default_model_path};

/// Tokens per prompt batch: llama.cpp's default `n_batch`.
const BATCH: usize = 512;

struct Args {
    words: usize,
    max_tokens: usize,
    threads: i32,
    flash_attn: Option<i32>,
    n_ctx: Option<u32>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        words: 200,
        max_tokens: 128,
        threads: std::thread::available_parallelism()
            .map_or(2, |n| i32::try_from(n.get()).unwrap_or(2)),
        flash_attn: None,
        n_ctx: None,
    };
    let mut positional = 0;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |flag: &str| it.next().ok_or(format!("{flag} needs a value"));
        let num = |flag: &str, v: String| -> Result<usize, String> {
            v.parse().map_err(|e| format!("{flag} {v:?}: {e}"))
        };
        match arg.as_str() {
            "--threads" => {
                let v = value("--threads")?;
                a.threads = i32::try_from(num("--threads", v)?).map_err(|e| e.to_string())?;
            }
            "--n-ctx" => {
                let v = value("--n-ctx")?;
                a.n_ctx = Some(u32::try_from(num("--n-ctx", v)?).map_err(|e| e.to_string())?);
            }
            "--flash-attn" => {
                // llama.h's llama_flash_attn_type values (llama-cpp-2 does
                // not re-export the -sys constants).
                a.flash_attn = Some(match value("--flash-attn")?.as_str() {
                    "auto" => -1,
                    "on" => 1,
                    "off" => 0,
                    other => return Err(format!("--flash-attn {other:?}: want auto, on or off")),
                });
            }
            _ if positional == 0 => {
                a.words = num("PROMPT_WORDS", arg)?;
                positional += 1;
            }
            _ if positional == 1 => {
                a.max_tokens = num("MAX_TOKENS", arg)?;
                positional += 1;
            }
            _ => return Err(format!("unexpected argument {arg:?}")),
        }
    }
    Ok(a)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let path = default_model_path(&Env::process()).ok_or("no model path: set WO_MODEL")?;
    llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default().with_logs_enabled(false));
    let backend = LlamaBackend::init()?;
    let model = LlamaModel::load_from_file(&backend, &path, &LlamaModelParams::default())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let template = model
        .chat_template(None)
        .or_else(|_| LlamaChatTemplate::new("chatml"))?;
    // The same prompt as examples/local_speed.rs and bench/local_speed.py.
    let filler = "The quick brown fox jumps over the lazy dog. ".repeat(args.words / 9 + 1);
    let prompt = format!("{filler}\nNow count from 1 to 200, separated by commas.");
    let chat = [LlamaChatMessage::new("user".into(), prompt)?];
    let text = model.apply_chat_template(&template, &chat, true)?;
    let tokens = model.vocab().tokenize(text.as_bytes(), true, true);
    let n_ctx = args
        .n_ctx
        .unwrap_or_else(|| u32::try_from(tokens.len() + args.max_tokens).unwrap_or(u32::MAX));
    println!(
        "bare llama-cpp-2: {} threads, n_ctx {n_ctx}, flash_attn {}",
        args.threads,
        args.flash_attn
            .map_or_else(|| "default".to_owned(), |f| f.to_string())
    );
    for round in 0..3 {
        let mut params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(n_ctx))
            .with_n_batch(BATCH as u32)
            .with_n_threads(args.threads)
            .with_n_threads_batch(args.threads)
            // llama.cpp's default turns its perf counters off.
            .with_no_perf(false);
        if let Some(f) = args.flash_attn {
            params = params.with_flash_attention_policy(f);
        }
        let made = Instant::now();
        let mut ctx = model.new_context(&backend, params)?;
        let ctx_ms = made.elapsed().as_secs_f64() * 1000.0;
        ctx.reset_timings();
        let mut batch = LlamaBatch::new(BATCH, 1);
        let last = tokens.len() - 1;
        for (n, chunk) in tokens.chunks(BATCH).enumerate() {
            batch.clear();
            for (j, tok) in chunk.iter().enumerate() {
                let pos = n * BATCH + j;
                batch.add(*tok, i32::try_from(pos)?, &[0], pos == last)?;
            }
            ctx.decode(&mut batch)?;
        }
        let mut sampler = LlamaSampler::greedy();
        let mut pos = tokens.len();
        let mut generated = 0usize;
        let mut first = None;
        let end = loop {
            let token = sampler.sample(&ctx, batch.n_tokens() - 1);
            let now = Instant::now();
            first.get_or_insert(now);
            if model.vocab().is_eog(token) {
                break now;
            }
            generated += 1;
            if generated >= args.max_tokens {
                break now;
            }
            batch.clear();
            batch.add(token, i32::try_from(pos)?, &[0], true)?;
            pos += 1;
            ctx.decode(&mut batch)?;
        };
        let t = ctx.timings();
        let wall = (end - first.unwrap_or(end)).as_secs_f64();
        println!(
            "round {round}: prompt {} tok at {:.0} tok/s (counter), {} tok generated: \
             counter {} decodes at {:.0} tok/s, wall {:.0} tok/s; context created in {ctx_ms:.1} ms",
            t.n_p_eval(),
            f64::from(t.n_p_eval()) / (t.t_p_eval_ms() / 1000.0).max(1e-9),
            generated,
            t.n_eval(),
            f64::from(t.n_eval()) / (t.t_eval_ms() / 1000.0).max(1e-9),
            generated.saturating_sub(1) as f64 / wall.max(1e-9),
        );
    }
    Ok(())
}
