#!/usr/bin/env bash
# Vendors noVNC (npm @novnc/novnc, MPL-2.0; its vendored pako is MIT/Zlib) into the portal's
# static files, which the binary embeds: the portal loads no script from anywhere else.
#   api/update-novnc.sh [VERSION]     default: the version vendored now
# It fetches the package from the npm registry, checks the tarball against the registry's
# integrity hash, and replaces api/portal/static/novnc with its core, vendor, licence and
# package.json. Read the diff, run the portal's browser tests, commit.
set -euo pipefail
cd "$(dirname "$0")"
dest=portal/static/novnc
version=${1:-$(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' "$dest/package.json")}
meta=$(curl -fsS "https://registry.npmjs.org/@novnc/novnc/$version")
tarball=$(printf '%s' "$meta" | sed -n 's/.*"tarball": *"\([^"]*\)".*/\1/p')
integrity=$(printf '%s' "$meta" | sed -n 's/.*"integrity": *"sha512-\([^"]*\)".*/\1/p')
[ -n "$tarball" ] && [ -n "$integrity" ] || { echo "no tarball or integrity for @novnc/novnc $version" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
curl -fsS -o "$tmp/novnc.tgz" "$tarball"
got=$(openssl dgst -sha512 -binary "$tmp/novnc.tgz" | base64 -w0)
[ "$got" = "$integrity" ] || { echo "integrity mismatch for $tarball" >&2; exit 1; }
tar -xzf "$tmp/novnc.tgz" -C "$tmp"
rm -rf "$dest"
mkdir -p "$dest"
cp -r "$tmp/package/core" "$tmp/package/vendor" "$tmp/package/LICENSE.txt" "$tmp/package/AUTHORS" "$tmp/package/package.json" "$dest/"
echo "vendored @novnc/novnc $version in api/$dest"
