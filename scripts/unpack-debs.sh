#!/usr/bin/env bash
# Installs the files of Debian packages given as .deb files under /usr/local, on a machine that has no
# apt or no network (a bare GPU machine): kiln needs libhiredis-dev and libhiredis0.14, and
# libcurl4-openssl-dev (with libcurl4), to build, and redis-server (with the libraries it loads) for the
# remote tier's tests. It changes the system (it copies into /usr/local and runs ldconfig), so it is a
# step of its own, run once before the tests; it does nothing where hiredis and libcurl are installed.
#   scripts/unpack-debs.sh DIR [PREFIX]    (DIR holds the .deb files; PREFIX: /usr/local)
set -euo pipefail
dir="${1:?usage: scripts/unpack-debs.sh DIR [PREFIX] (DIR: a folder of .deb files)}"
prefix="${2:-/usr/local}"
ls "$dir"/*.deb > /dev/null 2>&1 || { echo "unpack-debs.sh: no .deb files in $dir" >&2; exit 2; }
if [ "$prefix" = /usr/local ] && pkg-config --exists hiredis libcurl 2>/dev/null; then
  echo "unpack-debs.sh: hiredis and libcurl are installed already; nothing to do"
  exit 0
fi
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
for deb in "$dir"/*.deb; do dpkg -x "$deb" "$root"; done
libdir="$(echo "$root"/usr/lib/*-linux-gnu)"
# The libraries where the loader looks without LD_LIBRARY_PATH: the installed test runs the installed
# kiln with none, as a user's shell would.
mkdir -p "$prefix/lib" "$prefix/include" "$prefix/bin"
cp -a "$libdir"/*.so* "$prefix/lib/"
# libcurl4-openssl-dev without Debian's libcurl4: a machine whose own libcurl.so.4 (e.g. Ubuntu's
# libcurl4t64) is installed links against that one; Debian's libcurl4 would need libraries it lacks.
if [ -L "$prefix/lib/libcurl.so" ] && [ ! -e "$prefix/lib/libcurl.so" ]; then
  system_curl=$(ls /usr/lib/*-linux-gnu/libcurl.so.4 2>/dev/null | head -n 1)
  [ -n "$system_curl" ] || { echo "unpack-debs.sh: libcurl4-openssl-dev needs libcurl4's .deb too (no libcurl.so.4 here)" >&2; exit 2; }
  ln -sf "$system_curl" "$prefix/lib/libcurl.so"
fi
[ "$prefix" = /usr/local ] && ldconfig
# Their .pc files where pkg-config looks by default (the installed test sets PKG_CONFIG_PATH to its
# prefix alone, and kiln.pc requires hiredis), naming /usr/local instead of Debian's /usr.
mkdir -p "$prefix/lib/pkgconfig"
for pc in "$libdir"/pkgconfig/*.pc; do
  sed -e "s|^prefix=.*|prefix=$prefix|" -e "s|^libdir=.*|libdir=$prefix/lib|" \
    -e "s|^includedir=/usr/|includedir=$prefix/|" "$pc" > "$prefix/lib/pkgconfig/$(basename "$pc")"
done
if [ -d "$root/usr/include" ]; then cp -a "$root"/usr/include/. "$prefix/include/"; fi
# The programs, redis-server among them (tests/cpu/redis_server.hpp looks in /usr/bin, /usr/local/bin and
# /usr/sbin); Debian's redis-server is redis-check-rdb under another name (Redis runs as the server when
# argv[0] names redis-server).
if [ -d "$root/usr/bin" ]; then
  cp -a "$root"/usr/bin/. "$prefix/bin/"
  if [ -e "$prefix/bin/redis-check-rdb" ]; then ln -sf "$prefix/bin/redis-check-rdb" "$prefix/bin/redis-server"; fi
fi
echo "unpack-debs.sh: installed $(ls "$dir"/*.deb | wc -l) packages' files under $prefix"
