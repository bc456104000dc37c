#!/usr/bin/env bash
# Builds the browser's wasm modules and writes them into the web assets:
#   crates/wo-server/src/web/wasm/wo_wasm.js       (wasm-bindgen's glue, --target web)
#   crates/wo-server/src/web/wasm/wo_wasm_bg.wasm  (crates/wo-wasm: the chat page's wo-format)
#   crates/wo-server/src/web/wasm/wo_index_wasm.js, wo_index_wasm_bg.wasm
#                                                  (crates/wo-index-wasm: wo-index with
#                                                   tree-sitter, for the ingestion page only)
# All are committed, so `cargo build` needs no wasm toolchain; wo-server
# embeds them (assets.rs). `--check` builds into a temporary directory and
# fails if the committed files differ from a fresh build (.ci/run runs it).
#
# The build is byte-reproducible: every tool is pinned below, no path or
# time is embedded (paths are remapped, no debug info, producers and name
# sections removed). Changing a version here changes the committed bytes:
# rebuild and commit them together.
#
# Recipe (../shared/MACHINE-NOTES.md, "WebAssembly"): rustup has no std for
# wasm32 here, Debian's rustc-web has its sources, so std is built with
# -Zbuild-std; lld-22 is the rust-lld it links with; wasm-opt runs on
# rustc's output before wasm-bindgen (never after), and wasm-bindgen-cli
# must be the wasm-bindgen crate's version (Cargo.lock, crates/wo-wasm).
# tree-sitter's C (wo-index-wasm) is compiled by clang-14 against the
# wasi-libc headers (declarations only: the few libc symbols it links are
# crates/wo-index-wasm/src/libc_shim.{c,rs}).
#
# Installs what is missing (apt, cargo install); quiet when all is present.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

RUST_WEB_VERSION="1.96.0+dfsg1-1~deb12u2" # rustc-web, cargo-web, rust-web-src
LLD_VERSION="1:22.1.8-1~deb12u1"          # lld-22
BINARYEN_VERSION="108-1"                  # wasm-opt
WASM_BINDGEN_VERSION="0.2.130"            # = the wasm-bindgen crate (Cargo.lock)
CLANG_VERSION="1:14.0.6-12"               # clang-14, llvm-14 (llvm-ar-14)
WASI_LIBC_VERSION="0.0~git20220510.9886d3d-2"

OUT_DIR="crates/wo-server/src/web/wasm"
# crate → module name (the files are NAME.js and NAME_bg.wasm)
PACKAGES=(wo-wasm:wo_wasm wo-index-wasm:wo_index_wasm)

check=false
case "${1:-}" in
  --check) check=true ;;
  "") ;;
  *) echo "usage: scripts/build-wasm.sh [--check]" >&2; exit 2 ;;
esac

say() { echo "build-wasm: $*" >&2; }

# --- tools -----------------------------------------------------------------
apt_need=()
for pkg in rustc-web cargo-web rust-web-src lld-22 binaryen clang-14 llvm-14 wasi-libc; do
  case "$pkg" in
    lld-22) want="$LLD_VERSION" ;;
    binaryen) want="$BINARYEN_VERSION" ;;
    clang-14 | llvm-14) want="$CLANG_VERSION" ;;
    wasi-libc) want="$WASI_LIBC_VERSION" ;;
    *) want="$RUST_WEB_VERSION" ;;
  esac
  have="$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null || true)"
  [ "$have" = "$want" ] || apt_need+=("$pkg=$want")
