//! `wo`, the WikiOracle command line: parse arguments, call the library
//! crates, render. Logic lives in `wo-format` / `wo-store` / `wo-interop`.

/// `println!` through [`render::term`]: the only way this crate prints a
/// line to standard output (see `render`'s module docs).
macro_rules! outln {
    () => {
        $crate::render::stdout_text("\n")
    };
    ($($arg:tt)*) => {
        $crate::render::stdout_text(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` through [`render::term`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::render::stdout_text(&format!($($arg)*))
    };
}

/// `eprintln!` through [`render::term`].
macro_rules! eoutln {
    () => {
        $crate::render::stderr_text("\n")
    };
    ($($arg:tt)*) => {
        $crate::render::stderr_text(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprint!` through [`render::term`].
macro_rules! eout {
    ($($arg:tt)*) => {
        $crate::render::stderr_text(&format!($($arg)*))
    };
}

mod cli;
mod commands;
mod render;

use std::process::ExitCode;

use clap::Parser;

/// mimalloc: parsing a large llm.json allocates millions of small strings;
/// it loads a 50 MB state about a third faster than the system allocator
/// (crates/wo-engine/benches/ask_overhead.rs).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A write past the file size limit (`ulimit -f`) would kill the process
/// with SIGXFSZ, mid-write and without a word. Ignored, the write fails
/// with EFBIG instead, which every writer reports like a full disk: nothing
/// changed, the temp file removed, exit 2.
fn ignore_file_size_signal() {
    // SAFETY: setting a signal's disposition to SIG_IGN at the start of
    // `main`, before any thread exists; no handler code runs.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// Exit codes (the CLI chat format (product §9)): 0 ok, 1 usage or input error, 2 state write failure.
pub const EXIT_USAGE: u8 = 1;

fn main() -> ExitCode {
    ignore_file_size_signal();
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = match e.kind() {
                clap::error::ErrorKind::DisplayHelp
                | clap::error::ErrorKind::DisplayVersion
                | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => 0,
                _ => EXIT_USAGE,
            };
            if code == 0 {
                // Help and version text: ours, with clap's colours.
                let _ = e.print();
            } else {
                // Usage errors quote the arguments, which may come from a
                // file name or a script: through the terminal filter,
                // without colours.
                eout!("{}", e.render());
            }
            return ExitCode::from(code);
        }
    };
    match commands::run(cli) {
        Ok(code) => code,
        Err(err) => {
            eoutln!("error: {err:#}");
            let code = err
                .downcast_ref::<wo_store::StoreError>()
                .map_or(EXIT_USAGE, wo_store::StoreError::exit_code);
            ExitCode::from(code)
        }
    }
}
