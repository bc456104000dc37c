//! Rough speed of the `local` provider through the public API:
//! `cargo run --release -p wo-providers --example local_speed [PROMPT_WORDS] [MAX_TOKENS]`.
//!
//! Prints time to first token (prompt processing + first step) and the
//! generation rate over the remaining tokens. Uses the model the config
//! finds (`$WO_MODEL` or the data dir; `scripts/install-model.sh`).

use std::time::Instant;

use futures::StreamExt;
use wo_providers::config::{self, Config, Env};
use wo_providers::{CancellationToken, ChatMessage, ChatRequest, StreamEvent};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let words: usize = args.next().map_or(Ok(200), |a| a.parse())?;
    let max_tokens: u32 = args.next().map_or(Ok(128), |a| a.parse())?;
    let cfg = Config::builtin(Env::process());
    let p = config::build("local", &cfg)?;
    let t = Instant::now();
    let reach = p.check().await;
    println!("load: {:?} ({reach})", t.elapsed());
    let filler = "The quick brown fox jumps over the lazy dog. ".repeat(words / 9 + 1);
    let prompt = format!("{filler}\nNow count from 1 to 200, separated by commas.");
    for round in 0..3 {
        let req = ChatRequest::new(vec![ChatMessage::user(prompt.clone())])
            .with_temperature(0.0)
            .with_max_tokens(max_tokens);
        let start = Instant::now();
        let mut first = None;
        let mut last = start;
        let mut s = p.stream(req, CancellationToken::new()).await?;
        let mut usage = None;
        while let Some(ev) = s.next().await {
            match ev? {
                StreamEvent::Delta(_) => {
                    last = Instant::now();
                    first.get_or_insert(last);
                }
                StreamEvent::Done { usage: u, .. } => usage = u,
            }
        }
        let u = usage.unwrap_or_default();
        let first = first.unwrap_or(last);
        let ttft = first - start;
        let gen_secs = (last - first).as_secs_f64();
        println!(
            "round {round}: prompt {} tok, first token after {:.0} ms ({:.0} prompt tok/s incl. setup), \
             {} tok generated at {:.0} tok/s",
            u.prompt_tokens,
            ttft.as_secs_f64() * 1000.0,
            f64::from(u.prompt_tokens) / ttft.as_secs_f64(),
            u.completion_tokens,
            f64::from(u.completion_tokens.saturating_sub(1)) / gen_secs.max(1e-9),
        );
    }
    Ok(())
}