done
if [ ${#apt_need[@]} -gt 0 ]; then
  say "installing ${apt_need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --allow-downgrades "${apt_need[@]}" >/dev/null ||
    { apt-get update -qq && apt-get install -y -qq --allow-downgrades "${apt_need[@]}" >/dev/null; } ||
    { say "could not install ${apt_need[*]} (pinned versions; see the top of $0)"; exit 1; }
fi

BINDGEN="${CARGO_HOME:-$HOME/.cargo}/bin/wasm-bindgen"
if [ "$("$BINDGEN" --version 2>/dev/null || true)" != "wasm-bindgen $WASM_BINDGEN_VERSION" ]; then
  say "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION (a few minutes)"
  # Not --locked: its lock file pins a webpki-roots that no longer resolves.
  cargo install --quiet --force wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
fi
locked="$(grep -A1 '^name = "wasm-bindgen"$' Cargo.lock | sed -n 's/^version = "\(.*\)"$/\1/p')"
if [ "$locked" != "$WASM_BINDGEN_VERSION" ]; then
  say "Cargo.lock has wasm-bindgen $locked but this script pins $WASM_BINDGEN_VERSION: make them equal"
  exit 1
fi

# --- build -----------------------------------------------------------------
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
CARGO_HOME_DIR="${CARGO_HOME:-$HOME/.cargo}"
# No machine's paths in the module: panic locations name sources relative
# to these prefixes (and the C objects' debug-free code is prefix-mapped too).
REMAP="--remap-path-prefix=$ROOT=/wikioracle --remap-path-prefix=$CARGO_HOME_DIR=/cargo --remap-path-prefix=/usr/lib/rustlib/src/rust=/rust"
CMAP="-ffile-prefix-map=$ROOT=/wikioracle -ffile-prefix-map=$CARGO_HOME_DIR=/cargo"
FILES=()
for entry in "${PACKAGES[@]}"; do
  crate="${entry%%:*}"
  name="${entry##*:}"
  FILES+=("$name.js" "${name}_bg.wasm")
  say "compiling $crate for wasm32-unknown-unknown"
  # Debian's rustc (it has std's sources for -Zbuild-std); RUSTC_BOOTSTRAP
  # lets its stable cargo take -Z. The profile is Cargo.toml's wasm-release.
  # The C flags: wasm32-wasi headers (wasm32-unknown-unknown has none).
  env RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc RUSTC_BOOTSTRAP=1 \
    CARGO_ENCODED_RUSTFLAGS="$(printf '%s' "$REMAP" | tr ' ' '\037')" \
    CC_wasm32_unknown_unknown=clang-14 AR_wasm32_unknown_unknown=llvm-ar-14 \
    CFLAGS_wasm32_unknown_unknown="--target=wasm32-wasi --sysroot=/usr -DNDEBUG $CMAP" \
    /usr/bin/cargo build --quiet --locked -p "$crate" --profile wasm-release \
    --target wasm32-unknown-unknown -Zbuild-std=std,panic_abort \
    --target-dir "$ROOT/target/wasm"
  RAW="$ROOT/target/wasm/wasm32-unknown-unknown/wasm-release/$name.wasm"

  say "optimising $name (wasm-opt -Os)"
  wasm-opt -Os --enable-bulk-memory --enable-sign-ext --enable-nontrapping-float-to-int \
    --enable-mutable-globals --enable-reference-types --enable-multivalue \
    "$RAW" -o "$WORK/$name.wasm"

  say "generating the JS glue for $name (wasm-bindgen --target web)"
  "$BINDGEN" --target web --no-typescript --remove-name-section --remove-producers-section \
    --out-dir "$WORK/pkg" --out-name "$name" "$WORK/$name.wasm"
done

# --- install or compare ----------------------------------------------------
if $check; then
  stale=()
  for f in "${FILES[@]}"; do
    cmp -s "$WORK/pkg/$f" "$OUT_DIR/$f" || stale+=("$OUT_DIR/$f")
  done
  if [ ${#stale[@]} -gt 0 ]; then
    say "stale: ${stale[*]} differ from a fresh build; run scripts/build-wasm.sh and commit them"
    exit 1
  fi
  say "the committed wasm assets are current"
else
  mkdir -p "$OUT_DIR"
  for f in "${FILES[@]}"; do
    cp "$WORK/pkg/$f" "$OUT_DIR/$f"
    case "$f" in
      *.wasm) say "wrote $OUT_DIR/$f ($(wc -c <"$OUT_DIR/$f") bytes, $(gzip -9 -c "$OUT_DIR/$f" | wc -c) gzipped)" ;;
    esac
  done
fi
