# Sourced by scripts/test and scripts/demo: installs the Debian packages the build and the tests
# need (chromium: the browser tests of `vramtap view`), when they are missing and we are root;
# otherwise names them and fails. `vt_install_deps build`: only what building needs (the demo).
vt_install_deps() {
    local debs=(gcc meson ninja-build pkg-config libunwind-dev uthash-dev libjansson-dev
                libyajl-dev zlib1g-dev libdw-dev)
    [ "${1:-}" = build ] ||
        debs+=(python3 python3-torch python3-pyflakes clang-14 libclang-rt-14-dev clang-format-14
               chromium bash-completion)
    local missing=() d
    for d in "${debs[@]}"; do
        dpkg-query -W -f='${Status}' "$d" 2>/dev/null | grep -q 'install ok installed' || missing+=("$d")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" != 0 ]; then
        echo "vramtap: missing Debian packages: ${missing[*]} (run as root to install them)" >&2
        return 1
    fi
    echo "vramtap: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
