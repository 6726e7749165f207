#!/usr/bin/env bash
# Install the pinned agent clients the tests in tests/clients drive (issue 10).
#
# Usage: tests/clients/install_clients.sh CACHE_DIR
#
# Each client goes into its own npm prefix under CACHE_DIR, named <client>-<version>, so two
# Claude Code versions sit side by side. A prefix whose package is already at the pinned version
# is left alone (idempotent, fast on a warm cache). Any install that fails, or that leaves a
# different version behind, stops the script with a non-zero status and says which one.
set -euo pipefail

if [[ $# -ne 1 || -z "$1" ]]; then
    echo "usage: $0 CACHE_DIR" >&2
    exit 2
fi
cache="$1"
mkdir -p "$cache"

# prefix-name  package  version  binary
PINS=(
    "claude-2.1.197 @anthropic-ai/claude-code 2.1.197 claude"
    "claude-2.1.332 @anthropic-ai/claude-code 2.1.332 claude"
    "codex-0.171.0 @openai/codex 0.171.0 codex"
    "qwen-0.15.10 @qwen-code/qwen-code 0.15.10 qwen"
    "gemini-0.61.0 @google/gemini-cli 0.61.0 gemini"
)

installed_version() {
    # The version recorded in the prefix's package.json for $2, or nothing.
    local manifest="$1/node_modules/$2/package.json"
    [[ -f "$manifest" ]] || return 0
    node -e 'process.stdout.write(require(process.argv[1]).version || "")' "$manifest"
}

failed=0
for pin in "${PINS[@]}"; do
    read -r name package version binary <<<"$pin"
    prefix="$cache/$name"
    have="$(installed_version "$prefix" "$package")"
    if [[ "$have" == "$version" && -x "$prefix/node_modules/.bin/$binary" ]]; then
        echo "clients: $package@$version already in $prefix"
        continue
    fi
    echo "clients: installing $package@$version into $prefix"
    if ! npm install --no-audit --no-fund --prefix "$prefix" "$package@$version" \
            >"$cache/$name.install.log" 2>&1; then
        echo "clients: FAILED to install $package@$version; the end of $cache/$name.install.log:" >&2
        tail -n 30 "$cache/$name.install.log" >&2
        failed=1
        continue
    fi
    have="$(installed_version "$prefix" "$package")"
    if [[ "$have" != "$version" || ! -x "$prefix/node_modules/.bin/$binary" ]]; then
        echo "clients: FAILED: $package in $prefix is '${have:-missing}', wanted $version" \
             "(binary $binary present: $([[ -x "$prefix/node_modules/.bin/$binary" ]] && echo yes || echo no))" >&2
        failed=1
        continue
    fi
    echo "clients: $package@$version installed"
done

if [[ $failed -ne 0 ]]; then
    echo "clients: at least one pinned client could not be installed; see above" >&2
    exit 1
fi
