#!/bin/sh
# After `meson install` into the system: refresh the dynamic loader's cache, so that
# LD_PRELOAD=libvramtap.so finds the library by name. Nothing to do for a staged (DESTDIR)
# install or without the right to do it.
[ -z "${DESTDIR:-}" ] && [ "$(id -u)" = 0 ] && command -v ldconfig >/dev/null && ldconfig
exit 0
