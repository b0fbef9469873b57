#!/bin/sh
# Re-vendor elkjs (the Eclipse Layout Kernel compiled to JavaScript) for the interactive viewer.
#
# The viewer (fluidlite/viz/viewer.py) inlines lib/elk-worker.min.js into its one offline HTML
# file and runs it in a Web Worker made from a Blob URL. The files here are committed, so
# neither CI nor users need npm; run this script only to change the pinned version:
#
#   sh fluidlite/viz/vendor/update.sh            # needs node/npm and the npm registry
#
# It downloads the pinned tarball with `npm pack` (npm checks it against the registry's
# sha512 integrity), checks the tarball's sha256 below, and copies the worker and its licence.
set -eu
VERSION=0.11.0
TARBALL_SHA256=559188be5aba91ce22457c1e2f4693135af43e68cf9a71b53b129b762de9d52d
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"
npm pack --silent "elkjs@$VERSION" >/dev/null
echo "$TARBALL_SHA256  elkjs-$VERSION.tgz" | sha256sum -c - >/dev/null
tar xzf "elkjs-$VERSION.tgz"
cp package/lib/elk-worker.min.js "$HERE/elk-worker.min.js"
cp package/LICENSE.md "$HERE/elkjs-LICENSE.md"
FILE_SHA256=$(sha256sum "$HERE/elk-worker.min.js" | cut -d' ' -f1)
printf 'elkjs %s (npm), licence EPL-2.0 (see elkjs-LICENSE.md); tarball sha256 %s\nelk-worker.min.js sha256 %s\n' \
    "$VERSION" "$TARBALL_SHA256" "$FILE_SHA256" > "$HERE/ELKJS_VERSION"
echo "vendored elkjs $VERSION into $HERE"
