#!/usr/bin/env bash
# Builds the Debian package from this tree with dpkg-buildpackage (debian/;
# what it installs is meson install's) and runs lintian on the result.
#
#   scripts/deb.sh [-o OUTDIR] [--version VERSION]
#
# OUTDIR (default build/deb) receives vufsd_VERSION_amd64.deb, the source
# package, the .changes, build.log and lintian.log. --version adds a changelog
# entry (a higher version of the same tree, for the upgrade test). The tree is
# copied first (the files git tracks and those it does not ignore), so the
# checkout gets no build products. Exit status: 0 built and lintian reported no
# error or warning, 1 otherwise (the log says which).
{
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
out=$top/build/deb version=
while [ $# -gt 0 ]; do
    case "$1" in
    -o) out=$2; shift 2 ;;
    --version) version=$2; shift 2 ;;
    *) sed -n '2,13p' "$0" >&2; exit 2 ;;
    esac
done
for t in dpkg-buildpackage dh lintian fakeroot; do
    command -v $t > /dev/null || { echo "deb: $t missing (scripts/deps.sh installs it)" >&2; exit 1; }
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/vufsd-deb.XXXXXX)
trap 'rm -rf "$work"' EXIT
src=$work/vufsd
mkdir "$src"
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$src" 2> /dev/null ||
    git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [ -e "$f" ] && cp --parents -P "$f" "$src"; done
if [ -n "$version" ]; then
    { printf 'vufsd (%s) unstable; urgency=medium\n\n  * Rebuilt as %s.\n\n -- %s  %s\n\n' \
        "$version" "$version" \
        "$(sed -n 's/^Maintainer: //p' "$src/debian/control")" "$(date -R)"
      cat "$src/debian/changelog"; } > "$src/debian/changelog.new"
    mv "$src/debian/changelog.new" "$src/debian/changelog"
fi
version=$(cd "$src" && dpkg-parsechangelog -S Version)
echo "deb: building vufsd $version (logs in $out)"
if ! (cd "$src" && dpkg-buildpackage -us -uc -rfakeroot) > "$out/build-$version.log" 2>&1; then
    tail -n 30 "$out/build-$version.log" >&2
    echo "deb: dpkg-buildpackage failed" >&2
    exit 1
fi
rm -f "$out"/vufsd_"$version"[._]* "$out"/vufsd-dbgsym_"$version"_*
mv "$work"/vufsd_"$version"[._]* "$work"/vufsd-dbgsym_"$version"_* "$out"/
# lintian: every tag it has an opinion on; --fail-on warning makes a new
# warning fail the build (debian/vufsd.lintian-overrides and
# debian/source/lintian-overrides hold the explained ones).
rc=0
root=()
[ "$(id -u)" != 0 ] || root=(--allow-root)
lintian "${root[@]}" --info --display-info --pedantic --fail-on error,warning \
    "$out/vufsd_${version}_amd64.changes" > "$out/lintian-$version.log" 2>&1 || rc=1
cat "$out/lintian-$version.log"
echo "deb: $out/vufsd_${version}_amd64.deb ($(stat -c %s "$out/vufsd_${version}_amd64.deb") bytes), lintian $([ $rc = 0 ] && echo clean || echo FAILED)"
exit $rc
}
