#!/usr/bin/env bash
# Runs COMMAND where Debian's liblmdb, liburing and libjpeg are /dev/null
# (bind mounts in a private mount namespace), so a wheel that still loaded
# one of them would fail to import. Usage: without_debian_libs.sh COMMAND...
set -euo pipefail
if [ -z "${LMDBLOADER_DEBIAN_LIBS_HIDDEN:-}" ]; then
  # mount --bind needs CAP_SYS_ADMIN in the namespace: root has it; anyone
  # else gets it as root of a new user namespace (-r) owning the mounts.
  userns=()
  [ "$(id -u)" = 0 ] || userns=(-r)
  LMDBLOADER_DEBIAN_LIBS_HIDDEN=1 exec unshare "${userns[@]}" -m --propagation private bash "$0" "$@"
fi
for f in $(ls /usr/lib/x86_64-linux-gnu/{liblmdb,liburing,libjpeg,libturbojpeg}*.so* 2>/dev/null | xargs -r realpath | sort -u); do
  mount --bind /dev/null "$f"
done
if python3 -c 'import ctypes; ctypes.CDLL("liblmdb.so.0")' 2>/dev/null; then
  echo "liblmdb.so.0 still loads"; exit 1
fi
exec "$@"
