# Shared by the peer benches (sourced; each defines `log` and REPO_ROOT first).

# Installs the Debian packages named that are not installed (checked by package, not by
# a command some other package could provide).
need_packages() {
    local missing=() p sudo=""
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    ((EUID == 0)) || sudo=sudo
    log "installing Debian packages: ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# Sets LIFEOS_BIN to an absolute path, building the release binary when it is unset.
need_lifeos() {
    if [[ -z ${LIFEOS_BIN:-} ]]; then
        log "building lifeos (release)"
        cargo build --release --quiet --bin lifeos --manifest-path "$REPO_ROOT/Cargo.toml"
        LIFEOS_BIN=$REPO_ROOT/target/release/lifeos
    fi
    LIFEOS_BIN=$(realpath "$LIFEOS_BIN")
}
