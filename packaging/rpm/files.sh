#!/bin/sh
# files.sh ROOT: the %files list of the staged tree ROOT: every file and link, and the
# directories that are the package's own (named after it: the CMake package's, the include
# directory of net_telemetry.h) or that the libraries' debug files share (.debug), which the
# package removes when it leaves them empty. The system's directories (/usr/lib64, ...) are not
# listed: the filesystem package owns them.
set -eu
cd "$1"
find . -mindepth 1 \( -type f -o -type l \) -printf '/%P\n' | LC_ALL=C sort
find . -mindepth 1 -type d \( -name '*rccl*telemetry*' -o -name .debug \) -printf '%%dir /%P\n' | LC_ALL=C sort
