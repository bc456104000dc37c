//! For wasm32 only: compiles `src/libc_shim.c`, the few C library symbols tree-sitter's C
//! needs that wasm32-unknown-unknown has no libc for (stdio as no-ops, `isw*`, `strncmp`, the
//! clock, `abort`); the malloc family is Rust's allocator, in `src/libc_shim.rs`. The C
//! compiler and flags come from `scripts/build-wasm.sh` (clang with the wasi-libc headers).

fn main() {
    println!("cargo:rerun-if-changed=src/libc_shim.c");
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        cc::Build::new()
            .file("src/libc_shim.c")
            .warnings(false)
            .compile("wo_libc_shim");
    }
}
