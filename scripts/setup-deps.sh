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
